"""The class view's drawing: report tables and the shared roofline (see :mod:`brrrlib.classroom`).

Functions here take reports that :mod:`brrrlib.classroom` has already
checked, and only render: cells of text, a :class:`ClassTable`, lines on a
roofline. Nothing here reads files or measures.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brrrlib import _fmt, roofline

__all__ = ["COLUMNS", "ClassTable", "attainable", "cells", "chapters", "counts", "draw", "machines"]

COLUMNS = (
    "machine",
    "kind",
    "device",
    "matmul fp32",
    "fastest matmul",
    "vector",
    "bandwidth",
    "op overhead",
    "ridge fp32",
    "ridge fastest",
    "chapters",
)


@dataclass(frozen=True)
class ClassTable:
    """A table about the class's machines: text in a terminal, HTML in a notebook.

    ``reports`` are the machines it was made from (the raw data); ``columns``
    and ``rows`` its cells as text; ``muted`` marks the rows of spec-sheet
    predictions, drawn in italics; ``caption`` says what the numbers mean.
    """

    reports: tuple[Any, ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    muted: tuple[bool, ...] = ()
    caption: str = ""

    def __repr__(self) -> str:
        if not self.rows:
            return self.caption
        table = [self.columns, *self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(self.columns))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in table
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(lines + ([self.caption] if self.caption else []))

    def _repr_html_(self) -> str:
        e = html.escape
        if not self.rows:
            return f"<p>{e(self.caption)}</p>"
        muted = self.muted or (False,) * len(self.rows)
        body = []
        for row, dim in zip(self.rows, muted, strict=True):
            style = " style='font-style:italic;color:var(--jp-content-font-color2, #666)'" * dim
            tds = "".join(f"<td style='text-align:left'>{e(c)}</td>" for c in row)
            body.append(f"<tr{style}>{tds}</tr>")
        head = "".join(f"<th>{e(c)}</th>" for c in self.columns)
        caption = (
            f"<caption style='caption-side:bottom;text-align:left'><small>{e(self.caption)}"
            "</small></caption>" * bool(self.caption)
        )
        return (
            f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )


def cells(r: Any) -> tuple[str, ...]:
    """One report's row of :data:`COLUMNS`, as text."""
    fast = r.fastest_precision()
    overhead = r.op_overhead_s
    return (
        r.label,
        "prediction" if r.is_prediction else "recorded" if r.recorded else "measured",
        f"{r.device} ({r.device_name})",
        _fmt.si(r.matmul_peak("fp32"), "FLOP/s"),
        f"{fast} {_fmt.si(r.matmul_peak(fast), 'FLOP/s')}",
        _fmt.si(r.vector_flops_per_s, "FLOP/s"),
        _fmt.si(r.mem_bandwidth_bytes_per_s, "B/s"),
        "n/a" if overhead is None else _fmt.seconds(overhead),
        _fmt.si(r.ridge_point_flops_per_byte()),
        f"{_fmt.si(r.ridge_point_flops_per_byte(fast))} ({fast})",
        ", ".join(sorted(r.chapters)) or "-",
    )


def machines(reports: Sequence[Any]) -> ClassTable:
    """One row per machine (see :func:`brrrlib.classroom.reports_table`)."""
    notes = []
    if any(r.is_prediction for r in reports):
        notes.append("italic rows are spec-sheet predictions, not measurements")
    notes.append("vector: one FLOP per operation (a spec sheet's fp32 peak counts an FMA as two)")
    rows = tuple(cells(r) for r in reports)
    muted = tuple(r.is_prediction for r in reports)
    return ClassTable(tuple(reports), COLUMNS, rows, muted, "; ".join(notes))


def chapters(reports: Sequence[Any]) -> ClassTable:
    """One row per chapter measurement (see :func:`brrrlib.classroom.chapters_table`)."""
    rows = tuple(
        (r.label, chapter, key, str(value))
        for r in reports
        for chapter, values in sorted(r.chapters.items())
        for key, value in values.items()
    )
    caption = (
        ""
        if rows
        else (
            "No chapter measurements yet: learners add them with "
            "bl.report(chapter=2, extra={'knee_repeat': 16})."
        )
    )
    return ClassTable(
        tuple(reports), ("machine", "chapter", "measurement", "value"), rows, (), caption
    )


def attainable(reports: Sequence[Any], intensity: float, precision: str) -> ClassTable:
    """Attainable FLOP/s at ``intensity`` per machine (see :func:`brrrlib.classroom.attainable_table`)."""
    rows = []
    for r in reports:
        peak = r.matmul_peak(precision)
        rate = roofline.attainable_flops_per_s(intensity, peak, r.mem_bandwidth_bytes_per_s)
        rows.append(
            (r.label, _fmt.si(peak, "FLOP/s"), _fmt.si(rate, "FLOP/s"), _fmt.percent(rate, peak))
        )
    low = min(reports, key=lambda r: r.matmul_peak(precision))
    high = max(reports, key=lambda r: r.matmul_peak(precision))
    spread = high.matmul_peak(precision) / low.matmul_peak(precision)
    caption = (
        f"the {precision} matmul peaks here differ by {round(spread):,}x (lowest {low.label}: "
        f"{_fmt.si(low.matmul_peak(precision), 'FLOP/s')}; highest {high.label}: "
        f"{_fmt.si(high.matmul_peak(precision), 'FLOP/s')})"
    )
    columns = (
        "machine",
        f"{precision} matmul peak",
        f"attainable at {intensity:g} FLOP/B",
        "share of peak",
    )
    muted = tuple(r.is_prediction for r in reports)
    return ClassTable(tuple(reports), columns, tuple(rows), muted, caption)


def counts(reports: Sequence[Any]) -> str:
    """ "3 measured, 2 recorded, 3 predicted" (recorded only when there are some)."""
    recorded = sum(r.recorded for r in reports)
    predicted = sum(r.is_prediction for r in reports)
    measured = len(reports) - recorded - predicted
    parts = [f"{measured} measured"] + [f"{recorded} recorded"] * bool(recorded)
    return ", ".join([*parts, f"{predicted} predicted"])


def draw(reports: Sequence[Any], ax: Any, dtype: str, title: str) -> Any:
    """Every report's roofs on one roofline; predictions dotted (see ``plot_reports``)."""
    # roofline.plot labels a device by its name: give each the label the class sees.
    devices = [
        dataclasses.replace(r.machine, name=r.label)
        if r.is_prediction
        else dataclasses.replace(r.machine, device_name=r.label)
        for r in reports
    ]
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(12, 5), layout="constrained")
    ax = roofline.plot(devices, ax=ax, dtype=dtype)
    ax.set_title(title)
    for r in reports:
        for line in ax.get_lines():
            if not line.get_label().startswith(r.label + " "):
                continue
            if r.is_prediction:
                line.set_linestyle(":")
    # A class has many machines: the legend goes beside the plot, not over the lines.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax
