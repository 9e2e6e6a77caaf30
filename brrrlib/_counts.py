"""What ``bl.count`` returns: :class:`Counts`, one :class:`OpCount` row per aten op, and its table."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from brrrlib import _checks, _fmt
from brrrlib._aten_ops import CATEGORIES

__all__ = ["CategoryTimes", "Counts", "OpCount"]

#: A run that writes at most this share of the bytes it moves is judged as a read.
READ_ONLY_SHARE = 0.05


@dataclass(frozen=True)
class OpCount:
    """One aten op's totals over a counted run, one row per precision its FLOPs ran in."""

    op: str  # "aten::mm"
    category: str
    calls: int
    flops: int
    bytes_moved: int
    precision: str = "fp32"  # "" for an op without FLOPs
    special: int = 0  # FLOPs that were special-function evaluations
    special_function: str = ""  # which one: "exp", "erf", ...
    written_bytes: int | None = None  # the written part of bytes_moved

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved (``inf`` for an op that moves no bytes but computes)."""
        return _intensity(self.flops, self.bytes_moved)


@dataclass(frozen=True)
class CategoryTimes:
    """Seconds per call of a function by op category (:func:`brrrlib.trace.time_by_category`)."""

    times_s: tuple[tuple[str, float], ...]  # (category, median self seconds over runs)
    device: str  # "cpu" (the ops' CPU self time) or "cuda" (their kernels' self time)
    runs: int

    def as_dict(self) -> dict[str, float]:
        """``{category: seconds}`` with every category present (0.0 if none)."""
        return dict.fromkeys(CATEGORIES, 0.0) | dict(self.times_s)

    @property
    def total_s(self) -> float:
        """Sum over categories: the op time of one call (Python time between ops excluded)."""
        return sum(t for _, t in self.times_s)

    def __repr__(self) -> str:
        shares = sorted(self.times_s, key=lambda p: -p[1])
        parts = ", ".join(f"{c} {_fmt.percent(t, self.total_s)}" for c, t in shares)
        return f"CategoryTimes({_fmt.seconds(self.total_s)} per call on {self.device}: {parts})"


@dataclass(frozen=True, repr=False)
class Counts(_fmt.Table):
    """FLOPs and bytes of one run of a function, per aten op (see :func:`brrrlib.counting.count`)."""

    rows: tuple[OpCount, ...]
    times: CategoryTimes | None = None  # attached by bl.trace.breakdown
    notes: tuple[str, ...] = ()  # what the count could not see

    @property
    def flops(self) -> int:
        """Total floating-point operations."""
        return sum(r.flops for r in self.rows)

    @property
    def bytes_moved(self) -> int:
        """Total bytes read plus written, op by op (unfused eager cost)."""
        return sum(r.bytes_moved for r in self.rows)

    @property
    def written_bytes(self) -> int | None:
        """The part of ``bytes_moved`` that was written (``None`` if a row does not say)."""
        written = [r.written_bytes for r in self.rows]
        return None if None in written else sum(written)

    @property
    def pattern(self) -> str:
        """The roof's pattern: ``"read"`` if at most 5% of the bytes are written, else ``"write"``."""
        written = self.written_bytes
        return (
            "write" if written is None or written > READ_ONLY_SHARE * self.bytes_moved else "read"
        )

    @property
    def intensity_flops_per_byte(self) -> float:
        """Arithmetic intensity of the whole run: ``flops / bytes_moved``."""
        return _intensity(self.flops, self.bytes_moved)

    @property
    def ops(self) -> int:
        """Number of aten op calls, views included (each one costs dispatch overhead)."""
        return sum(r.calls for r in self.rows)

    @property
    def work_ops(self) -> int:
        """Op calls that do work on data: every op but views, metadata and bare allocations."""
        return sum(r.calls for r in self.rows if r.flops or r.bytes_moved)

    def flops_by_precision(self, category: str | None = None) -> dict[str, int]:
        """``{precision: FLOPs}``, of one category if given: ``{"bf16": ...}``."""
        _checks.one_of("category", category, (*CATEGORIES, None))
        return _tally((r.precision, r.flops) for r in self.rows if category in (None, r.category))

    def special_by_function(self) -> dict[str, int]:
        """``{function: evaluations}``: the special functions among the FLOPs (``{"exp": ...}``)."""
        return _tally((r.special_function, r.special) for r in self.rows)

    @property
    def precision(self) -> str:
        """The precision of most of the matmul FLOPs ("fp32" when there are none): its roof."""
        split = self.flops_by_precision("matmul")
        return max(split, key=split.get) if split else "fp32"

    def by_category(self) -> dict[str, dict[str, float]]:
        """``{category: {"calls", "flops", "bytes_moved", ...}}`` for every category."""
        out: dict[str, dict[str, float]] = {}
        for category in CATEGORIES:
            part = Counts(tuple(r for r in self.rows if r.category == category))
            out[category] = {
                "calls": part.ops,
                "flops": part.flops,
                "bytes_moved": part.bytes_moved,
                "flops_fraction": _fmt.share(part.flops, self.flops),
                "bytes_fraction": _fmt.share(part.bytes_moved, self.bytes_moved),
            }
            if self.times is not None:
                t = self.times.as_dict()[category]
                out[category] |= {"time_s": t, "time_fraction": _fmt.share(t, self.times.total_s)}
        return out

    def _table(self) -> tuple[list[str], list[str], list[list[str]], str]:
        """Title and notes, header, one row per category and a total, alignment: both reprs."""
        times, cats = self.times, self.by_category()
        header = ["category", "calls", "FLOPs", "% FLOPs", "bytes", "% bytes", "FLOP/byte"]
        header += ["time", "% time"] if times is not None else []
        cats["total"] = {"calls": self.ops, "flops": self.flops, "bytes_moved": self.bytes_moved}
        cats["total"]["time_s"] = times.total_s if times is not None else 0.0
        rows = []
        for c, e in cats.items():
            flops, nbytes = e["flops"], e["bytes_moved"]
            row = [c, f"{int(e['calls'])}", _fmt.si(flops, "FLOP"), _fmt.percent(flops, self.flops)]
            row += [_fmt.si(nbytes, "B"), _fmt.percent(nbytes, self.bytes_moved)]
            row += [f"{_intensity(flops, nbytes):.3g}"]
            if times is not None:
                row += [_fmt.seconds(e["time_s"]), _fmt.percent(e["time_s"], times.total_s)]
            rows.append(row)
        notes = [f"note: {n}" for n in self.notes]
        if times is not None:
            notes.insert(0, f"time: median self time of {times.runs} runs on {times.device}")
        return ["Counts", *notes], header, rows, "lrrrrrrrr"


def _tally(pairs: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Sums of the nonzero values by key, keys in first-seen order."""
    out: dict[str, int] = {}
    for key, value in pairs:
        if value:
            out[key] = out.get(key, 0) + value
    return out


def _intensity(flops: float, nbytes: float) -> float:
    if nbytes == 0:
        return math.inf if flops else 0.0
    return flops / nbytes
