"""Figures for the course chapters: drawing only, from numbers measured or looked up elsewhere."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brrrlib import _fmt

# Drawn in _timelines (Python's pace, the live and recorded timelines) and _remedies
# (speed-ups measured, a workload's steps on its roofs), named here.
from brrrlib.figures._remedies import block_steps, remedy_bars
from brrrlib.figures._timelines import _new_axes, flops_per_python_add, timelines

__all__ = [
    "RecordedSweeps",
    "block_steps",
    "decision_flow",
    "factory_diagram",
    "flops_per_python_add",
    "generations_plot",
    "recorded_matmul_ladder",
    "recorded_repeat_sweep",
    "recorded_sweeps",
    "regimes_roofline",
    "remedy_bars",
    "sweep_plot",
    "timelines",
]

#: The recording the course ships (see its README.md): an H100, 2026-11-22.
RECORDING = Path(__file__).resolve().parents[1] / "recordings" / "h100-2026-11-22"
#: Elements per call of the recorded repeat sweep (its README: ``x = x * 2`` on 2^27 floats).
RECORDED_REPEAT_ELEMENTS = 2**27
_PRECISION_NAMES = {"torch.float32": "fp32", "torch.bfloat16": "bf16"}


# ------------------------------------------------------------------ chapter 00


def _factory_numbers(ceilings: Any) -> tuple[str, str, str]:
    """(factory, trucks, manager) labels: fp32 and, when faster, the best other precision."""
    fp32 = ceilings.matmul_flops_per_s
    flops = f"fp32 {_fmt.si(fp32, 'FLOP/s')}"
    others = {
        k: v
        for k, v in dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {})).items()
        if k != "fp32"
    }
    if others:
        best = max(others, key=others.get)
        if others[best] > 1.2 * fp32:
            flops += f"\n{best} {_fmt.si(others[best], 'FLOP/s')}"
    op_s = getattr(ceilings, "op_overhead_s", None)
    overhead = _fmt.seconds(op_s) + " per op" if op_s else "cost per op"
    return flops, _fmt.si(ceilings.mem_bandwidth_bytes_per_s, "B/s"), overhead


def factory_diagram(ceilings: Any = None, *, ax: Any = None) -> Any:
    """The essay's factory as boxes and arrows, labelled with ``ceilings``' numbers (chapter 00)."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    ax = _new_axes(ax, (9.5, 3.8))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 4.4)
    ax.axis("off")

    def box(x, y, w, h, color, title="", detail="", title_y=0.64, detail_y=0.3):
        ax.add_patch(
            FancyBboxPatch(
                (x, y), w, h, boxstyle="round,pad=0.08", fc=color, ec="black", lw=1.2, alpha=0.9
            )
        )
        ax.text(x + w / 2, y + h * title_y, title, ha="center", va="center", weight="bold")
        ax.text(x + w / 2, y + h * detail_y, detail, ha="center", va="center", fontsize=9)

    def arrow(x0, y0, x1, y1, label="", dy=0.22):
        ax.add_patch(
            FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=18, lw=1.6)
        )
        ax.text((x0 + x1) / 2, (y0 + y1) / 2 + dy, label, ha="center", fontsize=9)

    flops, bw, overhead = ("FLOP/s", "bandwidth, bytes/s", "cost per op")
    if ceilings is not None:
        flops, bw, overhead = _factory_numbers(ceilings)
    warehouse = "main memory\n(DRAM; HBM on a GPU)\nholds every tensor"
    box(0.1, 0.4, 2.6, 1.9, "#d9e8f5", "Warehouse", warehouse)
    box(5.0, 0.4, 4.85, 1.9, "#f8dcc4", "Factory", "", title_y=0.86)
    box(
        5.2,
        0.6,
        1.75,
        1.25,
        "#fff6d5",
        "store",
        "registers, caches\n(SRAM): small, fast",
        title_y=0.78,
        detail_y=0.35,
    )
    ax.text(8.4, 1.2, f"compute units\n{flops}", ha="center", va="center", fontsize=9)
    box(6.95, 2.95, 2.9, 1.2, "#e4e4e4", "Manager", f"Python + framework\n{overhead}")
    arrow(2.85, 1.65, 4.95, 1.65, f"trucks: {bw}")
    arrow(4.95, 1.0, 2.85, 1.0, "results go back", dy=-0.35)
    arrow(8.4, 2.9, 8.4, 2.35)
    ax.text(8.55, 2.58, "one kernel per op", fontsize=9)
    if ceilings is not None:
        name = getattr(ceilings, "device_name", "") or getattr(ceilings, "device", "")
        ax.set_title(f"This machine ({name}), measured" if name else "This machine, measured")
    return ax


_MARKERS = ("o", "s", "^", "D", "v", "P")


def regimes_roofline(
    ceilings: Any, points: Sequence[Any], *, beside: Sequence[Any] = (), ax: Any = None
) -> Any:
    """Chapter 00's roofline: this machine's roofs, devices ``beside`` it, points keyed in a legend."""
    from brrrlib import roofline

    if not points:
        raise ValueError("points: give at least one RooflinePoint to place under the roof")
    ax = _new_axes(ax, (10.5, 4.6))
    precisions = {getattr(p, "precision", "fp32") for p in points}
    dtype = precisions.pop() if len(precisions) == 1 else None
    hidden = [("", p.intensity_flops_per_byte, p.achieved_flops_per_s) for p in points]
    roofline.plot(ceilings, hidden, extra=beside, ax=ax, dtype=dtype)
    for t in ax.texts:  # ridge labels up and to the left of their dot: no point sits there
        if t.get_text().startswith("ridge") and hasattr(t, "xyann"):
            t.xyann = (-6, 6)
            t.set_horizontalalignment("right")
    for i, p in enumerate(points):
        ax.plot(
            [p.intensity_flops_per_byte],
            [p.achieved_flops_per_s],
            ls="none",
            ms=9,
            marker=_MARKERS[i % len(_MARKERS)],
            mfc="white",
            mec=f"C{3 + i}",
            mew=2,
            zorder=6,
            label=f"{p.label}: {_fmt.si(p.achieved_flops_per_s, 'FLOP/s')} at "
            f"{p.intensity_flops_per_byte:.3g} FLOP/byte",
        )
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return ax


def generations_plot(specs: Sequence[Any], *, dtype: str = "fp16", ax: Any = None) -> Any:
    """Bars: peak FLOP/s and bandwidth of ``specs``, relative to the first (chapter 00)."""
    if len(specs) < 2:
        raise ValueError("specs must hold at least two DeviceSpec rows, oldest first")
    ax = _new_axes(ax, (7, 4))
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


# ------------------------------------------------------------------ chapters 01 and 02


def sweep_plot(
    x: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    *,
    models: Mapping[str, Sequence[float]] | None = None,
    xlabel: str,
    ylabel: str,
    hlines: Mapping[str, float] | None = None,
    logy: bool = False,
    title: str | None = None,
    ax: Any = None,
) -> Any:
    """Measured ``ys`` against ``x``; ``models`` dashed in their colours, ``hlines`` dotted."""
    if not ys:
        raise ValueError("ys must hold at least one series, e.g. {'eager': times_s}")
    models = models or {}
    for label, y in {**ys, **models}.items():
        if len(y) != len(x):
            raise ValueError(f"series {label!r} has {len(y)} points but x has {len(x)}")
    ax = _new_axes(ax, (7, 4))
    for i, (label, y) in enumerate(ys.items()):
        ax.plot(x, y, marker="o", color=f"C{i}", label=label)
    for i, (label, y) in enumerate(models.items()):
        ax.plot(x, y, ls="--", lw=1.2, color=f"C{i}", alpha=0.8, label=label)
    for i, (label, value) in enumerate((hlines or {}).items()):
        ax.axhline(value, ls=":", lw=1.2, color=f"C{len(ys) + i}", label=label)
    ax.set_xscale("log", base=2)
    _fmt.plain_x_ticks(ax)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return ax


@dataclass(frozen=True)
class RecordedSweeps:
    """The sweeps recorded on a GPU and shipped with brrrlib (``recordings/*/sweeps``)."""

    device_name: str
    torch_version: str
    date: str
    matmul: tuple[tuple[str, int, float], ...]  # (precision, n, seconds) of an n x n torch.mm
    repeat: tuple[tuple[str, int, str, float], ...]  # (precision, repeat, mode, seconds)

    @property
    def label(self) -> str:
        """Where and when: "NVIDIA H100 80GB HBM3, recorded 2026-11-22, torch 2.11.0+cu130"."""
        return f"{self.device_name}, recorded {self.date}, torch {self.torch_version}"

    @property
    def precisions(self) -> tuple[str, ...]:
        """The matmul precisions recorded, in recording order."""
        return tuple(dict.fromkeys(p for p, _n, _s in self.matmul))

    def matmul_line(self, precision: str) -> tuple[tuple[int, float], ...]:
        """``(n, FLOP/s)`` for every recorded size in ``precision``."""
        return tuple((n, 2 * n**3 / s) for p, n, s in self.matmul if p == precision)

    def best_flops_per_s(self, precision: str) -> float:
        """The fastest recorded matmul in ``precision`` (FLOP/s): its roof as measured."""
        line = self.matmul_line(precision)
        if not line:
            have = ", ".join(self.precisions)
            raise KeyError(f"no {precision} matmul recorded; recorded: {have}")
        return max(f for _n, f in line)

    def repeat_line(self, precision: str, mode: str) -> tuple[tuple[int, float], ...]:
        """``(repeat, seconds per call)`` of one line of the recorded repeat sweep."""
        return tuple((r, s) for p, r, m, s in self.repeat if (p, m) == (precision, mode))


def recorded_sweeps(folder: Path = RECORDING) -> RecordedSweeps:
    """The matmul-per-precision and repeat sweeps recorded with the course (``sweeps/*.json``)."""
    (path,) = sorted((Path(folder) / "sweeps").glob("*.json"))
    data = json.loads(path.read_text())
    repeat = []
    for row in data["repeat"]:
        for mode in ("eager", "fused"):
            s = row[f"{mode}_s"]
            if s is not None and math.isfinite(s):  # eager past 64 was not recorded (NaN)
                repeat.append((_PRECISION_NAMES[row["dtype"]], row["repeat"], mode, s))
    return RecordedSweeps(
        device_name=data["device"],
        torch_version=data["torch"],
        date=Path(folder).name.split("-", 1)[1],
        matmul=tuple((r["prec"], r["n"], r["median_s"]) for r in data["matmul"]),
        repeat=tuple(repeat),
    )


def _recorded_axes(ax: Any, rec: RecordedSweeps, xlabel: str, ylabel: str, more: str = "") -> Any:
    """Log-log axes of a recorded sweep, titled with where and when it was recorded."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _fmt.plain_x_ticks(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(f"Recorded, not measured here: {rec.label}{more}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ax


def recorded_matmul_ladder(recording: RecordedSweeps | None = None, *, ax: Any = None) -> Any:
    """Recorded square-matmul TFLOP/s against size, one line per precision (chapter 01)."""
    rec = recording if recording is not None else recorded_sweeps()
    ax = _new_axes(ax, (7.5, 4.2))
    for i, p in enumerate(rec.precisions):
        line = rec.matmul_line(p)
        ax.plot(
            [n for n, _ in line],
            [f / 1e12 for _, f in line],
            marker="o",
            color=f"C{i}",
            label=f"{p}: best {_fmt.si(rec.best_flops_per_s(p), 'FLOP/s')}",
        )
    return _recorded_axes(ax, rec, "matrix size n (n × n @ n × n)", "achieved TFLOP/s")


def recorded_repeat_sweep(recording: RecordedSweeps | None = None, *, ax: Any = None) -> Any:
    """Recorded time per call against the repeat count: eager and fused, fp32 and bf16 (chapter 02)."""
    rec = recording if recording is not None else recorded_sweeps()
    ax = _new_axes(ax, (7.5, 4.2))
    for colour, mode in (("C0", "eager"), ("C1", "fused")):
        for style, precision in (("-", "fp32"), ("--", "bf16")):
            line = rec.repeat_line(precision, mode)
            if line:
                ax.plot(
                    [r for r, _ in line],
                    [s * 1e3 for _, s in line],
                    marker="o",
                    ls=style,
                    color=colour,
                    label=f"{mode}, {precision}",
                )
    per_call = f"\n{_fmt.elements(RECORDED_REPEAT_ELEMENTS)} elements per call"
    return _recorded_axes(
        ax, rec, "repeat count (x = x * 2, repeated)", "time per call (ms)", per_call
    )


# ------------------------------------------------------------------ chapters 03 and 04 (their figures)


# The decision procedure's boxes: name -> (x, y, width, text, colour), in axes fractions.
_FLOW_BOXES = {
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


def _flow_arrow(ax: Any, a: str, b: str) -> None:
    """An arrow from box ``a`` down to box ``b`` of :data:`_FLOW_BOXES`."""
    from matplotlib.patches import FancyArrowPatch

    (x0, y0), (x1, y1) = _FLOW_BOXES[a][:2], _FLOW_BOXES[b][:2]
    ax.add_patch(
        FancyArrowPatch(
            (x0, y0 - 0.06 if y1 < y0 else y0),
            (x1, y1 + 0.06 if y1 < y0 else y1),
            arrowstyle="-|>",
            mutation_scale=12,
            color="0.3",
            connectionstyle="arc3,rad=0.0",
        )
    )


def _flow_loop_back(ax: Any) -> None:
    """Dashed arrows from both "act" boxes back to "measure": a remedy can change the regime."""
    for act, side in (("act_work", -1), ("act_over", 1)):
        x, y, w = _FLOW_BOXES[act][:3]
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


def decision_flow(*, ax: Any = None) -> Any:
    """Draw chapter 04's decision procedure as boxes and arrows; returns the Axes."""
    from matplotlib.patches import FancyBboxPatch

    ax = _new_axes(ax, (11, 6.2))
    for x, y, w, text, colour in _FLOW_BOXES.values():
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
    _flow_arrow(ax, "measure", "count")
    _flow_arrow(ax, "count", "compare")
    for regime in ("compute", "memory", "overhead"):
        _flow_arrow(ax, "compare", regime)
        _flow_arrow(ax, regime, "confirm")
    _flow_arrow(ax, "confirm", "act_work")
    _flow_arrow(ax, "confirm", "act_over")
    ax.text(
        0.27, 0.145, "time follows the work, device busy", fontsize=8, ha="center", color="0.25"
    )
    ax.text(0.73, 0.145, "time flat, device idle", fontsize=8, ha="center", color="0.25")
    _flow_loop_back(ax)
    ax.set_xlim(-0.04, 1.04)
    ax.set_ylim(-0.02, 1.0)
    ax.axis("off")
    ax.set_title("The decision procedure (chapter 04)")
    return ax
