"""A model zoo: real architectures in plain PyTorch, each at two sizes, counted by hand."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_map_only

from brrrlib import _checks, _fmt
from brrrlib.zoo import _rows
from brrrlib.zoo._rows import Row
from brrrlib.zoo._tally import HandCount, Tally

__all__ = ["HandCount", "Row", "Tally", "ZooEntry", "entry", "names"]

SIZES = ("tiny", "big")
GPUS = ("A100", "H100")
_ITEMSIZE = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
#: A roofline floor below this per op means launches, not the roofline, set a GPU's time:
#: the H100 recorded with the course (brrrlib/recordings) paid 7.4 µs per tiny op.
LAUNCH_BOUND_S_PER_OP = 1e-6


@dataclass(frozen=True)
class Prediction:
    """What the roofline predicts for a workload on a spec-sheet device, from hand counts alone."""

    device: str
    precision: str
    intensity_flops_per_byte: float
    ridge_flops_per_byte: float
    floor_s: float
    regime: str
    launch_bound: bool  # the floor is below one launch per op: overhead will set the time


def predict(hand: HandCount, gpu: str, precision: str = "fp32") -> Prediction:
    """The roofline's regime for a hand count on spec-sheet device ``gpu`` (``bl.spec(gpu)``)."""
    from brrrlib import hardware, roofline

    spec = hardware.spec(gpu)
    peak, bandwidth = spec.peak(precision), spec.mem_bandwidth_bytes_per_s
    nbytes = hand.bytes_at(_ITEMSIZE[precision])
    intensity = roofline.arithmetic_intensity(hand.flops, nbytes)
    floor_s = roofline.lower_bound_s(hand.flops, nbytes, peak, bandwidth)
    ridge = roofline.ridge_point(peak, bandwidth)
    regime = roofline.regime(intensity, peak, bandwidth)
    launch_bound = floor_s < LAUNCH_BOUND_S_PER_OP * hand.work_ops
    return Prediction(spec.name, precision, intensity, ridge, floor_s, regime, launch_bound)


@dataclass(frozen=True)
class ZooEntry(Row):
    """A :class:`Row` counted by hand, its regimes predicted, ``cpu_reason`` formatted."""

    hand: HandCount = field(init=False)
    predictions: tuple[Prediction, ...] = field(init=False)  # fp32, on each of GPUS

    def __post_init__(self) -> None:
        hand = self.count()
        per_op = _fmt.si(hand.bytes_moved / max(hand.work_ops, 1), "B")
        template = self.cpu_reason or f"{hand.work_ops} ops, {per_op}/op, ~{{intensity}} FLOP/B"
        reason = template.format(intensity=f"{hand.intensity_flops_per_byte:.2g}")
        object.__setattr__(self, "hand", hand)
        object.__setattr__(self, "predictions", tuple(predict(hand, gpu) for gpu in GPUS))
        object.__setattr__(self, "cpu_reason", reason)

    @classmethod
    def from_row(cls, row: Row) -> ZooEntry:
        """The entry of ``row`` (nothing built until ``factory()``)."""
        return cls(**vars(row))

    label = property(lambda self: f"{self.name}/{self.size}")  # "llama_decode/big"
    hand_flops = property(lambda self: self.hand.flops)  # of one call
    hand_bytes = property(lambda self: self.hand.bytes_moved)  # of one call, unfused eager

    @property
    def formula(self) -> str:
        """The FLOP formula of the count's docstring, on one line."""
        return " ".join(inspect.getdoc(self.formula_of).split())

    def factory(self, device: str | torch.device | None = None) -> tuple[Callable[..., Any], tuple]:
        """The model and its inputs, seeded, on ``device`` (default CPU), the model run under no_grad."""
        with torch.random.fork_rng(devices=[]):  # the same weights every time; global RNG untouched
            torch.manual_seed(0)
            model, args = self.build()
        model.eval().requires_grad_(False)
        if device is not None:
            model.to(device)
            args = tree_map_only(torch.Tensor, lambda a: a.to(device), args)

        def fn(*inputs: Any) -> Any:
            with torch.no_grad():
                return model(*inputs)

        fn.__name__ = fn.__qualname__ = f"{self.name}_{self.size}"
        fn.model = model  # type: ignore[attr-defined]
        return fn, args

    def prediction(self, gpu: str) -> Prediction:
        """The stored prediction for ``gpu`` (``"A100"`` or ``"H100"``)."""
        return dict(zip(GPUS, self.predictions, strict=True))[_checks.one_of("gpu", gpu, GPUS)]

    def __repr__(self) -> str:
        where = ("CPU", *GPUS), (self.expected_cpu, *(p.regime for p in self.predictions))
        regimes = ", ".join(f"{w} {r}" for w, r in zip(*where, strict=True))
        flops, nbytes = _fmt.si(self.hand_flops, "FLOP"), _fmt.si(self.hand_bytes, "B")
        return f"ZooEntry({self.label}: {self.summary}; {flops}, {nbytes}; {regimes})"


@functools.cache
def entries() -> tuple[ZooEntry, ...]:
    """Every entry, workload by workload, tiny before big (nothing is built until ``factory()``)."""
    return tuple(map(ZooEntry.from_row, _rows.rows()))


def names() -> tuple[str, ...]:
    """The workloads' names, in zoo order."""
    return tuple(dict.fromkeys(e.name for e in entries()))


def entry(name: str, size: str = "big") -> ZooEntry:
    """The entry for workload ``name`` at ``size`` (``"tiny"`` or ``"big"``)."""
    _checks.one_of("size", size, SIZES)
    _checks.one_of("name", name, names())
    return next(e for e in entries() if e.name == name and e.size == size)
