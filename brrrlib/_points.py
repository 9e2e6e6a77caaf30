"""The one point type of :mod:`brrrlib.sweeps`: what a point runs, what it measured.

A :class:`Case` is what one point of a sweep runs (a zero-argument call and
the work it does); a :class:`Point` is what came of it: the raw timing, the
achieved rates, the model's time, or, when it was not measured, why, in words.
A :class:`Pair` is two points timed together in alternating rounds. Built by
:func:`brrrlib.sweeps.sweep`; re-exported there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _fmt
from brrrlib.timing import Comparison, Timing

__all__ = [
    "BUSY_CPU_SHARE",
    "MEASURED",
    "NO_MEMORY",
    "POINT_WARMUP_S",
    "TOO_SLOW",
    "Case",
    "Pair",
    "Point",
    "waited_words",
]

#: Seconds of warm-up before a point is timed (a freshly compiled kernel asks for more).
POINT_WARMUP_S = 0.02
#: Below this CPU share of the calling thread, a CPU measurement waited for cores.
BUSY_CPU_SHARE = 0.8

# What became of a point: evidence as data; the words are in Point.reason.
MEASURED, TOO_SLOW, NO_MEMORY = "measured", "too slow", "no memory"
_STATUSES = (MEASURED, TOO_SLOW, NO_MEMORY)


@dataclass(frozen=True)
class Case:
    """What one point runs: a zero-argument call and the work one call does.

    ``fn()`` is timed; ``flops`` and ``bytes_moved`` are per call (from
    :func:`brrrlib.count`, or a formula for what a fused kernel must move).
    ``warmup_s``: warm-up before timing (more for a fresh compile);
    ``no_grad``: autograd off around the whole measurement, not in every call.
    Copied to the :class:`Point`: ``size`` (elements per input),
    ``weight_bytes`` (read every call, whatever ``x``), ``ops`` (op calls per
    call), ``compile_s`` (the first, untimed call of a compiled function).
    """

    fn: Callable[[], Any]
    flops: int
    bytes_moved: int
    device: torch.device
    label: str = ""
    warmup_s: float = POINT_WARMUP_S
    no_grad: bool = False
    size: int = 0
    weight_bytes: int = 0
    ops: int = 0
    compile_s: float | None = None


@dataclass(frozen=True, repr=False)
class Point:
    """One point of a sweep: measured, or not measured and why.

    ``timing`` is the :class:`brrrlib.Timing` behind the point (raw samples;
    from :func:`brrrlib.compare` when it was paired), ``None`` when ``status``
    is ``"too slow"`` or ``"no memory"``; ``reason`` then says why in words (on
    a measured point: empty, or a note). ``predicted_s`` is the model's time.
    The achieved rates divide the work by the median time; a point that was
    not measured raises an error with its reason instead.
    """

    x: int
    line: str
    device: str
    timing: Timing | None = None
    flops: int = 0
    bytes_moved: int = 0
    predicted_s: float | None = None
    status: str = MEASURED
    reason: str = ""
    size: int = 0
    weight_bytes: int = 0
    ops: int = 0
    compile_s: float | None = None
    cpu_share: float | None = None

    def __post_init__(self) -> None:
        if self.status not in _STATUSES:
            raise ValueError(f"status must be one of {_STATUSES}, got {self.status!r}")
        if (self.status == MEASURED) != (self.timing is not None):
            raise ValueError("a measured point needs a timing, and only a measured one has one")
        if self.status != MEASURED and not self.reason:
            raise ValueError("a point that was not measured needs a reason, in words")

    @property
    def measured(self) -> bool:
        """True when the point has a timing."""
        return self.status == MEASURED

    @property
    def waited(self) -> bool:
        """True when a CPU measurement waited for cores (``cpu_share`` below ``BUSY_CPU_SHARE``).

        While it computes, the calling thread runs all the time (worker
        threads spin at barriers), so its CPU seconds over wall seconds is
        near 1. Far below, it waited for a core another program held: a
        multi-threaded op on a busy 2-core laptop can lose a whole scheduler
        slice (tens of ms) per call, a fact about the machine, not the work.
        """
        return self.cpu_share is not None and self.cpu_share < BUSY_CPU_SHARE

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        if self.timing is None:
            raise ValueError(f"{self.line} at x={self.x} was not measured: {self.reason}")
        return self.timing.median_s

    @property
    def achieved_flops_per_s(self) -> float:
        """Counted FLOPs over the median time."""
        return self.flops / self.median_s

    @property
    def achieved_bytes_per_s(self) -> float:
        """Counted bytes moved over the median time: compare with the bandwidth ceiling."""
        return self.bytes_moved / self.median_s

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved: the point's place on the roofline's x axis."""
        return self.flops / self.bytes_moved if self.bytes_moved else math.inf

    @property
    def per_x_s(self) -> float:
        """Median seconds per unit of ``x``: the time per sample when ``x`` is the batch."""
        return self.median_s / self.x

    @property
    def model_ratio(self) -> float | None:
        """Measured time over the model's time (None without a model or a timing)."""
        if self.predicted_s is None or self.timing is None:
            return None
        return self.median_s / self.predicted_s

    def __repr__(self) -> str:
        head = f"Point(x={self.x}, line={self.line!r}, {self.device}"
        if not self.measured:
            return f"{head}, {self.status}: {self.reason})"
        return (
            f"{head}, {_fmt.seconds(self.median_s)}, {_fmt.si(self.achieved_bytes_per_s, 'B/s')}"
            f", {_fmt.si(self.achieved_flops_per_s, 'FLOP/s')})"
        )


@dataclass(frozen=True)
class Pair:
    """Two points timed together in alternating rounds: ``comparison.ratio`` is b's time over a's."""

    a: tuple[int, str]
    b: tuple[int, str]
    comparison: Comparison
    remeasured: bool = False  # measured a second time because the first looked implausible


def waited_words(*points: Point | None) -> str:
    """Words for measurements that waited for cores (see ``Point.waited``); "" if none did."""
    shares = [p.cpu_share for p in points if p is not None and p.waited]
    if not shares:
        return ""
    return (
        f"the calls waited for cores that another program holds (this thread ran "
        f"{min(shares):.0%} of the time); close other programs or press re-measure"
    )
