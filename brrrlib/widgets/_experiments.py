"""The repeat experiment behind chapter 02's explorer: ``x = x * 2``, repeated, eager or fused."""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Callable, Sequence
from typing import Any

import torch

from brrrlib import _checks, _fmt, counting, machine, sweeps
from brrrlib.ceilings import measure_ceilings
from brrrlib.sweeps import Case, Sweep

__all__ = ["MAX_POINT_S", "MODES", "X_LABEL", "predicted_knee_repeat", "repeat_bytes_needed"]
__all__ += ["repeat_case", "repeat_model_s", "repeat_size", "repeat_sweep"]

MODES = ("eager", "fused")
X_LABEL = "repeat (multiplies per element)"
# Warm-up after a fresh torch.compile. Measured on a busy 2-core CPU: right after
# a compile the new kernel's calls often took ~12 ms instead of 15 µs (the OpenMP
# threads of a new kernel settling, pytorch/pytorch#93665); 1 s of calls settles it.
_FUSED_WARMUP_S = 1.0
# A point predicted to take longer than this to measure (seconds) is skipped
# with a note, unless asked for: an eager point's time is repeat x one pass anyway.
MAX_POINT_S = 10.0
# bl.benchmark makes about this many calls at the least (first call, two estimates,
# five samples): what a point costs to measure when one call is long.
_CALLS_PER_POINT = 8


def _eager_into(x: torch.Tensor, repeat: int) -> Callable[[], torch.Tensor]:
    """``repeat`` kernels ``torch.mul(src, 2, out=dst)``, ping-ponging two existing buffers."""
    buffers = (torch.zeros_like(x), torch.zeros_like(x))  # zeros: pages touched now, not timed

    def eager_into() -> torch.Tensor:
        src = x
        for i in range(repeat):
            src = torch.mul(src, 2, out=buffers[i % 2])  # one pass: read 4 B, write 4 B
        return src

    return eager_into


def _times_two(y: torch.Tensor, repeat: int) -> torch.Tensor:
    """``y = y * 2``, ``repeat`` times: eager, every multiply allocates a fresh output."""
    for _ in range(repeat):
        y = y * 2
    return y


@functools.cache
def _fused(repeat: int) -> Callable[..., Any]:
    """``torch.compile`` of ``repeat`` multiplies into ``out``: one kernel, one pass."""

    def chain_into(x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(_times_two(x, repeat))  # Inductor writes the fused result straight into out

    # A code object of its own per repeat: dynamo keeps its compiled code per code object.
    code, closure = chain_into.__code__.replace(), chain_into.__closure__
    fn = types.FunctionType(code, chain_into.__globals__, f"chain_{repeat}", None, closure)
    return torch.compile(fn, dynamic=False)


@functools.cache
def _counted_per_element(repeat: int) -> tuple[float, float]:
    """FLOPs and bytes per element of one eager call, counted by bl.count on 1024 elements."""
    n = 1024
    counts = counting.count(_eager_into(torch.ones(n), repeat))
    return counts.flops / n, counts.bytes_moved / n


def repeat_bytes_needed(size: int, mode: str) -> int:
    """Peak memory of one point: input and two buffers (eager) or input and output (fused)."""
    return (3 if mode == "eager" else 2) * 4 * size


def repeat_case(
    size: int,
    repeat: int,
    mode: str,
    device: str | torch.device | None = None,
    *,
    fresh_output: bool = False,
) -> Case:
    """What one point of the repeat experiment runs (see the module docstring)."""
    size, repeat = _checks.positive_int("size", size), _checks.positive_int("repeat", repeat)
    _checks.one_of("mode", mode, MODES[:1] if fresh_output else MODES)  # fused never allocates
    dev = machine.resolve(device)
    x = torch.randn(size, device=dev)
    flops_per_element, eager_bytes_per_element = _counted_per_element(repeat)
    flops = round(flops_per_element * size)
    label = f"{repeat} x (x * 2), {mode}{', fresh output' if fresh_output else ''}"
    if mode == "eager":
        fn = functools.partial(_times_two, x, repeat) if fresh_output else _eager_into(x, repeat)
        nbytes = round(eager_bytes_per_element * size)
        return Case(fn, flops, nbytes, dev, label, size=size, ops=repeat)
    fn = functools.partial(_fused(repeat), x, torch.zeros_like(x))
    machine.sync(dev)
    start = time.perf_counter()
    fn()  # the first call compiles: kept apart from the timing
    machine.sync(dev)
    timing = {"warmup_s": _FUSED_WARMUP_S, "compile_s": time.perf_counter() - start}
    return Case(fn, flops, 2 * 4 * size, dev, label, size=size, ops=1, **timing)  # one pass


def repeat_model_s(ceilings: Any, size: int, repeat: int, mode: str) -> float:
    """The roofline model's seconds for one call, from this machine's ceilings."""
    f, b = ceilings.vector_flops_per_s, ceilings.mem_bandwidth_bytes_per_s
    if mode == "eager":
        return repeat * (max(size / f, 8 * size / b) + ceilings.op_overhead_s)
    return max(repeat * size / f, 8 * size / b) + ceilings.op_overhead_s


def predicted_knee_repeat(ceilings: Any, element_size: int = 4) -> float:
    """Repeat count where the fused chain turns from memory- to compute-bound."""
    return ceilings.vector_flops_per_s * 2 * element_size / ceilings.mem_bandwidth_bytes_per_s


def repeat_size(device: torch.device, ceilings: Any) -> int:
    """The default tensor size (elements) of the repeat experiment on ``device``."""
    cache, c, n = machine.last_level_cache_bytes(device), ceilings, 2**16
    while 4 * n < 2 * cache or 8 * n < 20 * c.op_overhead_s * c.mem_bandwidth_bytes_per_s:
        n *= 2  # twice the cache at least, and a pass 20x an op's overhead
    return n


def repeat_sweep(
    size: int | None = None,
    repeats: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128),
    device: str | torch.device | None = None,
    *,
    ceilings: Any = None,
    pairs: Sequence[tuple[tuple[int, str], tuple[int, str]]] = (),
    max_point_s: float = MAX_POINT_S,
    progress: bool = True,
    modes: Sequence[str] = MODES,
    setup: Callable[..., Case] = repeat_case,
    into: Sweep | None = None,
) -> Sweep:
    """Chapter 02's repeat experiment: ``modes`` at every repeat, with the model; slow points skipped."""
    dev = machine.resolve(device)
    c = ceilings if ceilings is not None else measure_ceilings(dev, progress=False)
    size = _checks.positive_int("size", size) if size is not None else repeat_size(dev, c)
    repeats = [_checks.positive_int("repeat", r) for r in repeats]

    def skip(repeat: int, mode: str) -> str | None:
        point_s = _CALLS_PER_POINT * repeat_model_s(c, size, repeat, mode)
        if point_s <= max_point_s:
            return None
        return f"{point_s:.0f} s > max_point_s={max_point_s:g}: force=True measures it"

    return sweeps.sweep(
        "repeat",
        repeats,
        modes,
        lambda r, m: setup(size=size, repeat=r, mode=m, device=dev),
        pairs=pairs,
        predict=lambda r, m: repeat_model_s(c, size, r, m),
        skip=skip,
        memory=lambda _r, m: repeat_bytes_needed(size, m),
        device=dev,
        into=into,
        x_label=X_LABEL,
        title=f"x = x * 2, repeated, on {_fmt.elements(size)} fp32 elements ({dev.type})",
        progress=progress,
    )
