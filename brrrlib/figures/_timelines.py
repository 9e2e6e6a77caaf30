"""The host against the device: Python's pace beside device FLOP/s, and profiler timelines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from brrrlib import _checks, _fmt

__all__ = ["flops_per_python_add", "timelines"]


def _new_axes(ax: Any, figsize: tuple[float, float]) -> Any:
    """``ax``, or the Axes of a new figure of ``figsize`` (every figure here starts so)."""
    import matplotlib.pyplot as plt

    return ax if ax is not None else plt.subplots(figsize=figsize, layout="constrained")[1]


def _bars(ax, labels, values, colours, says, xlabel, *, ends=(), **kw) -> None:
    """Bars top down on a log x axis, each value ``says(value)`` past its end (or ``ends``)."""
    ends = ends or values
    ax.barh(labels, values, color=colours, capsize=4, **kw)
    for y, (v, end) in enumerate(zip(values, ends, strict=True)):
        ax.text(end, y, f" {says(v)}", va="center", fontsize=8)
    ax.set(xscale="log", xlabel=xlabel, xlim=(min(values) / 3, max(ends) * 8))
    ax.invert_yaxis()


def flops_per_python_add(python_adds_per_s: float, ceilings: Any, *, ax: Any = None) -> Any:
    """Bars: FLOPs each device (bf16 spec peaks, this machine measured) does per Python add."""
    from brrrlib.hardware import all_specs

    specs = [s for s in all_specs() if "bf16" in s.peak_flops_per_s]
    rows = [(f"{s.name} (bf16)", s.peak("bf16")) for s in specs]
    by_dtype = dict(ceilings.matmul_flops_per_s_by_dtype)
    best = max(by_dtype, key=by_dtype.get)
    rows.append((f"measured: {ceilings.device_name}\n{best}", by_dtype[best]))
    ax = _new_axes(ax, (7.5, 0.45 * len(rows) + 1.2))
    values = [peak / python_adds_per_s for _, peak in rows]
    colours = ["tab:blue"] * (len(rows) - 1) + ["tab:orange"]
    per_add = f"FLOPs per Python addition (Python: {_fmt.si(python_adds_per_s)} additions/s)"
    _bars(ax, [name for name, _ in rows], values, colours, _fmt.si, per_add)
    ax.tick_params(axis="y", labelsize=8)
    return ax


def timelines(traces: Sequence[Any]) -> Any:
    """One timeline per trace, stacked, each its first steady run; returns the Figure."""
    import matplotlib.pyplot as plt

    _checks.some("traces", traces, "[bl.profile(...)]")
    fig, axes = plt.subplots(
        len(traces), 1, figsize=(10.0, 2.35 * len(traces)), layout="constrained", squeeze=False
    )
    for ax, trace in zip(axes[:, 0], traces, strict=True):
        trace.plot(ax=ax, run=trace.steady_runs[0] if trace.steady_runs else 0)
    return fig
