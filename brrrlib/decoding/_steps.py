"""Decode steps measured: one step at a batch and a context, and a sweep over the batch."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, machine, timing
from brrrlib.decoding import _counts
from brrrlib.decoding._int8 import Int8Linear
from brrrlib.decoding._model import Decoder, DecoderShape, KVCache, new_cache

__all__ = [
    "BatchSweep",
    "DecodeStep",
    "DoesNotFit",
    "StepTiming",
    "batch_sweep",
    "decode_step",
    "measure_step",
    "precision_of",
    "step_memory_bytes",
]

#: A step may use at most this fraction of the memory free right now.
MEMORY_HEADROOM = 0.5
#: A batch sweep stops after a step this long (seconds): the next would take about twice as long.
MAX_STEP_S = 2.0


class DoesNotFit(MemoryError):
    """A decode step that would not fit in memory (refused before, or failed while allocating)."""


@contextlib.contextmanager
def _out_of_memory(dev: torch.device, step: str, doing: str) -> Iterator[None]:
    """Out of memory inside becomes :class:`DoesNotFit`, once the cached memory is given back."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, DoesNotFit) or not machine.is_out_of_memory(exc):
            raise
        machine.release_cached_memory(dev)
        raise DoesNotFit(
            f"{step} ran out of memory while {doing}; the memory was given back: "
            "choose a smaller step"
        ) from None


def precision_of(model: Decoder) -> str:
    """``"int8"`` for a weight-only int8 model, else its dtype's key (``"fp32"``, ``"bf16"``)."""
    if isinstance(model.head, Int8Linear):
        return "int8"
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(
        model.wte.weight.dtype, str(model.wte.weight.dtype)
    )


def step_memory_bytes(shape: DecoderShape, batch: int, context: int, bytes_per_number: int) -> int:
    """What a step allocates besides the weights: its KV cache and its largest activations."""
    activations = 2 * batch * (4 * shape.d_model + shape.vocab + shape.heads * context)
    kv = _counts.kv_cache_bytes(shape, batch, context, bytes_per_number)
    return kv + activations * bytes_per_number


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
    if not isinstance(model, Decoder):
        raise TypeError(f"model must be a brrrlib.decoding.Decoder, got {type(model).__name__}")
    batch, context = _checks.positive_int("batch", batch), _checks.positive_int("context", context)
    if context > model.shape.max_context:
        raise ValueError(
            f"context={context} is longer than the model's max_context={model.shape.max_context}"
        )
    dev = model.wte.weight.device
    itemsize = model.wte.weight.element_size()
    need = step_memory_bytes(model.shape, batch, context, itemsize)
    free = machine.available_memory_bytes(dev)
    if need > MEMORY_HEADROOM * free:
        raise DoesNotFit(
            f"batch {batch} at context {context} needs {_fmt.binary_bytes(need)} for its KV cache "
            f"and activations, more than half of the {_fmt.binary_bytes(free)} free on {dev.type}: "
            "choose a smaller batch or a shorter context"
        )
    with _out_of_memory(
        dev, f"batch {batch} at context {context}", f"allocating {_fmt.binary_bytes(need)}"
    ):
        cache = new_cache(model, batch, context)
    ids = torch.zeros(batch, 1, dtype=torch.long, device=dev)  # any token: speed ignores values
    pos = torch.tensor([context - 1], device=dev)
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
    dev = model.wte.weight.device
    with _out_of_memory(dev, f"batch {batch} at context {context}", "running"), torch.no_grad():
        step = decode_step(model, batch, context, fn=fn)  # DoesNotFit passes through
        t = timing.benchmark(step, budget_s=budget_s, device=dev, label=f"batch {batch}")
    precision = precision_of(model)
    return StepTiming(
        model.shape,
        precision,
        batch,
        context,
        t,
        _counts.weight_bytes(model.shape, precision),
        _counts.kv_cache_bytes(model.shape, batch, context, model.wte.weight.element_size()),
        _counts.decode_flops(model.shape, batch, context),
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

    def __repr__(self) -> str:
        rows = [f"{'batch':>6} {'per step':>10} {'tokens/s':>10}"]
        rows += [
            f"{p.batch:>6} {_fmt.seconds(p.seconds):>10} {p.tokens_per_s:>10,.0f}"
            for p in self.points
        ]
        rows += [f"{b:>6} not measured: {why}" for b, why in self.skipped]
        return "\n".join(rows)


def batch_sweep(
    model: Decoder, batches: Sequence[int], context: int = 32, *, budget_s: float = 0.15
) -> BatchSweep:
    """:func:`measure_step` at each batch size, smallest first."""
    points: list[StepTiming] = []
    skipped: list[tuple[int, str]] = []
    for b in sorted(batches):
        if points and points[-1].seconds > MAX_STEP_S:
            took = f"a step at batch {points[-1].batch} took {_fmt.seconds(points[-1].seconds)}"
            skipped.append((b, took))
            continue
        try:
            points.append(measure_step(model, b, context, budget_s=budget_s))
        except DoesNotFit as exc:
            skipped.append((b, str(exc)))
    return BatchSweep(tuple(points), tuple(skipped))
