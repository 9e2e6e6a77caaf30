"""The chapter's model sizes for this device, and decode steps measured: one, or a batch sweep."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, machine, timing
from brrrlib.decoding._model import (
    Decoder,
    DecoderShape,
    Int8Linear,
    KVCache,
    decode_flops,
    kv_cache_bytes,
    new_cache,
    weight_bytes,
)

__all__ = [
    "LADDER",
    "SMALL",
    "BatchSweep",
    "DecodeStep",
    "DoesNotFit",
    "StepTiming",
    "batch_sweep",
    "decode_step",
    "half_precision",
    "measure_step",
    "precision_of",
    "shapes",
]

SMALL = DecoderShape("small", layers=4, d_model=64, heads=4, vocab=2048, max_context=1024)
#: Candidate large models, smallest first.
LADDER = (
    DecoderShape("large", layers=4, d_model=256, heads=4, vocab=8192, max_context=1024),
    DecoderShape("large", layers=6, d_model=512, heads=8, vocab=8192, max_context=1024),
    DecoderShape("large", layers=8, d_model=768, heads=12, vocab=8192, max_context=1024),
    DecoderShape("large", layers=12, d_model=1024, heads=16, vocab=32768, max_context=2048),
    DecoderShape("large", layers=16, d_model=1536, heads=24, vocab=32768, max_context=2048),
    DecoderShape("large", layers=24, d_model=2048, heads=32, vocab=32768, max_context=2048),
)
#: How long reading the large model's fp32 weights should take at the measured bandwidth.
TARGET_STEP_S = 0.025
#: fp16 is chosen over bf16 only when its matmul ceiling is this many times higher.
CLEARLY_FASTER = 1.25
#: The largest rung a CPU gets: a chapter on a laptop stays quick.
CPU_RUNGS = 3
_KEYS = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
#: A batch sweep stops after a step this long (seconds): the next would take about twice as long.
MAX_STEP_S = 2.0


def shapes(
    ceilings: Any, device: str | torch.device | None = None
) -> tuple[DecoderShape, DecoderShape]:
    """``(small, large)`` for this device, from its measured bandwidth and free memory."""
    dev = machine.resolve(device) if device is not None else torch.device(ceilings.device)
    memory = machine.available_memory_bytes(dev) / 8
    budget = min(TARGET_STEP_S * ceilings.mem_bandwidth_bytes_per_s, memory)
    rungs = LADDER[:CPU_RUNGS] if dev.type == "cpu" else LADDER
    fitting = [s for s in rungs if weight_bytes(s, "fp32") <= budget]
    return SMALL, (fitting[-1] if fitting else rungs[0])


def half_precision(ceilings: Any) -> str:
    """The 16-bit precision this device multiplies fastest, as measured: ``"bf16"`` or ``"fp16"``."""
    measured = ceilings.matmul_flops_per_s_by_dtype
    bf16, fp16 = measured.get("bf16", 0.0), measured.get("fp16", 0.0)
    return "fp16" if fp16 > CLEARLY_FASTER * bf16 else "bf16"


def precision_of(model: Decoder) -> str:
    """``"int8"`` for a weight-only int8 model, else its dtype's key (``"fp32"``, ``"bf16"``)."""
    dtype = model.wte.weight.dtype
    return "int8" if isinstance(model.head, Int8Linear) else _KEYS.get(dtype, str(dtype))


class DoesNotFit(MemoryError):
    """A decode step that would not fit in memory (refused before, or failed while allocating)."""


@contextlib.contextmanager
def _out_of_memory(dev: torch.device, batch: int, context: int, doing: str) -> Iterator[str]:
    """Out of memory inside becomes :class:`DoesNotFit`, once the cached memory is given back."""
    at = f"batch {batch}, context {context}"
    try:
        yield at
    except Exception as exc:
        if isinstance(exc, DoesNotFit) or not machine.is_out_of_memory(exc):
            raise
        machine.release_cached_memory(dev)
        raise DoesNotFit(f"{at}: out of memory {doing}, given back") from None


@dataclass(frozen=True)
class DecodeStep:
    """One decode step, ready to time: ``step()`` runs ``fn(ids, pos, cache)``."""

    model: Decoder
    cache: KVCache
    ids: torch.Tensor
    pos: torch.Tensor
    fn: Callable[..., torch.Tensor]

    def __call__(self) -> torch.Tensor:
        return self.fn(self.ids, self.pos, self.cache)


def decode_step(
    model: Decoder, batch: int = 1, context: int = 256, *, fn: Callable[..., Any] | None = None
) -> DecodeStep:
    """A decode step of ``model`` for ``batch`` sequences with ``context`` cached positions."""
    _checks.kind("model", model, Decoder, "brrrlib.decoding.Decoder")
    batch, context = _checks.positive_int("batch", batch), _checks.positive_int("context", context)
    w, shape = model.wte.weight, model.shape
    # what a step allocates besides the weights: its KV cache and its largest activations
    activations = 2 * batch * (4 * shape.d_model + shape.vocab + shape.heads * context)
    need = (kv_cache_bytes(shape, batch, context, 1) + activations) * w.element_size()
    with _out_of_memory(w.device, batch, context, f"allocating {_fmt.binary_bytes(need)}") as at:
        machine._refuse_over_headroom(need, w.device, at, "batch", DoesNotFit)
        cache = new_cache(model, batch, context)
    ids = torch.zeros(batch, 1, dtype=torch.long, device=w.device)  # any token: speed ignores it
    pos = torch.tensor([context - 1], device=w.device)
    return DecodeStep(model, cache, ids, pos, fn or model.decode)


@dataclass(frozen=True)
class StepTiming:
    """A decode step measured: the :class:`~brrrlib.Timing` and what one step moves and computes."""

    shape: DecoderShape
    precision: str
    batch: int
    context: int
    timing: timing.Timing
    weight_bytes: int
    kv_bytes: int
    flops: int

    @property
    def seconds(self) -> float:
        """Median seconds per step."""
        return self.timing.median_s

    @property
    def tokens_per_s(self) -> float:
        """Tokens written per second: ``batch / seconds``."""
        return self.batch / self.seconds

    @property
    def bytes_per_s(self) -> float:
        """Weights and KV cache read per second (gpt-fast's "bandwidth achieved", cache included)."""
        return (self.weight_bytes + self.kv_bytes) / self.seconds


def measure_step(
    model: Decoder,
    batch: int = 1,
    context: int = 256,
    *,
    fn: Callable[..., Any] | None = None,
    budget_s: float = 0.2,
) -> StepTiming:
    """Time one decode step (:func:`brrrlib.benchmark`) and count what it reads and computes."""
    w, precision = model.wte.weight, precision_of(model)
    with _out_of_memory(w.device, batch, context, "running"), torch.no_grad():
        step = decode_step(model, batch, context, fn=fn)  # DoesNotFit passes through
        t = timing.benchmark(step, budget_s=budget_s, device=w.device, label=f"batch {batch}")
    kv = kv_cache_bytes(model.shape, batch, context, w.element_size())
    flops = decode_flops(model.shape, batch, context)
    return StepTiming(
        model.shape, precision, batch, context, t, weight_bytes(model.shape, precision), kv, flops
    )


@dataclass(frozen=True)
class BatchSweep:
    """Decode steps measured at several batch sizes: ``points``, and ``skipped`` with the reason."""

    points: tuple[StepTiming, ...]
    skipped: tuple[tuple[int, str], ...] = ()

    @property
    def batches(self) -> tuple[int, ...]:
        """The batch sizes measured."""
        return tuple(p.batch for p in self.points)

    @property
    def seconds(self) -> tuple[float, ...]:
        """Median seconds per step, batch by batch."""
        return tuple(p.seconds for p in self.points)

    @property
    def tokens_per_s(self) -> tuple[float, ...]:
        """Tokens per second, batch by batch."""
        return tuple(p.tokens_per_s for p in self.points)

    def _table(self) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
        header, n = ("batch", "time/step", "tokens/s", "skipped"), 4 if self.skipped else 3
        rows = [
            (str(p.batch), _fmt.seconds(p.seconds), f"{p.tokens_per_s:,.0f}", "")
            for p in self.points
        ]
        rows += [(str(b), "-", "-", why) for b, why in self.skipped]
        return header[:n], [r[:n] for r in rows]

    def __repr__(self) -> str:
        return _fmt.text_table(*self._table(), align="rrrl")

    def _repr_html_(self) -> str:
        return _fmt.html_table(*self._table(), align="rrrl")


def batch_sweep(
    model: Decoder, batches: Sequence[int], context: int = 32, *, budget_s: float = 0.15
) -> BatchSweep:
    """:func:`measure_step` at each batch in two passes, smallest first, then largest first."""
    # a machine whose speed drifts (a host warming up, a neighbour) meets every batch early and
    # late; each batch keeps the samples of both passes, half the budget in each
    points: dict[int, StepTiming] = {}
    skipped: list[tuple[int, str]] = []
    for b in sorted(batches):
        if points and points[max(points)].seconds > MAX_STEP_S:
            last = points[max(points)]
            skipped.append((b, f"a step at batch {last.batch} took {_fmt.seconds(last.seconds)}"))
            continue
        try:
            points[b] = measure_step(model, b, context, budget_s=budget_s / 2)
        except DoesNotFit as exc:
            skipped.append((b, str(exc)))
    for b in sorted(points, reverse=True):
        first, again = points[b].timing, measure_step(model, b, context, budget_s=budget_s / 2)
        both = dataclasses.replace(
            first,
            samples_s=first.samples_s + again.timing.samples_s,
            dropped_s=first.dropped_s + again.timing.dropped_s,
        )
        points[b] = dataclasses.replace(points[b], timing=both)
    return BatchSweep(tuple(points[b] for b in sorted(points)), tuple(skipped))
