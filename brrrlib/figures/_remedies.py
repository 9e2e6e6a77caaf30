"""Remedies measured: speed-ups with their intervals, and a workload's steps on its roofs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from brrrlib import _checks, _fmt
from brrrlib.figures._timelines import _bars, _new_axes

__all__ = ["block_steps", "remedy_bars"]


def remedy_bars(comparisons: Mapping[str, Any], *, title: str = "", ax: Any = None) -> Any:
    """Speed-up bars with their 95% intervals, one per remedy (chapter 03)."""
    rows = {k: c for k, c in comparisons.items() if c is not None}
    _checks.some("comparisons", rows, "dict(fused=bl.compare(...))")
    ax = _new_axes(ax, (8, 0.9 + 0.7 * len(rows)))
    bars = [(c.speedup, 1 / c.high, 1 / c.low) for c in rows.values()]  # speed-up, interval
    speedups, lows, highs = zip(*bars, strict=True)
    colours = ["tab:green" if lo > 1 else "tab:red" if hi < 1 else "tab:gray" for _, lo, hi in bars]
    errors = [[s - lo for s, lo, _ in bars], [hi - s for s, _, hi in bars]]
    labels = [
        f"{k}\n{_fmt.seconds(c.a.median_s)} → {_fmt.seconds(c.b.median_s)}" for k, c in rows.items()
    ]
    skipped = ", ".join(k for k, c in comparisons.items() if c is None)
    xlabel = "speed-up (x), 95% interval" + (f"; not measured: {skipped}" if skipped else "")
    _bars(ax, labels, speedups, colours, "{:.1f}x".format, xlabel, ends=highs, xerr=errors)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xlim(min(0.5, min(lows) / 2), 4 * max(highs))
    ax.set_title(title, fontsize=10)
    return ax


def block_steps(ceilings: Any, steps: Mapping[str, tuple[Any, float, int]]) -> Any:
    """Chapter 04's closing figure: each step on the roof of its own precision, and its time."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from brrrlib import roofline

    points = [
        roofline.RooflinePoint(f"{i}", c.flops, c.bytes_moved, s, c.precision)
        for i, (c, s, _b) in enumerate(steps.values(), start=1)
    ]
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, 4.8), layout="constrained", gridspec_kw={"width_ratios": [3, 2]}
    )
    precisions = list(dict.fromkeys(p.precision for p in points))
    colours = [f"C{precisions.index(p.precision)}" for p in points]  # the colour of its roof
    by_label = {p.label: c for p, c in zip(points, colours, strict=True)}
    roofline.plot(
        ceilings, points, ax=left, dtype=precisions, title=ceilings.device_name, colours=by_label
    )
    per_sequence = [s / b for _c, s, b in steps.values()]
    labels = [f"{i} · {label}" for i, label in enumerate(steps, start=1)]
    _bars(right, labels, per_sequence, colours, _fmt.seconds, "time per sequence (s)")
    right.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: _fmt.seconds(v)))
    return fig
