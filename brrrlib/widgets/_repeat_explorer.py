"""The repeat-count explorer of chapter 02: eager against fused, against the roofline."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from brrrlib import _checks, _fmt, machine, roofline
from brrrlib.ceilings import measure_ceilings
from brrrlib.sweeps import Case, Point, Sweep
from brrrlib.widgets import _experiments as ex
from brrrlib.widgets._explorer import COLOURS, KNEE, _Explorer, control_value, note, up_to

__all__ = ["RepeatExplorer", "repeat_explorer"]

# Repeat counts the slider offers: powers of two and the halfway points
# (1, 2, 3, 4, 6, 8, 12, ...), even steps on a log axis.
_REPEATS = tuple(sorted({m * 2**k for k in range(11) for m in (2, 3)} | {1}))
#: The roofs the panels draw; the table's columns of the same names: each one's share.
VECTOR_ROOF, BANDWIDTH_ROOF = "vector roof", "bandwidth roof"


class RepeatExplorer(_Explorer):
    """The repeat-count slider of chapter 02: eager against fused, against the roofline."""

    _css_class = "brrr-repeat-explorer"
    _redraw_on = ("size",)

    def __init__(
        self,
        *,
        size: int | None = None,
        max_repeat: int | None = None,
        device: str | torch.device | None = None,
        repeat: int = 1,
        mode: str = "eager",
        ceilings: Any = None,
        setup: Callable[..., Case] | None = None,
    ) -> None:
        import ipywidgets as W

        self.device = machine.resolve(device)
        self.ceilings = ceilings if ceilings is not None else measure_ceilings(self.device)
        self._setup = setup or ex.repeat_case
        self.sweeps: dict[int, Sweep] = {}
        # sizes around the default (smaller ones show the cache), all fitting in memory
        n = ex.repeat_size(self.device, self.ceilings)
        room = machine.MEMORY_HEADROOM * machine.available_memory_bytes(self.device)
        sizes = [s for s in (n // 64, n // 16, n // 4, n // 2, n, 2 * n, 4 * n) if s >= 2**10]
        fitting = [s for s in sizes if ex.repeat_bytes_needed(s, "eager") <= room] or sizes[:1]
        size = _checks.positive_int("size", size) if size is not None else None
        self.size_options = tuple(sorted({*fitting, *([size] if size else [])}))
        if max_repeat is None:  # the power of two >= 6 x the knee
            knee = self.predicted_knee_repeat
            max_repeat = min(1024, max(16, 2 ** math.ceil(math.log2(max(6 * knee, 1)))))
        self.repeat_options = up_to("max_repeat", max_repeat, _REPEATS)
        llc = machine.last_level_cache_bytes(self.device)  # both buffers of a pass fit in it?
        cached = {s: ", fits in cache" * (8 * s <= llc) for s in self.size_options}
        labels = [
            (f"{_fmt.elements(s)} ({_fmt.binary_bytes(4 * s)}{cached[s]})", s) for s in cached
        ]
        start = size or (n if n in fitting else fitting[-1])
        style = {"button_width": "70px", "description_width": "initial"}
        self._build(
            [
                self._control("repeat", self.repeat_options, repeat),
                self._control("size", self.size_options, start, W.Dropdown, options=labels),
                self._control("mode", ex.MODES, mode, W.ToggleButtons, style=style),
            ]
        )

    # -- state ----------------------------------------------------------------------
    repeat = control_value("repeat")
    size = control_value("size")  # elements
    mode = control_value("mode")  # "eager" or "fused"

    @property
    def points(self) -> tuple[Point, ...]:
        """Every measured point, by size, mode and repeat."""
        pts = [p for s in sorted(self.sweeps) for p in self.sweeps[s].points if p.measured]
        return tuple(sorted(pts, key=lambda p: (p.size, p.line, p.x)))

    def _point(self) -> Point | None:
        res = self.sweeps.get(self.size)
        return res.point(self.repeat, self.mode) if res is not None else None

    @property
    def predicted_knee_repeat(self) -> float:
        """``vector_flops_per_s x 8 / mem_bandwidth_bytes_per_s``: where fused turns compute-bound."""
        return ex.predicted_knee_repeat(self.ceilings)

    def set(
        self,
        *,
        repeat: int | None = None,
        size: int | None = None,
        mode: str | None = None,
        force: bool = False,
    ) -> Point | None:
        """Move the controls from code (as the learner would) and measure if needed."""
        return self._set({"repeat": repeat, "size": size, "mode": mode}, force=force)

    # -- measuring ------------------------------------------------------------------
    def _forget(self) -> None:
        if self.size in self.sweeps:
            self.sweeps[self.size] = self.sweeps[self.size].without([(self.repeat, self.mode)])

    @property
    def _busy(self) -> str:
        if self.mode == "fused":  # the first compile of a session takes ~20 s on a CPU
            return "compiling, then measuring"
        call_s = ex.repeat_model_s(self.ceilings, self.size, self.repeat, "eager")
        return f"measuring (about {_fmt.seconds(8 * call_s)})"

    def _measure(self, force: bool = False) -> None:
        size, repeat, mode, c = self.size, self.repeat, self.mode, self.ceilings
        res = self.sweeps.get(size)
        other = res.point(repeat, "fused" if mode == "eager" else "eager") if res else None
        paired = other is not None and other.measured
        pairs = [((repeat, "fused"), (repeat, "eager"))] if paired else []
        kw = {"ceilings": c, "setup": self._setup, "pairs": pairs, "into": res, "progress": False}
        kw["max_point_s"] = math.inf if force else ex.MAX_POINT_S
        self.sweeps[size] = ex.repeat_sweep(size, [repeat], self.device, modes=[mode], **kw)

    def _show(self, p: Point) -> None:
        c, res = self.ceilings, self.sweeps[self.size]
        cells = {
            "repeat": str(p.x),
            "mode": p.line,
            "time": _fmt.seconds(p.median_s),
            "model": _fmt.seconds(p.predicted_s) if p.predicted_s else "-",
            "measured/model": _fmt.times(p.model_ratio) if p.model_ratio else "-",
            "B/s": _fmt.si(p.achieved_bytes_per_s, "B/s"),
            BANDWIDTH_ROOF: _fmt.percent(p.achieved_bytes_per_s, c.mem_bandwidth_bytes_per_s),
            "FLOP/s": _fmt.si(p.achieved_flops_per_s, "FLOP/s"),
            VECTOR_ROOF: _fmt.percent(p.achieved_flops_per_s, c.vector_flops_per_s),
            "FLOP/byte": f"{p.intensity_flops_per_byte:.3g}",
            "compile": _fmt.seconds(p.compile_s) if p.compile_s is not None else "-",
            "note": note(p),
        }
        pair = res.comparison((p.x, "fused"), (p.x, "eager"))
        self._table(cells, f"eager / fused: {pair.says()}" if pair else "")

    # -- picture --------------------------------------------------------------------
    def _draw(self, fig) -> None:
        c, knee, rs, n = self.ceilings, self.predicted_knee_repeat, self.repeat_options, self.size
        res = self.sweeps.get(n) or Sweep("repeat", ex.X_LABEL, ())
        model = [(r, m, ex.repeat_model_s(c, n, r, m)) for r in rs for m in ex.MODES]
        view = replace(res, predicted=tuple(model), title=f"{_fmt.elements(n)} elements")
        ax_t, ax_f, ax_b, ax_r = fig.subplots(2, 2).ravel()
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.08, top=0.95, hspace=0.35, wspace=0.28)
        for mode in ex.MODES:  # the model's rates, dashed: FLOPs and bytes of a call over its time
            style = {"color": COLOURS[mode], "linestyle": "--", "linewidth": 1.0, "alpha": 0.7}
            t = [ex.repeat_model_s(c, n, r, mode) for r in rs]
            ax_f.plot(rs, [r * n / s for r, s in zip(rs, t, strict=True)], **style)
            passes = [r if mode == "eager" else 1 for r in rs]
            ax_b.plot(rs, [8 * n * k / s for k, s in zip(passes, t, strict=True)], **style)
        grey = {"color": "grey", "fontsize": 8, "textcoords": "offset points"}
        for ax, y, roof in (
            (ax_t, "time", None),
            (ax_f, "flops", (VECTOR_ROOF, c.vector_flops_per_s)),
            (ax_b, "bytes", (BANDWIDTH_ROOF, c.mem_bandwidth_bytes_per_s)),
        ):
            ax.axvline(knee, color="tab:red", ls=":", lw=1, label=f"{KNEE}: {knee:.0f}")
            view.plot(ax, y=y, colours=COLOURS, legend=ax is ax_t)  # its title: the size
            if roof:
                ax.axhline(roof[1], color="grey", linewidth=1)
                ax.annotate(roof[0], (rs[0], roof[1]), xytext=(2, -2), va="top", **grey)
        pts = [p for p in view.points if p.measured and p.flops > 0]
        xy = [(p.line, p.intensity_flops_per_byte, p.achieved_flops_per_s) for p in pts]
        roofline.plot(c, xy, ax=ax_r, keyed=True, colours=COLOURS)
        ax_r.legend(fontsize=6, loc="upper left", framealpha=0.6)

    def _rings(self, p: Point) -> list:
        rings = [(p.x, p.median_s), (p.x, p.achieved_flops_per_s), (p.x, p.achieved_bytes_per_s)]
        return rings + [(p.intensity_flops_per_byte, p.achieved_flops_per_s)] * (p.flops > 0)


repeat_explorer = RepeatExplorer
