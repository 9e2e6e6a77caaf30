"""The figures of chapters 03 (overhead) and 04 (diagnose); re-exported by :mod:`brrrlib.figures`.

Drawing only, like the rest of :mod:`brrrlib.figures`: every function takes
what a cell measured (ceilings, traces, comparisons, counts and times) and
returns the matplotlib ``Figure`` or ``Axes``. Traces recorded on a GPU
(``bl.trace.recorded``) are drawn beside live ones and say so in their title.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brrrlib import _fmt

__all__ = ["block_steps", "flops_per_python_add", "remedy_bars", "timelines"]

#: Colour of each matmul precision on chapter 04's roofline.
_PRECISION_COLOURS = {"fp32": "tab:blue", "tf32": "tab:purple", "bf16": "tab:green",
                      "fp16": "tab:olive"}  # fmt: skip


def _new_axes(ax: Any, figsize: tuple[float, float]) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def flops_per_python_add(python_adds_per_s: float, ceilings: Any, *, ax: Any = None) -> Any:
    """Bars: FLOPs each device can do while Python does one addition (chapter 03).

    Spec-sheet devices at their bf16 peak (``bl.specs()``, blue) and this
    machine at its fastest *measured* matmul precision (orange), all divided by
    the Python speed measured here. Log axis; returns the Axes.
    """
    from brrrlib.hardware import specs

    rows = [(s.name, s.peak("bf16")) for s in specs() if "bf16" in s.peak_flops_per_s]
    by_dtype = dict(ceilings.matmul_flops_per_s_by_dtype)
    best = max(by_dtype, key=by_dtype.get)
    rows.append((f"this machine, measured\n({ceilings.device_name}, {best})", by_dtype[best]))
    ax = _new_axes(ax, (7.5, 0.45 * len(rows) + 1.2))
    values = [peak / python_adds_per_s for _, peak in rows]
    colours = ["tab:blue"] * (len(rows) - 1) + ["tab:orange"]
    ax.barh([name for name, _ in rows], values, color=colours)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("FLOPs per Python addition (log scale)")
    ax.set_title(f"Python here: {_fmt.si(python_adds_per_s)} additions/s; blue: bf16 spec peaks",
                 fontsize=10)  # fmt: skip
    ax.tick_params(axis="y", labelsize=8)
    for y, v in enumerate(values):
        ax.text(v, y, f" {_fmt.si(v)}", va="center", fontsize=8)
    ax.set_xlim(min(values) / 3, max(values) * 8)
    return ax


def timelines(traces: Sequence[Any], *, width: float = 10.0) -> Any:
    """One timeline per trace, stacked: host lane over device lane, each its first steady run.

    Each title names the trace, where it ran ("live, cpu" or "recorded on an
    H100 ...") and how busy the device was in the run drawn. Each row has its
    own time axis. Returns the Figure.
    """
    import matplotlib.pyplot as plt

    if not traces:
        raise ValueError("traces is empty: pass bl.profile(...) or bl.trace.recorded(...) results")
    fig, axes = plt.subplots(len(traces), 1, figsize=(width, 2.35 * len(traces)),
                             layout="constrained", squeeze=False)  # fmt: skip
    for ax, trace in zip(axes[:, 0], traces, strict=True):
        run = trace.steady_runs[0] if trace.steady_runs else 0
        trace.plot(ax=ax, run=run)
        where = (f"recorded on {trace.recorded_on.split(',')[0]}" if trace.recorded_on
                 else f"live, {trace.device}")  # fmt: skip
        busy = trace.busy_fraction_per_run[run]
        ax.set_title(f"{trace.label or 'trace'} ({where}): run {run}, device busy "
                     f"{_fmt.percent(busy, 1)}", loc="left", fontsize=9)  # fmt: skip
        legend = ax.get_legend()
        if legend is not None:  # the op colours, right of the lanes: never over a bar
            legend.set_bbox_to_anchor((1.005, 0.5))
            legend.set_loc("center left")
            legend.set_ncols(1)
    return fig


def remedy_bars(comparisons: Mapping[str, Any], *, title: str = "", ax: Any = None) -> Any:
    """Speed-up bars with their 95% intervals, one per remedy (chapter 03).

    ``comparisons`` maps a remedy's name to ``bl.compare(before, after)``; a
    ``None`` value (a remedy that needs CUDA on a CPU) is left out and named
    under the axis. Green when the whole interval is a speed-up, red when a
    slow-down, grey when it cannot tell. Log axis; 1 = no change.
    """
    rows = {k: c for k, c in comparisons.items() if c is not None}
    if not rows:
        raise ValueError("comparisons holds no measurement: pass {name: bl.compare(before, after)}")
    ax = _new_axes(ax, (8, 0.9 + 0.7 * len(rows)))
    speedups = [c.speedup for c in rows.values()]
    lows = [1 / c.high for c in rows.values()]
    highs = [1 / c.low for c in rows.values()]
    colours = ["tab:green" if lo > 1 else "tab:red" if hi < 1 else "tab:gray"
               for lo, hi in zip(lows, highs, strict=True)]  # fmt: skip
    labels = [f"{name}\n{_fmt.seconds(c.a.median_s)} → {_fmt.seconds(c.b.median_s)}"
              for name, c in rows.items()]  # fmt: skip
    errors = [[s - lo for s, lo in zip(speedups, lows, strict=True)],
              [hi - s for s, hi in zip(speedups, highs, strict=True)]]  # fmt: skip
    ax.barh(labels, speedups, color=colours, xerr=errors, capsize=4)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(min(0.5, min(lows) / 2), 4 * max(highs))
    skipped = [k for k, c in comparisons.items() if c is None]
    note = f"\n(not measured here: {', '.join(skipped)})" if skipped else ""
    ax.set_xlabel(f"speed-up (x, log scale; 1 = no change; bars: 95% interval){note}")
    ax.invert_yaxis()
    for y, (s, hi) in enumerate(zip(speedups, highs, strict=True)):
        ax.text(hi * 1.05, y, f"{s:.1f}x", va="center", fontsize=9)
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def block_steps(ceilings: Any, steps: Mapping[str, tuple[Any, float, int]]) -> Any:
    """Chapter 04's closing figure: each step on the roof of its own precision, and its time.

    ``steps`` maps a step's label to ``(counts, seconds_per_call, batch)``.
    Left: one roofline per matmul precision among the steps (a bf16 step under
    the bf16 roof, an fp32 one under the fp32 roof, both measured here), each
    point numbered by its step and coloured by its precision, checked against
    its own roof only. Right: time per sequence. Returns the Figure.
    """
    import matplotlib.pyplot as plt

    from brrrlib import roofline

    points = [roofline.RooflinePoint(f"{i}", c.flops, c.bytes_moved, s,
                                     c.precision)
              for i, (c, s, _b) in enumerate(steps.values(), start=1)]  # fmt: skip
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), layout="constrained",
                                      gridspec_kw={"width_ratios": [3, 2]})  # fmt: skip
    _roofs_by_precision(left, ceilings, points)
    per_sequence = [s / b for _c, s, b in steps.values()]
    labels = [f"{i} · {label}" for i, label in enumerate(steps, start=1)]
    right.barh(labels, per_sequence, color=[_colour(p.precision) for p in points])
    right.set_xscale("log")
    right.invert_yaxis()
    right.set_xlabel("time per sequence (s, log scale)")
    right.xaxis.set_major_formatter(_seconds_formatter())
    right.set_title("Each step, re-measured", fontsize=10)
    for y, t in enumerate(per_sequence):
        right.text(t, y, f" {_fmt.seconds(t)}", va="center", fontsize=8)
    right.set_xlim(min(per_sequence) / 2, max(per_sequence) * 6)
    return fig


def _colour(precision: str) -> str:
    return _PRECISION_COLOURS.get(precision, "tab:gray")


def _seconds_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _pos: _fmt.seconds(v))


def _roofs_by_precision(ax: Any, ceilings: Any, points: Sequence[Any]) -> None:
    """A roof per precision among ``points``; each point on its own roof, numbered."""
    import numpy as np
    from matplotlib.ticker import EngFormatter

    from brrrlib import roofline

    bw = ceilings.mem_bandwidth_bytes_per_s
    precisions = sorted({p.precision for p in points}, key=lambda k: ceilings.matmul_peak(k))
    xs = [p.intensity_flops_per_byte for p in points]
    ridges = [ceilings.ridge_point_flops_per_byte(k) for k in precisions]
    grid = np.logspace(np.log10(min(xs + ridges) / 10), np.log10(max(xs + ridges) * 10), 300)
    for k in precisions:
        peak = ceilings.matmul_peak(k)
        ax.plot(grid, np.minimum(peak, grid * bw), color=_colour(k), lw=2,
                label=f"{k} matmul roof, measured: {_fmt.si(peak, 'FLOP/s')}")  # fmt: skip
    for i, p in enumerate(points):
        x, y = p.intensity_flops_per_byte, p.achieved_flops_per_s
        bad = roofline.above_roof(p, ceilings, p.precision)
        ax.plot([x], [y], "X" if bad else "o", color="red" if bad else _colour(p.precision),
                ms=9, mec="black", zorder=5)  # fmt: skip
        # Steps at the same intensity (eager and compiled, fp32 and TF32) stack in one column:
        # their numbers go left and right of it in turn, so no number covers another.
        same_x = sum(abs(np.log10(q.intensity_flops_per_byte / x)) < 0.05 for q in points[:i])
        left = same_x % 2 == 1
        ax.annotate(p.label, (x, y), textcoords="offset points", xytext=(-9 if left else 9, 0),
                    ha="right" if left else "left", va="center", fontsize=9, weight="bold")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved (FLOP/s)")
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.set_title(f"The block on {ceilings.device_name}: each step under its own roof "
                 f"(bandwidth {_fmt.si(bw, 'B/s')})", fontsize=10)  # fmt: skip
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
