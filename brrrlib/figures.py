"""Figures for the course chapters: the factory diagram, sweeps, generation bars.

Drawing only: every function takes numbers that were measured or looked up
elsewhere (``bl.measure_ceilings``, ``bl.benchmark``, ``bl.spec``) and returns
the matplotlib ``Axes`` so a notebook can add to it. ``matplotlib.pyplot`` is
imported inside each function, so importing brrrlib never touches matplotlib's
global state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brrrlib import _fmt

__all__ = ["decision_flow", "factory_diagram", "generations_plot", "speedup_bars", "sweep_plot"]


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize)
    return ax


def factory_diagram(ceilings: Any = None, *, ax: Any = None) -> Any:
    """Draw the essay's metaphor as boxes and arrows, labelled with a machine's numbers.

    The *warehouse* (DRAM) holds the tensors; *trucks* (memory bandwidth,
    bytes/s) carry them to the *factory* (the compute units, FLOP/s) and the
    results back; the *manager* (Python and the framework, a fixed cost per
    op) sends the factory one instruction per operation. ``ceilings`` is a
    ``bl.Ceilings`` (measured) or anything with ``matmul_flops_per_s``,
    ``mem_bandwidth_bytes_per_s`` and optionally ``op_overhead_s``; without it
    the boxes carry words only. Chapter 00.
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    ax = _axes(ax, (9, 3.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 4.4)
    ax.axis("off")

    def box(x, y, w, h, title, detail, color):
        ax.add_patch(
            FancyBboxPatch(
                (x, y), w, h, boxstyle="round,pad=0.08", fc=color, ec="black", lw=1.2, alpha=0.9
            )
        )
        ax.text(x + w / 2, y + h * 0.64, title, ha="center", va="center", weight="bold")
        ax.text(x + w / 2, y + h * 0.3, detail, ha="center", va="center", fontsize=9)

    def arrow(x0, y0, x1, y1, label, dy=0.22, style="-|>"):
        ax.add_patch(
            FancyArrowPatch((x0, y0), (x1, y1), arrowstyle=style, mutation_scale=18, lw=1.6)
        )
        ax.text((x0 + x1) / 2, (y0 + y1) / 2 + dy, label, ha="center", fontsize=9)

    flops = bw = overhead = None
    if ceilings is not None:
        flops = _fmt.si(ceilings.matmul_flops_per_s, "FLOP/s")
        bw = _fmt.si(ceilings.mem_bandwidth_bytes_per_s, "B/s")
        op_s = getattr(ceilings, "op_overhead_s", None)
        overhead = _fmt.seconds(op_s) + " per op" if op_s else None

    box(0.2, 0.4, 2.8, 1.8, "Warehouse", "memory (DRAM)\nholds the tensors", "#d9e8f5")
    box(6.9, 0.4, 2.8, 1.8, "Factory", f"compute units\n{flops or 'FLOP/s'}", "#f8dcc4")
    box(
        6.9, 2.9, 2.8, 1.2, "Manager", f"Python + framework\n{overhead or 'cost per op'}", "#e4e4e4"
    )
    arrow(3.15, 1.6, 6.75, 1.6, f"trucks: {bw or 'bandwidth, bytes/s'}")
    arrow(6.75, 1.0, 3.15, 1.0, "results go back too", dy=-0.35)
    arrow(8.3, 2.85, 8.3, 2.3, "", style="-|>")
    ax.text(8.45, 2.55, "instructions", fontsize=9)
    if ceilings is not None:
        name = getattr(ceilings, "device_name", "") or getattr(ceilings, "device", "")
        ax.set_title(f"This machine ({name})" if name else "This machine")
    return ax


def sweep_plot(
    x: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    *,
    models: Mapping[str, Sequence[float]] | None = None,
    xlabel: str,
    ylabel: str,
    hlines: Mapping[str, float] | None = None,
    logx: bool = True,
    logy: bool = False,
    title: str | None = None,
    ax: Any = None,
) -> Any:
    """Plot one or more measured series against a swept parameter.

    ``ys`` maps a legend label to a measured series (same length as ``x``;
    ``nan`` leaves a point out), drawn with markers; ``models`` maps a label
    to a predicted series, drawn dashed in the colour of the measured series
    at the same position, so measurement and prediction pair up; ``hlines``
    maps a label to a horizontal reference (a ceiling, a spec-sheet peak),
    drawn dotted. Label axes with their units, e.g.
    ``xlabel="matrix size n"``, ``ylabel="achieved TFLOP/s"``.
    """
    if not ys:
        raise ValueError("ys must hold at least one series, e.g. {'eager': times_s}")
    models = models or {}
    for label, y in {**ys, **models}.items():
        if len(y) != len(x):
            raise ValueError(f"series {label!r} has {len(y)} points but x has {len(x)}")
    ax = _axes(ax, (7, 4))
    for i, (label, y) in enumerate(ys.items()):
        ax.plot(x, y, marker="o", color=f"C{i}", label=label)
    for i, (label, y) in enumerate(models.items()):
        ax.plot(x, y, ls="--", lw=1.2, color=f"C{i}", alpha=0.8, label=label)
    for i, (label, value) in enumerate((hlines or {}).items()):
        ax.axhline(value, ls=":", lw=1.2, color=f"C{len(ys) + i}", label=label)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax


def generations_plot(specs: Sequence[Any], *, dtype: str = "fp16", ax: Any = None) -> Any:
    """Bars: how peak FLOP/s and memory bandwidth grew across GPU generations.

    ``specs`` are ``bl.DeviceSpec`` rows in time order (e.g.
    ``[bl.spec(n) for n in ("V100", "A100", "H100")]``). Both quantities are
    shown relative to the first device, on one axis, with the ridge point
    (FLOP per byte) written above each pair: when FLOP/s grows faster than
    bandwidth, the ridge point climbs and more kernels become memory-bound.
    Chapter 00.
    """
    if len(specs) < 2:
        raise ValueError("specs must hold at least two DeviceSpec rows, oldest first")
    ax = _axes(ax, (7, 4))
    first = specs[0]
    f0 = first.peak_flops_per_s[dtype]
    b0 = first.mem_bandwidth_bytes_per_s
    xs = range(len(specs))
    fl = [s.peak_flops_per_s[dtype] / f0 for s in specs]
    bw = [s.mem_bandwidth_bytes_per_s / b0 for s in specs]
    ax.bar([i - 0.2 for i in xs], fl, width=0.4, label=f"peak {dtype} FLOP/s")
    ax.bar([i + 0.2 for i in xs], bw, width=0.4, label="memory bandwidth")
    top = max(fl + bw)
    for i, s in enumerate(specs):
        ridge = s.peak_flops_per_s[dtype] / s.mem_bandwidth_bytes_per_s
        ax.text(
            i, max(fl[i], bw[i]) + 0.03 * top, f"ridge {ridge:.0f} FLOP/B", ha="center", fontsize=9
        )
    ax.set_xticks(list(xs), [s.name for s in specs])
    ax.set_ylim(0, top * 1.15)
    ax.set_ylabel(f"growth relative to {first.name} (x)")
    ax.set_title("Compute outgrew bandwidth")
    ax.legend(loc="upper left")
    return ax


def decision_flow(*, ax: Any = None) -> Any:
    """Draw chapter 04's decision procedure as boxes and arrows; returns the Axes.

    Measure -> count -> compare with the ceilings (three floors) -> the suspect
    regime -> scale the batch / look at the trace -> act, and back to measure.
    Drawing only: no numbers, no measurement.
    """
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    ax = _axes(ax, (11, 6.2))
    boxes = {
        # name: (x, y, width, text, colour)
        "measure": (0.5, 0.92, 0.34, "1 · Measure\nbl.benchmark: time per call", "#dbe9f6"),
        "count": (0.5, 0.76, 0.34, "2 · Count\nbl.count: FLOPs, bytes, ops", "#dbe9f6"),
        "compare": (
            0.5,
            0.58,
            0.56,
            "3 · Compare with the ceilings (bl.measure_ceilings):\n"
            "which floor comes closest to the measured time?",
            "#fff2cc",
        ),
        "compute": (0.17, 0.40, 0.28, "compute-bound?\nFLOPs / matmul FLOP/s", "#f8d7d3"),
        "memory": (0.5, 0.40, 0.28, "memory-bound?\nbytes / bandwidth", "#f8d7d3"),
        "overhead": (0.83, 0.40, 0.28, "overhead-bound?\nops x overhead per op", "#f8d7d3"),
        "confirm": (
            0.5,
            0.23,
            0.56,
            "4 · Scale the batch: does the time follow the work?\n"
            "5 · Look at the trace: is the device idle between ops?",
            "#fff2cc",
        ),
        "act_work": (
            0.23,
            0.05,
            0.45,
            "6 · Act on compute / memory: tensor cores, lower\n"
            "precision, fuse (torch.compile), fewer FLOPs or bytes",
            "#d9ead3",
        ),
        "act_over": (
            0.77,
            0.05,
            0.45,
            "6 · Act on overhead: batch, torch.compile,\nCUDA graphs, fewer and larger ops",
            "#d9ead3",
        ),
    }
    for x, y, w, text, colour in boxes.values():
        ax.add_patch(
            FancyBboxPatch(
                (x - w / 2, y - 0.055),
                w,
                0.11,
                boxstyle="round,pad=0.01",
                facecolor=colour,
                edgecolor="0.3",
                linewidth=1,
            )
        )
        ax.text(x, y, text, ha="center", va="center", fontsize=9)

    def arrow(a, b, label="", rad=0.0):
        (x0, y0), (x1, y1) = boxes[a][:2], boxes[b][:2]
        ax.add_patch(
            FancyArrowPatch(
                (x0, y0 - 0.06 if y1 < y0 else y0),
                (x1, y1 + 0.06 if y1 < y0 else y1),
                arrowstyle="-|>",
                mutation_scale=12,
                color="0.3",
                connectionstyle=f"arc3,rad={rad}",
            )
        )
        if label:
            ax.text(
                (x0 + x1) / 2,
                (y0 + y1) / 2,
                label,
                fontsize=8,
                ha="center",
                color="0.25",
                backgroundcolor="white",
            )

    arrow("measure", "count")
    arrow("count", "compare")
    for regime in ("compute", "memory", "overhead"):
        arrow("compare", regime)
        arrow(regime, "confirm")
    arrow("confirm", "act_work")
    arrow("confirm", "act_over")
    ax.text(
        0.27, 0.145, "time follows the work, device busy", fontsize=8, ha="center", color="0.25"
    )
    ax.text(0.73, 0.145, "time flat, device idle", fontsize=8, ha="center", color="0.25")
    # back to the start: a remedy often changes the regime
    for act, side in (("act_work", -1), ("act_over", 1)):
        x, y, w = boxes[act][:3]
        ax.annotate(
            "",
            xy=(0.5 + side * 0.17, 0.92),
            xytext=(x + side * w / 2, y),
            arrowprops=dict(
                arrowstyle="-|>", color="0.55", ls="--", connectionstyle=f"arc3,rad={0.35 * side}"
            ),
        )
    ax.text(
        0.99,
        0.80,
        "then measure again:\na remedy often\nchanges the regime",
        fontsize=8,
        ha="right",
        va="center",
        color="0.4",
    )
    ax.set_xlim(-0.04, 1.04)
    ax.set_ylim(-0.02, 1.0)
    ax.axis("off")
    ax.set_title("The decision procedure (chapter 04)")
    return ax


def speedup_bars(
    results: Mapping[str, tuple[float, float]], *, title: str = "", ax: Any = None
) -> Any:
    """Before/after times as speed-up bars on a log axis (1x = no change).

    ``results`` maps a remedy's name to ``(before_s, after_s)``, two measured
    median times (``bl.benchmark(...).median_s``). Each bar is before / after,
    green when the remedy helped and red when it made things slower, which
    happens: a remedy for one regime does nothing for another. Chapter 03.
    """
    if not results:
        raise ValueError("results is empty: pass {name: (before_s, after_s)}")
    for name, pair in results.items():
        if len(pair) != 2 or min(pair) <= 0:
            raise ValueError(f"results[{name!r}] must be (before_s, after_s), both > 0; got {pair}")
    ax = _axes(ax, (8, 0.8 + 0.7 * len(results)))
    speedups = [before / after for before, after in results.values()]
    labels = [
        f"{name}\n{_fmt.seconds(before)} -> {_fmt.seconds(after)}"
        for name, (before, after) in results.items()
    ]
    ax.barh(labels, speedups, color=["tab:green" if x >= 1 else "tab:red" for x in speedups])
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(min(0.5, min(speedups) / 2), 3 * max(speedups))
    ax.set_xlabel("speed-up over before (x, log scale; 1 = no change)")
    if title:
        ax.set_title(title)
    ax.invert_yaxis()
    for y, x in enumerate(speedups):
        ax.text(x, y, f" {x:.1f}x", va="center")
    return ax
