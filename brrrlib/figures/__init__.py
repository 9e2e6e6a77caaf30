"""Figures for the course chapters: drawing only, from numbers measured or looked up elsewhere."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brrrlib import _checks, _fmt

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


# ------------------------------------------------------------------ boxes and arrows


def _box(ax: Any, cx: float, cy: float, w: float, h: float, colour: str, text: str) -> None:
    """A rounded box centred on ``(cx, cy)``, ``w`` x ``h`` in data units, ``text`` inside."""
    from matplotlib.patches import FancyBboxPatch

    corner, pad = (cx - w / 2, cy - h / 2), f"round,pad={min(0.08, h / 10):.3g}"
    ax.add_patch(FancyBboxPatch(corner, w, h, boxstyle=pad, fc=colour, ec="0.3", lw=1.1))
    ax.text(cx, cy, text, ha="center", va="center", fontsize=9)


def _arrow(ax: Any, start: tuple, end: tuple, **kw: Any) -> None:
    from matplotlib.patches import FancyArrowPatch

    style = {"arrowstyle": "-|>", "mutation_scale": 14, "lw": 1.3, "color": "0.25", **kw}
    ax.add_patch(FancyArrowPatch(start, end, **style))


# ------------------------------------------------------------------ chapter 00


def factory_diagram(ceilings: Any = None, *, ax: Any = None) -> Any:
    """The essay's factory as boxes and arrows, labelled with ``ceilings``' numbers (chapter 00)."""
    ax = _new_axes(ax, (9.5, 3.8))
    flops, bw, overhead = "FLOP/s", "bandwidth", "cost"
    if ceilings is not None:  # fp32 and, when clearly faster, the fastest other precision
        fp32 = ceilings.matmul_flops_per_s
        by_dtype = dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {}), fp32=fp32)
        best = max(by_dtype, key=by_dtype.get)
        flops = f"fp32 {_fmt.si(fp32, 'FLOP/s')}"
        if by_dtype[best] > 1.2 * fp32:
            flops += f"\n{best} {_fmt.si(by_dtype[best], 'FLOP/s')}"
        bw = _fmt.si(ceilings.mem_bandwidth_bytes_per_s, "B/s")
        overhead = _fmt.seconds(ceilings.op_overhead_s)
        ax.set_title(f"measured: {ceilings.device_name}")
    _box(ax, 1.4, 1.35, 2.6, 1.9, "#d9e8f5", "Warehouse\n\nmain memory\n(DRAM; HBM on a GPU)")
    _box(ax, 7.43, 1.35, 4.85, 1.9, "#f8dcc4", "")
    ax.text(7.43, 2.03, "Factory", ha="center", va="center", weight="bold")
    _box(ax, 6.08, 1.23, 1.75, 1.25, "#fff6d5", "store\nregisters, caches\n(SRAM): small, fast")
    _box(ax, 8.4, 3.55, 2.9, 1.2, "#e4e4e4", f"Manager\nPython + framework\n{overhead} per op")
    ax.text(8.4, 1.2, f"compute\n{flops}", ha="center", va="center", fontsize=9)
    for start, end, label, dy in (
        ((2.85, 1.65), (4.95, 1.65), f"trucks: {bw}", 0.22),
        ((4.95, 1.0), (2.85, 1.0), "results", -0.35),
        ((8.4, 2.9), (8.4, 2.35), "kernels", 0.0),
    ):
        _arrow(ax, start, end, mutation_scale=18, lw=1.6, color="black")
        x, y = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + dy
        ax.text(x + 0.15 * (dy == 0), y, label, ha="left" if dy == 0 else "center", fontsize=9)
    ax.set(xlim=(0, 10), ylim=(0, 4.4))
    ax.axis("off")
    return ax


def regimes_roofline(
    ceilings: Any, points: Sequence[Any], *, beside: Sequence[Any] = (), ax: Any = None
) -> Any:
    """Chapter 00's roofline: this machine's roofs, devices ``beside`` it, points keyed in a legend."""
    from brrrlib import roofline

    _checks.some("points", points, "[bl.roofline.RooflinePoint(...)]")
    precisions = list(dict.fromkeys(getattr(p, "precision", "fp32") for p in points))
    keyed = []
    for p in points:
        x, y = p.intensity_flops_per_byte, p.achieved_flops_per_s
        keyed.append((f"{p.label}: {_fmt.si(y, 'FLOP/s')} at {x:.3g} FLOP/byte", x, y))
    ax = _new_axes(ax, (10.5, 4.6))
    roofline.plot(ceilings, keyed, extra=beside, ax=ax, dtype=precisions, keyed=True)
    return ax


def generations_plot(specs: Sequence[Any], *, dtype: str = "fp16", ax: Any = None) -> Any:
    """Bars: peak FLOP/s and bandwidth of ``specs``, relative to the first (chapter 00)."""
    from brrrlib import roofline

    _checks.some("specs", specs, "[bl.spec(...)]", least=2)
    ax = _new_axes(ax, (7, 4))
    xs, first = range(len(specs)), specs[0]
    fl = [s.peak_flops_per_s[dtype] / first.peak_flops_per_s[dtype] for s in specs]
    bw = [s.mem_bandwidth_bytes_per_s / first.mem_bandwidth_bytes_per_s for s in specs]
    ax.bar([i - 0.2 for i in xs], fl, width=0.4, label=f"peak {dtype} FLOP/s")
    ax.bar([i + 0.2 for i in xs], bw, width=0.4, label="memory bandwidth")
    top = max(fl + bw)
    for i, s in enumerate(specs):
        ridge = s.peak_flops_per_s[dtype] / s.mem_bandwidth_bytes_per_s
        ax.text(i, max(fl[i], bw[i]) + 0.03 * top, roofline.RIDGE_LABEL.format(ridge), ha="center")
    ax.set_xticks(list(xs), [s.name for s in specs])
    ax.set(ylim=(0, top * 1.15), ylabel=f"growth relative to {first.name} (x)")
    ax.legend()
    return ax


# ------------------------------------------------------------------ chapters 01 and 02


def _lines(ax, lines: Sequence[tuple], xlabel: str, ylabel: str, title="", hlines=(), logy=True):
    """``(label, xs, ys, style)`` lines on a log2 x axis; ``(label, y, colour)`` hlines dotted."""
    ax = _new_axes(ax, (7.5, 4.2))
    for label, xs, ys, style in lines:
        ax.plot(xs, ys, label=label, **style)
    for label, y, colour in hlines:
        ax.axhline(y, ls=":", lw=1.2, color=colour, label=label)
    ax.set_xscale("log", base=2)
    ax.set(yscale="log" if logy else "linear", xlabel=xlabel, ylabel=ylabel)
    _fmt.plain_x_ticks(ax)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


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
    _checks.some("ys", ys, "dict(eager=times_s)")
    models = models or {}
    for label, y in {**ys, **models}.items():
        if len(y) != len(x):
            raise ValueError(f"series {label!r} has {len(y)} points but x has {len(x)}")
    lines = [(k, x, y, {"marker": "o", "color": f"C{i}"}) for i, (k, y) in enumerate(ys.items())]
    dashed = {"ls": "--", "lw": 1.2, "alpha": 0.8}
    lines += [(k, x, y, {"color": f"C{i}", **dashed}) for i, (k, y) in enumerate(models.items())]
    across = [(k, y, f"C{len(ys) + i}") for i, (k, y) in enumerate((hlines or {}).items())]
    return _lines(ax, lines, xlabel, ylabel, title or "", across, logy)


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
        _checks.one_of("precision", precision, self.precisions)
        return max(f for _n, f in self.matmul_line(precision))

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


def recorded_matmul_ladder(recording: RecordedSweeps | None = None, *, ax: Any = None) -> Any:
    """Recorded square-matmul TFLOP/s against size, one line per precision (chapter 01)."""
    rec = recording if recording is not None else recorded_sweeps()
    lines = []
    for i, p in enumerate(rec.precisions):
        n, flops = zip(*rec.matmul_line(p), strict=True)
        label = f"{p}: best {_fmt.si(rec.best_flops_per_s(p), 'FLOP/s')}"
        lines.append((label, n, [f / 1e12 for f in flops], {"marker": "o", "color": f"C{i}"}))
    title = f"Recorded: {rec.label}"
    return _lines(ax, lines, "matrix size n (n × n @ n × n)", "achieved TFLOP/s", title)


def recorded_repeat_sweep(recording: RecordedSweeps | None = None, *, ax: Any = None) -> Any:
    """Recorded time per call against the repeat count: eager and fused, fp32 and bf16 (chapter 02)."""
    rec = recording if recording is not None else recorded_sweeps()
    lines = []
    for colour, mode in (("C0", "eager"), ("C1", "fused")):
        for style, precision in (("-", "fp32"), ("--", "bf16")):
            if line := rec.repeat_line(precision, mode):
                r, s = zip(*line, strict=True)
                style = {"marker": "o", "ls": style, "color": colour}
                lines.append((f"{mode}, {precision}", r, [t * 1e3 for t in s], style))
    per_call = f"time per call of {_fmt.elements(RECORDED_REPEAT_ELEMENTS)} elements (ms)"
    title = f"Recorded: {rec.label}"
    return _lines(ax, lines, "repeat count (x = x * 2, repeated)", per_call, title)


# ------------------------------------------------------------------ chapter 04

# The decision procedure, row by row from the top: (y, colour, box width, {box centre x: text}),
# in axes units; chapter 04 spells each step out. Every box points to every box of the row below.
_FLOW = (
    (0.92, "#dbe9f6", 0.34, {0.5: "1 · Measure\nbl.benchmark"}),
    (0.76, "#dbe9f6", 0.34, {0.5: "2 · Count\nbl.count"}),
    (0.58, "#fff2cc", 0.56, {0.5: "3 · Compare with the ceilings\nbl.measure_ceilings"}),
    (0.4, "#f8d7d3", 0.28, {0.17: "compute-bound?", 0.5: "memory-bound?", 0.83: "overhead-bound?"}),
    (0.23, "#fff2cc", 0.56, {0.5: "4 · Scale the batch\n5 · Read the trace"}),
    (
        0.05,
        "#d9ead3",
        0.45,
        {
            0.23: "6 · time follows the work, device busy:\nact on compute or memory",
            0.77: "6 · time flat, device idle:\nact on overhead",
        },
    ),
)


def decision_flow(*, ax: Any = None) -> Any:
    """Draw chapter 04's decision procedure as boxes and arrows; returns the Axes."""
    ax = _new_axes(ax, (11, 6.2))
    for (y, colour, w, boxes), (y_below, *_, below) in itertools.pairwise((*_FLOW, (0, "", 0, {}))):
        for x, text in boxes.items():
            _box(ax, x, y, w, 0.11, colour, text)
            for x_below in below:
                _arrow(ax, (x, y - 0.06), (x_below, y_below + 0.06))
    y, _, w, acts = _FLOW[-1]
    for x, side in zip(acts, (-1, 1), strict=True):  # a remedy can change the regime
        back = {"ls": "--", "color": "0.55", "connectionstyle": f"arc3,rad={0.35 * side}"}
        _arrow(ax, (x + side * w / 2, y), (0.5 + side * 0.17, 0.92), **back)
    ax.set(xlim=(-0.04, 1.04), ylim=(-0.02, 1.0))
    ax.axis("off")
    return ax
