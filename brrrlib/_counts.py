"""What ``bl.count`` returns: :class:`Counts`, one :class:`OpCount` row per aten op, and its table.

The counting itself is in :mod:`brrrlib.counting`; these are its results,
importable from there (``brrrlib.counting.Counts``). A ``Counts`` keeps the
raw rows; totals, the split by category and by precision, and the essay's
BERT table (FLOPs and bytes per category, plus % of runtime once
:func:`brrrlib.trace.breakdown` attaches :class:`CategoryTimes`) are derived.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from brrrlib import _fmt
from brrrlib._aten_ops import CATEGORIES

__all__ = ["CategoryTimes", "Counts", "OpCount"]

#: A run that writes at most this share of the bytes it moves is judged as a read.
READ_ONLY_SHARE = 0.05


@dataclass(frozen=True)
class OpCount:
    """One aten op's totals over a counted run.

    ``op`` is the dispatcher name (``"aten::mm"``), ``category`` one of
    :data:`CATEGORIES`, ``calls`` how many times it ran, ``flops`` and
    ``bytes_moved`` summed over those calls, ``precision`` what its FLOPs ran
    in (``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"``, ``"fp64"``, ``"fp8"``,
    ``"int"``; ``""`` for an op without FLOPs). An op that ran in two
    precisions has a row for each. A row made by hand is fp32 unless it says
    otherwise: torch's default dtype. ``special`` is how many of its FLOPs
    were special-function evaluations (``exp``, ``erf``, ...) and
    ``special_function`` which one. ``written_bytes`` is the part of
    ``bytes_moved`` the op wrote (``None`` on a row made by hand without it).
    """

    op: str
    category: str
    calls: int
    flops: int
    bytes_moved: int
    precision: str = "fp32"
    special: int = 0
    special_function: str = ""
    written_bytes: int | None = None

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved (``inf`` for an op that moves no bytes but computes)."""
        return _intensity(self.flops, self.bytes_moved)


@dataclass(frozen=True)
class CategoryTimes:
    """Seconds per call of a function, split by op category (see :func:`brrrlib.trace.time_by_category`).

    ``times_s`` pairs each category with the median, over ``runs`` profiled
    calls, of the summed *self* time of its ops; ``source`` says which clock
    (``"cpu self time"`` or ``"device self time"``) and ``device`` where it ran.
    """

    times_s: tuple[tuple[str, float], ...]
    source: str
    device: str
    runs: int

    def as_dict(self) -> dict[str, float]:
        """``{category: seconds}`` with every category present (0.0 if none)."""
        out = dict.fromkeys(CATEGORIES, 0.0)
        out.update(dict(self.times_s))
        return out

    @property
    def total_s(self) -> float:
        """Sum over categories: the op time of one call (Python time between ops excluded)."""
        return sum(t for _, t in self.times_s)

    def __repr__(self) -> str:
        total = self.total_s
        parts = ", ".join(
            f"{c} {_fmt.percent(t, total)}" for c, t in sorted(self.times_s, key=lambda p: -p[1])
        )
        return (
            f"CategoryTimes({_fmt.seconds(total)} per call on {self.device}, {self.source}: "
            f"{parts})"
        )


@dataclass(frozen=True)
class Counts:
    """FLOPs and bytes of one run of a function, per aten op (see :func:`brrrlib.counting.count`).

    ``rows`` holds one :class:`OpCount` per (op, category, precision);
    ``times`` is optional per-category timing attached by
    :func:`brrrlib.trace.breakdown`; ``notes`` says what the count could not
    see (ops it could not price, a compiled function counted as its eager
    graph). Totals are properties; :meth:`by_category` and the repr group the
    rows like the essay's BERT table (with times: each category's % of runtime).
    """

    rows: tuple[OpCount, ...]
    times: CategoryTimes | None = None
    notes: tuple[str, ...] = ()

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
        if any(r.written_bytes is None for r in self.rows):
            return None
        return sum(r.written_bytes for r in self.rows)

    @property
    def pattern(self) -> str:
        """The access pattern whose roof bounds this run (``Ceilings.bandwidth_for``).

        ``"read"`` when at most 5% of the bytes are written (a matrix-vector product
        reads its weights once: decode); ``"write"`` otherwise, the fastest writing
        form, so that the memory floor stays a lower bound for any mix of copies and
        in-place updates.
        """
        written = self.written_bytes
        if written is None or written > READ_ONLY_SHARE * self.bytes_moved:
            return "write"
        return "read"

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
        """Op calls that do work on data: every op but views, metadata and bare allocations.

        Each of these pays at least what the tiniest op costs (dispatch, and a
        kernel launch on a GPU), so ``work_ops * op_overhead_s`` is a lower
        bound on the host time of one call. Views and ``empty`` are cheaper
        than a tiny op and are left out; the counter charges them nothing.
        """
        return sum(r.calls for r in self.rows if r.flops or r.bytes_moved)

    def flops_by_precision(self, category: str | None = None) -> dict[str, int]:
        """``{precision: FLOPs}``, e.g. ``counts.flops_by_precision("matmul")`` -> ``{"bf16": ...}``.

        Each precision has its own roof (an H100 does 52 TFLOP/s of fp32
        matmul, ~400 in TF32, ~740 in bf16), so the compute floor is the sum
        of each precision's FLOPs over its own ceiling. ``category`` keeps one
        of :data:`CATEGORIES`; ops without FLOPs are left out.
        """
        if category is not None and category not in CATEGORIES:
            raise ValueError(
                f"category must be one of {list(CATEGORIES)} or None, got {category!r}"
            )
        out: dict[str, int] = {}
        for r in self.rows:
            if r.flops and category in (None, r.category):
                out[r.precision] = out.get(r.precision, 0) + r.flops
        return out

    def special_by_function(self) -> dict[str, int]:
        """``{function: evaluations}``: the special functions among the FLOPs (``{"exp": ...}``).

        A softmax evaluates one ``exp`` per element, a gelu one ``erf``: each
        counts as one FLOP, yet costs tens of instructions on a CPU. The
        diagnosis judges them against their own measured rate.
        """
        out: dict[str, int] = {}
        for r in self.rows:
            if r.special:
                out[r.special_function] = out.get(r.special_function, 0) + r.special
        return out

    @property
    def precision(self) -> str:
        """The precision of most of the matmul FLOPs ("fp32" when there are none).

        That is the roof the workload is judged against: a bf16 model's
        matmuls run on tensor cores, far above the fp32 roof.
        """
        split = self.flops_by_precision("matmul")
        return max(split, key=split.get) if split else "fp32"

    def by_category(self) -> dict[str, dict[str, float]]:
        """``{category: {"calls", "flops", "bytes_moved", "flops_fraction", "bytes_fraction"}}``.

        Every category in :data:`CATEGORIES` is present. With times attached,
        each entry also has ``"time_s"`` and ``"time_fraction"``.
        """
        total_flops, total_bytes = self.flops, self.bytes_moved
        times = self.times.as_dict() if self.times is not None else None
        total_time = self.times.total_s if self.times is not None else 0.0
        out: dict[str, dict[str, float]] = {}
        for category in CATEGORIES:
            rows = [r for r in self.rows if r.category == category]
            flops, nbytes = sum(r.flops for r in rows), sum(r.bytes_moved for r in rows)
            entry: dict[str, float] = {
                "calls": sum(r.calls for r in rows),
                "flops": flops,
                "bytes_moved": nbytes,
                "flops_fraction": flops / total_flops if total_flops else 0.0,
                "bytes_fraction": nbytes / total_bytes if total_bytes else 0.0,
            }
            if times is not None:
                entry["time_s"] = times[category]
                entry["time_fraction"] = times[category] / total_time if total_time else 0.0
            out[category] = entry
        return out

    def _repr_html_(self) -> str:
        return _render(self, html=True)

    def __repr__(self) -> str:
        return _render(self, html=False)


def _intensity(flops: float, nbytes: float) -> float:
    if nbytes == 0:
        return math.inf if flops else 0.0
    return flops / nbytes


# ---------------------------------------------------------------- rendering


def _render(counts: Counts, *, html: bool) -> str:
    """The table as text or HTML: a title line, a header, one line per category, notes."""
    times = counts.times
    header = ["category", "calls", "FLOPs", "% FLOPs", "bytes", "% bytes", "FLOP/byte"]
    if times is not None:
        header += ["time", "% time"]
    title = (
        f"Counts: {_fmt.si(counts.flops, 'FLOP')}, {_fmt.si(counts.bytes_moved, 'B')} moved, "
        f"{counts.intensity_flops_per_byte:.3g} FLOP/byte, {counts.ops} op calls"
    )
    notes = []
    if times is not None:
        notes.append(
            f"time: {times.source} on {times.device}, median of {times.runs} runs, "
            f"{_fmt.seconds(times.total_s)} of op time per call"
        )
    notes += [f"note: {n}" for n in counts.notes]
    return (_html_table if html else _text_table)(title, header, _lines(counts), notes)


def _lines(counts: Counts) -> list[list[str]]:
    cats, times = counts.by_category(), counts.times
    lines = []
    for c in CATEGORIES:
        e = cats[c]
        line = [c, f"{int(e['calls'])}", *_share_cells(counts, e["flops"], e["bytes_moved"])]
        if times is not None:
            line += [_fmt.seconds(e["time_s"]), _fmt.percent(e["time_s"], times.total_s)]
        lines.append(line)
    return lines


def _share_cells(counts: Counts, flops: float, nbytes: float) -> list[str]:
    return [
        _fmt.si(flops, "FLOP"),
        _fmt.percent(flops, counts.flops),
        _fmt.si(nbytes, "B"),
        _fmt.percent(nbytes, counts.bytes_moved),
        f"{_intensity(flops, nbytes):.3g}",
    ]


def _html_table(title: str, header: list[str], body: list[list[str]], notes: list[str]) -> str:
    table = _fmt.html_table(
        header, body, align="l" + "r" * (len(header) - 1)
    )  # numbers on the right
    foot = "".join(
        f'<p style="color:var(--jp-ui-font-color2, #666)">{html.escape(n)}</p>' for n in notes
    )
    return f"<p><b>{html.escape(title)}</b></p>{table}{foot}"


def _text_table(title: str, header: list[str], body: list[list[str]], notes: list[str]) -> str:
    table = _fmt.text_table(header, body, align="l" + "r" * (len(header) - 1))
    return "\n".join([title, table, *notes])
