"""What one slider position measures: the points of chapters 02 and 03.

:func:`measure_repeat` and :func:`measure_batch` take one measurement each
through the library (:func:`brrrlib.benchmark` for the time,
:func:`brrrlib.count` for FLOPs and bytes) and return a frozen
:class:`RepeatPoint` or :class:`BatchPoint`. The explorers call them; they
draw nothing. Re-exported by :mod:`brrrlib.widgets`.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from brrrlib import counting, devices, timing
from brrrlib._fmt import seconds as _fmt_s
from brrrlib.counting import _si as _fmt

__all__ = [
    "FUSED_WARMUP_S",
    "POINT_BUDGET_S",
    "POINT_WARMUP_S",
    "BatchPoint",
    "RepeatPoint",
    "measure_batch",
    "measure_repeat",
    "predicted_knee_repeat",
    # for the explorers' modules
    "_MODES",
    "_input_maker",
    "_model_device",
    "_positive_int",
    "_weight_bytes",
]

# Time budget for one point, in seconds (bl.benchmark's budget_s/warmup_s).
# Small, so a slider move stays well under ~2 s when one call is short;
# bl.benchmark still takes at least 5 samples, so a call that lasts 0.5 s
# costs ~3.5 s to measure (the readout warns before such a measurement).
POINT_BUDGET_S = 0.15
POINT_WARMUP_S = 0.02
# Warm-up after a fresh torch.compile. Measured on a busy 2-core CPU: right
# after a compile the new kernel's calls often took ~12 ms instead of 15 µs
# (4096 elements; 0.02 s warm-up: 12 ms median, 1 s: 16 µs), the OpenMP
# threads of a new kernel settling (see pytorch/pytorch#93665). Not always
# enough on an overloaded machine: the Timing then says "noisy".
FUSED_WARMUP_S = 1.0

_MODES = ("eager", "fused")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return value


class _MeasuredPoint:
    """What both explorers' points derive from a Timing and their counts."""

    timing: Any  # brrrlib.Timing: every sample, median and spread
    flops: int
    bytes_moved: int

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        return self.timing.median_s

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s: counted FLOPs over the median time."""
        return self.flops / self.median_s

    @property
    def bytes_per_s(self) -> float:
        """Achieved memory bandwidth: counted bytes moved over the median time."""
        return self.bytes_moved / self.median_s


# =========================================================================== chapter 02


@dataclass(frozen=True)
class RepeatPoint(_MeasuredPoint):
    """One measured point of the repeat-count experiment (chapter 02).

    ``repeat`` multiplications ``x = x * 2`` applied to a float32 tensor of
    ``size`` elements, run ``mode="eager"`` (one kernel per multiplication,
    each a full pass over memory) or ``mode="fused"`` (``torch.compile`` of
    the same loop: one kernel, one pass, ``repeat`` multiplications per
    element). ``flops`` counts one FLOP per element per multiplication (the
    convention of :func:`brrrlib.count`); ``bytes_moved`` is what the
    kernels must read and write: ``repeat x 2 x 4 x size`` bytes eager,
    ``2 x 4 x size`` fused. ``compile_s`` is the first call of the fused
    version (compilation), kept apart from the timing.
    """

    size: int
    repeat: int
    mode: str
    device: str
    timing: Any  # brrrlib.Timing: every sample, median and spread
    flops: int
    bytes_moved: int
    compile_s: float | None = None

    @property
    def intensity_flops_per_byte(self) -> float:
        """Arithmetic intensity: FLOPs per byte moved (repeat/8 fused, 1/8 eager)."""
        return self.flops / self.bytes_moved

    def __repr__(self) -> str:
        return (
            f"RepeatPoint(repeat={self.repeat}, mode={self.mode!r}, size={self.size}, "
            f"device={self.device!r}, median={_fmt_s(self.median_s)}, "
            f"{_fmt(self.bytes_per_s, 'B/s')}, {_fmt(self.flops_per_s, 'FLOP/s')})"
        )


def _repeat_mul(repeat: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``x = x * 2``, ``repeat`` times: the essay's repeat-count experiment."""

    def repeat_mul(x: torch.Tensor) -> torch.Tensor:
        for _ in range(repeat):
            x = x * 2  # out of place: eager allocates and writes a new tensor each time
        return x

    return repeat_mul


@functools.cache
def _fused_repeat_mul(repeat: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``torch.compile`` of ``_repeat_mul(repeat)``: one kernel doing ``repeat`` muls.

    torch.compile caches compiled graphs per *code object* and, after a
    limit (8 by default), silently falls back to eager. Every repeat count
    is a different graph, so each one gets its own copy of the code object
    (``code.replace()``) and hence its own cache: 20 slider positions never
    hit the limit. (Multiplying by 2 is not folded into one multiply by
    2**repeat by the compiler: the measured time grows with repeat.)
    """
    base = _repeat_mul(repeat)
    fn = types.FunctionType(
        base.__code__.replace(), base.__globals__, f"repeat_mul_{repeat}", None, base.__closure__
    )
    return torch.compile(fn, dynamic=False)


@functools.cache
def _counted_per_element(repeat: int) -> tuple[float, float]:
    """FLOPs and bytes per element of the eager loop, counted by bl.count.

    Every op in the loop is pointwise, so its cost is exactly proportional
    to the number of elements: counting a 1024-element tensor and scaling is
    exact and avoids running the full-size loop once more just to count.
    """
    n = 1024
    counts = counting.count(_repeat_mul(repeat), torch.ones(n))
    return counts.flops / n, counts.bytes_moved / n


def measure_repeat(
    size: int,
    repeat: int,
    mode: str,
    device: str | torch.device | None = None,
    *,
    budget_s: float = POINT_BUDGET_S,
) -> RepeatPoint:
    """Measure ``repeat`` x ``x = x * 2`` on ``size`` float32 elements, eager or fused.

    This is what :func:`repeat_explorer` calls for each new slider position;
    call it yourself to measure a point from code. Time through
    :func:`brrrlib.benchmark` (warm-up, sync, repeats, median); FLOPs and
    eager bytes through :func:`brrrlib.count`. Fused bytes are the minimum
    one kernel must move: read the input once, write the output once
    (``bl.count`` counts each op's reads and writes, the unfused cost).
    The fused function's first call compiles it; its duration is kept in
    ``compile_s`` and is not part of the timing, and the fused kernel gets a
    longer warm-up (``FUSED_WARMUP_S``): right after a compile its first
    calls can be far slower than its steady state.
    """
    size = _positive_int("size", size)
    repeat = _positive_int("repeat", repeat)
    if mode not in _MODES:
        raise ValueError(f"mode must be 'eager' or 'fused', got {mode!r}")
    dev = devices.resolve(device)
    x = torch.randn(size, device=dev)
    flops_per_el, eager_bytes_per_el = _counted_per_element(repeat)
    compile_s = None
    if mode == "eager":
        fn = _repeat_mul(repeat)
        bytes_moved = round(eager_bytes_per_el * size)
    else:
        fn = _fused_repeat_mul(repeat)
        bytes_moved = 2 * x.element_size() * size
        compile_s = _first_call_s(fn, x, dev)
    label = f"{repeat} x (x * 2), {mode}, {size} elements"
    warmup_s = FUSED_WARMUP_S if mode == "fused" else POINT_WARMUP_S
    t = timing.benchmark(fn, x, budget_s=budget_s, warmup_s=warmup_s, device=dev, label=label)
    return RepeatPoint(
        size=size,
        repeat=repeat,
        mode=mode,
        device=str(dev),
        timing=t,
        flops=round(flops_per_el * size),
        bytes_moved=bytes_moved,
        compile_s=compile_s,
    )


def _first_call_s(fn: Callable, x: torch.Tensor, dev: torch.device) -> float:
    """Wall time of one call, synced: for a compiled function, the compile."""
    import time

    devices.sync(dev)
    start = time.perf_counter()
    fn(x)
    devices.sync(dev)
    return time.perf_counter() - start


def predicted_knee_repeat(ceilings: Any, element_size: int = 4) -> float:
    """Repeat count where the fused loop turns from memory- to compute-bound.

    One fused call reads and writes each element once (``2 x element_size``
    bytes) and does ``repeat`` FLOPs on it. Its time by the roofline model is
    ``max(repeat x N / F, 2 x element_size x N / B)`` with F the vector
    (non-matmul) FLOP/s and B the memory bandwidth; the two are equal at::

        repeat* = F x (2 x element_size) / B

    Below repeat* the extra multiplications are free (waiting on memory);
    above it the time grows with repeat. Eager never gets there: each
    multiplication is its own pass, intensity 1/8 FLOP/byte at any repeat.
    """
    return ceilings.vector_flops_per_s * 2 * element_size / ceilings.mem_bandwidth_bytes_per_s


# =========================================================================== chapter 03


@dataclass(frozen=True)
class BatchPoint(_MeasuredPoint):
    """One measured point of the batch-size experiment (chapter 03).

    One forward pass (no grad) of the model on ``batch`` samples: the timing
    from :func:`brrrlib.benchmark`, and from :func:`brrrlib.count` the FLOPs,
    the bytes moved (every op's reads and writes, weights included) and the
    number of ops. ``weight_bytes`` is the size of the parameters, which every
    call reads whatever the batch: at a small batch they can be most of the
    bytes, and then the call is bandwidth-bound on the weights.
    """

    batch: int
    device: str
    timing: Any  # brrrlib.Timing
    flops: int
    bytes_moved: int
    weight_bytes: int
    ops: int

    @property
    def per_sample_s(self) -> float:
        """Seconds per sample: the time per batch over the batch size."""
        return self.median_s / self.batch

    @property
    def weight_share(self) -> float:
        """Fraction of the bytes moved that are the weights."""
        return self.weight_bytes / self.bytes_moved if self.bytes_moved else 0.0

    def __repr__(self) -> str:
        return (
            f"BatchPoint(batch={self.batch}, device={self.device!r}, "
            f"median={_fmt_s(self.median_s)}, per_sample={_fmt_s(self.per_sample_s)}, "
            f"{_fmt(self.flops_per_s, 'FLOP/s')}, weights {self.weight_share:.0%} of bytes)"
        )


def _weight_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def _input_maker(model: nn.Module, make_input: Callable[[int], torch.Tensor] | None):
    if make_input is not None:
        if not callable(make_input):
            raise TypeError("make_input must be a function batch -> input tensor")
        return make_input
    first = next((m for m in model.modules() if isinstance(m, nn.Linear)), None)
    if first is None:
        raise ValueError(
            "model: could not find an nn.Linear to infer the input width; pass "
            "make_input=lambda batch: torch.randn(batch, ...) (on the model's device)"
        )
    p = first.weight

    def make(batch: int) -> torch.Tensor:
        return torch.randn(batch, first.in_features, device=p.device, dtype=p.dtype)

    return make


def measure_batch(
    model: nn.Module,
    batch: int,
    device: str | torch.device | None = None,
    *,
    make_input: Callable[[int], torch.Tensor] | None = None,
    budget_s: float = POINT_BUDGET_S,
) -> BatchPoint:
    """Measure one forward pass of ``model`` on ``batch`` samples (no grad).

    What :func:`batch_explorer` calls for each new slider position. The
    input comes from ``make_input(batch)`` (default: ``torch.randn(batch,
    in_features)`` of the first ``nn.Linear``). Time with
    :func:`brrrlib.benchmark`; FLOPs, bytes and op count with
    :func:`brrrlib.count` (one extra untimed call).
    """
    batch = _positive_int("batch", batch)
    dev = devices.resolve(device) if device is not None else _model_device(model)
    x = _input_maker(model, make_input)(batch)
    with torch.no_grad():  # grad mode is thread-local: benchmark's calls run without grad too
        counts = counting.count(model, x)
        t = timing.benchmark(
            model, x, budget_s=budget_s, warmup_s=POINT_WARMUP_S, device=dev, label=f"batch {batch}"
        )
    return BatchPoint(
        batch=batch,
        device=str(dev),
        timing=t,
        flops=int(counts.flops),
        bytes_moved=int(counts.bytes_moved),
        weight_bytes=_weight_bytes(model),
        ops=int(counts.ops),
    )


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return devices.device()
