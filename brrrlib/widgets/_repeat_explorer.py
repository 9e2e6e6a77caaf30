"""The repeat-count explorer of chapter 02: eager against fused, against the roofline."""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from brrrlib import _checks, _fmt, machine, roofline, sweeps
from brrrlib.ceilings import measure_ceilings
from brrrlib.sweeps import Case, Point, Sweep
from brrrlib.widgets import _experiments
from brrrlib.widgets._experiments import MODES, predicted_knee_repeat, repeat_model_s
from brrrlib.widgets._explorer import COLOURS, _Explorer, offered, slider

__all__ = ["RepeatExplorer", "repeat_explorer"]

# Repeat counts the slider offers: powers of two and the halfway points
# (1, 2, 3, 4, 6, 8, 12, ...), even steps on a log axis.
_REPEATS = tuple(sorted({m * 2**k for k in range(11) for m in (2, 3)} | {1}))


class RepeatExplorer(_Explorer):
    """The repeat-count experiment of chapter 02, as a slider and a live plot."""

    _css_class = "brrr-repeat-explorer"
    _name = "repeat explorer"

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
        size = _checks.positive_int("size", size) if size is not None else None
        repeat = _checks.positive_int("repeat", repeat)
        offered("mode", mode, MODES)
        self.ceilings = ceilings if ceilings is not None else measure_ceilings(self.device)
        self._setup = setup or (lambda **kw: _experiments.repeat_case(**kw))
        self.sweeps: dict[int, Sweep] = {}
        self._version = 0
        self.size_options, default_size = self._size_menu(size)
        self.repeat_options = self._repeat_menu(max_repeat)
        offered("repeat", repeat, self.repeat_options)
        self._repeat_w = slider("repeat", self.repeat_options, repeat)
        llc = machine.last_level_cache_bytes(self.device)
        sizes = [(_size_label(s, llc), s) for s in self.size_options]
        self._size_w = W.Dropdown(options=sizes, value=size or default_size, description="size")
        self._mode_w = W.ToggleButtons(
            options=list(MODES),
            value=mode,
            description="mode",
            style={"button_width": "70px", "description_width": "initial"},
        )
        self._build([self._repeat_w, self._size_w, self._mode_w])

    def _size_menu(self, size: int | None) -> tuple[tuple[int, ...], int]:
        """Sizes around the default (smaller ones show the cache), all fitting in memory."""
        n = _experiments.repeat_size(self.device, self.ceilings)
        free = machine.available_memory_bytes(self.device)
        sizes = [s for s in (n // 64, n // 16, n // 4, n // 2, n, 2 * n, 4 * n) if s >= 2**10]
        room = sweeps.MEMORY_HEADROOM * free
        fitting = [s for s in sizes if _experiments.repeat_bytes_needed(s, "eager") <= room]
        fitting = fitting or sizes[:1]
        menu = tuple(sorted({*fitting, *([size] if size is not None else [])}))
        return menu, (n if n in fitting else fitting[-1])

    def _repeat_menu(self, max_repeat: int | None) -> tuple[int, ...]:
        """Repeat counts up to ``max_repeat`` (default: the power of two >= 6 x the knee)."""
        if max_repeat is None:
            knee = predicted_knee_repeat(self.ceilings)
            max_repeat = min(1024, max(16, 2 ** math.ceil(math.log2(max(6 * knee, 1)))))
        max_repeat = _checks.positive_int("max_repeat", max_repeat)
        return tuple(sorted({*(r for r in _REPEATS if r <= max_repeat), max_repeat}))

    # -- state ----------------------------------------------------------------------
    @property
    def repeat(self) -> int:
        """The repeat count under the slider."""
        return self._repeat_w.value

    @property
    def size(self) -> int:
        """The tensor size (elements) under the menu."""
        return self._size_w.value

    @property
    def mode(self) -> str:
        """``"eager"`` or ``"fused"``."""
        return self._mode_w.value

    @property
    def points(self) -> tuple[Point, ...]:
        """Every measured point, by size, mode and repeat."""
        pts = [(s, p) for s, res in self.sweeps.items() for p in res.points if p.measured]
        return tuple(p for _s, p in sorted(pts, key=lambda sp: (sp[0], sp[1].line, sp[1].x)))

    @property
    def current(self) -> Point | None:
        """The measured point under the controls, or None (not measured, refused or failed)."""
        res = self.sweeps.get(self.size)
        p = res.point(self.repeat, self.mode) if res is not None else None
        return p if p is not None and p.measured else None

    @property
    def predicted_knee_repeat(self) -> float:
        """``vector_flops_per_s x 8 / mem_bandwidth_bytes_per_s``: see the class docstring."""
        return predicted_knee_repeat(self.ceilings)

    def set(
        self,
        *,
        repeat: int | None = None,
        size: int | None = None,
        mode: str | None = None,
        force: bool = False,
    ) -> Point | None:
        """Move the controls from code (as the learner would) and measure if needed."""
        for name, value, options in (
            ("repeat", repeat, self.repeat_options),
            ("size", size, self.size_options),
            ("mode", mode, MODES),
        ):
            if value is not None:
                offered(name, value, options)
        self._move([(self._repeat_w, repeat), (self._size_w, size), (self._mode_w, mode)])
        return self._update(force=force)

    def remeasure(self) -> Point | None:
        """Forget the point under the controls (and its pairing) and measure it again."""
        if self.size in self.sweeps:
            self.sweeps[self.size] = self.sweeps[self.size].without([(self.repeat, self.mode)])
            self._version += 1
        return self._update()

    # -- measuring ------------------------------------------------------------------
    def _update(self, force: bool = False) -> Point | None:
        size, repeat, mode = self.size, self.repeat, self.mode
        if self.current is None:
            self._say(self._busy_message(), busy=True)
            res = self._safely(f"repeat {repeat} · {mode}", lambda: self._measure(force))
            if res is not None:
                self.sweeps[size] = res
                self._version += 1
        point = self.current
        res = self.sweeps.get(size)
        missing = res.point(repeat, mode) if res is not None else None
        if point is not None:
            self._clear_error()
            self._say(self._describe(point))
        elif missing is not None and missing.status == sweeps.NO_MEMORY:
            self._fail(
                f"repeat {repeat} · {mode} · {_fmt.elements(size)} elements: {missing.reason}"
            )
        elif missing is not None:
            self._clear_error()
            self._say(
                self._words(f"<b>repeat {repeat} · {mode} · not measured</b>", [missing.reason])
            )
        self._redraw()
        return point

    def _measure(self, force: bool) -> Sweep:
        size, repeat, mode, c = self.size, self.repeat, self.mode, self.ceilings
        res = self.sweeps.get(size)
        other = res.point(repeat, "fused" if mode == "eager" else "eager") if res else None
        pairs = (
            [((repeat, "fused"), (repeat, "eager"))] if other is not None and other.measured else []
        )
        return sweeps.sweep(
            "repeat",
            [repeat],
            [mode],
            lambda r, m: self._setup(size=size, repeat=r, mode=m, device=self.device),
            pairs=pairs,
            predict=lambda r, m: repeat_model_s(c, size, r, m),
            skip=None if force else _experiments.repeat_skip(c, size, _experiments.MAX_POINT_S),
            memory=lambda _r, m: _experiments.repeat_bytes_needed(size, m),
            device=self.device,
            into=res,
            x_label="repeat (multiplies per element)",
        )

    def _busy_message(self) -> str:
        head = f"repeat {self.repeat} · {self.mode} · "
        if self.mode == "fused":
            return head + (
                "compiling… then measuring (torch.compile builds one kernel for this repeat "
                "count; the first compile of a session takes ~20 s on a CPU, later ones a few s)"
            )
        call_s = repeat_model_s(self.ceilings, self.size, self.repeat, "eager")
        return (
            head + f"measuring… (about {_fmt.seconds(8 * call_s)}: {self.repeat} passes per call)"
        )

    # -- words ----------------------------------------------------------------------
    def _describe(self, p: Point) -> str:
        c, knee = self.ceilings, self.predicted_knee_repeat
        head = (
            f"<b>repeat {p.x} · {p.line} · {_fmt.seconds(p.median_s)} · "
            f"{_fmt.si(p.achieved_bytes_per_s, 'B/s')} · {_fmt.si(p.achieved_flops_per_s, 'FLOP/s')}</b>"
            + (
                f" · model {_fmt.seconds(p.predicted_s)} (measured ×{p.model_ratio:.2f} of it)"
                if p.model_ratio is not None
                else ""
            )
            + f" · {_fmt.elements(p.size)} elements ({_fmt.binary_bytes(4 * p.size)}) on "
            f"{html.escape(getattr(c, 'device_name', p.device))}"
        )
        knee_text = (
            f"Knee predicted at repeat ≈ {knee:.0f} = 8 B × {_fmt.si(c.vector_flops_per_s, 'FLOP/s')}"
            f" ÷ {_fmt.si(c.mem_bandwidth_bytes_per_s, 'B/s')} (vector FLOP/s × bytes per element ÷ "
            "bandwidth; the vector ceiling counts multiplies, the operation chained here)."
        )
        if p.line == "eager":
            kernels = "1 kernel" if p.x == 1 else f"{p.x} kernels"
            body = (
                f"Eager: {kernels}, each a full pass over memory "
                f"({p.intensity_flops_per_byte:.3g} FLOP/byte at any repeat), so the time "
                "grows with repeat: repeat × (8 B per element ÷ bandwidth + op overhead)."
            )
            if p.median_s / p.x < 3 * c.op_overhead_s:
                body += " One pass is close to one op's overhead here: pick a larger size."
        else:
            bound = (
                "memory-bound: the extra multiplies are free"
                if p.x < knee
                else "compute-bound: now each multiply costs time"
            )
            body = (
                f"Fused: one kernel, one pass, {p.intensity_flops_per_byte:.3g} FLOP/byte; the "
                f"model says this point is {bound}. Achieved "
                f"{_fmt.percent(p.achieved_bytes_per_s, c.mem_bandwidth_bytes_per_s)} of the "
                f"bandwidth ceiling, {_fmt.percent(p.achieved_flops_per_s, c.vector_flops_per_s)}"
                " of the vector ceiling."
            )
            body += _above_ceiling(p, c)
            if p.compile_s is not None:
                body += f" First call (compile) {_fmt.seconds(p.compile_s)}, not in the timing."
        lines = [body, self._pair_text(p), knee_text, p.reason]
        if p.waited:
            lines.append(f"Not this machine's best: {sweeps.waited_words(p)}.")
        elif p.timing.noisy:
            lines.append(
                "The timing is noisy (spread over 10% of the median): the machine is busy."
            )
        return self._words(head, lines)

    def _pair_text(self, p: Point) -> str:
        res, a, b = self.sweeps[self.size], (p.x, "fused"), (p.x, "eager")
        cmp = res.comparison(a, b)
        if cmp is None:
            other = "fused" if p.line == "eager" else "eager"
            return (
                f"Flip the mode to {other}: eager and fused at one repeat are then measured "
                "together, in alternating rounds, for their ratio."
            )
        return f"Eager against fused at repeat {p.x}, in alternating rounds: {res.says(a, b)}."

    # -- picture --------------------------------------------------------------------
    def _data_version(self) -> Any:
        return (self.size, self._version)

    def _view(self) -> Sweep:
        """The sweep at this size, with the model at every repeat on the slider."""
        res = self.sweeps.get(self.size) or Sweep("repeat", "repeat (multiplies per element)", ())
        model = [
            (r, m, repeat_model_s(self.ceilings, self.size, r, m))
            for r in self.repeat_options
            for m in MODES
        ]
        return replace(res, predicted=tuple(model))

    def _draw(self, fig) -> None:
        c, view, knee = self.ceilings, self._view(), self.predicted_knee_repeat
        ax_t, ax_f, ax_b, ax_r = fig.subplots(2, 2).ravel()
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.08, top=0.95, hspace=0.35, wspace=0.28)
        rs, n = self.repeat_options, self.size
        for mode in MODES:  # the model's rates, dashed: FLOPs and bytes of a call over its time
            t = [repeat_model_s(c, n, r, mode) for r in rs]
            style = {"color": COLOURS[mode], "linestyle": "--", "linewidth": 1.0, "alpha": 0.7}
            ax_f.plot(rs, [r * n / s for r, s in zip(rs, t, strict=True)], **style)
            moved = [8 * n * (r if mode == "eager" else 1) for r in rs]
            ax_b.plot(rs, [b / s for b, s in zip(moved, t, strict=True)], **style)
        for ax, y, title in (
            (ax_t, "time", f"runtime, {_fmt.elements(self.size)} elements"),
            (ax_f, "flops", "achieved FLOP/s"),
            (ax_b, "bytes", "achieved memory bandwidth"),
        ):
            view.plot(ax, y=y, colours=COLOURS, legend=ax is ax_t)
            ax.set_title(title, fontsize=10)
        grey = {"color": "grey", "fontsize": 8, "va": "top", "textcoords": "offset points"}
        for ax, ceiling, label in (
            (ax_f, c.vector_flops_per_s, "vector FLOP/s ceiling"),
            (ax_b, c.mem_bandwidth_bytes_per_s, "bandwidth ceiling"),
        ):
            ax.axhline(ceiling, color="grey", linewidth=1)
            ax.annotate(label, (rs[0], ceiling), xytext=(2, -2), **grey)
        for ax in (ax_t, ax_f, ax_b):
            ax.axvline(knee, color="tab:red", linestyle=":", linewidth=1)
        red = {"color": "tab:red", "fontsize": 8, "va": "bottom", "ha": "left"}
        ax_t.annotate(
            f" predicted knee ≈ {knee:.0f}", (knee, 0.02), xycoords=("data", "axes fraction"), **red
        )
        self._draw_roofline(ax_r, view)

    def _draw_roofline(self, ax_r, view) -> None:
        """The measured points of both modes on this machine's roofline."""
        pts = [p for p in view.points if p.measured and p.flops > 0]
        roofline.plot(
            self.ceilings,
            [("", p.intensity_flops_per_byte, p.achieved_flops_per_s) for p in pts],
            ax=ax_r,
        )
        for mode in MODES:
            mine = [
                (p.intensity_flops_per_byte, p.achieved_flops_per_s) for p in pts if p.line == mode
            ]
            if mine:
                xs, ys = zip(*mine, strict=True)
                ax_r.plot(xs, ys, "o", color=COLOURS[mode], label=mode, markersize=6, zorder=6)
        ax_r.legend(fontsize=6, loc="upper left", framealpha=0.6)
        ax_r.set_title("this point on the roofline", fontsize=10)

    def _rings(self, p: Point) -> list:
        rings = [(p.x, p.median_s), (p.x, p.achieved_flops_per_s), (p.x, p.achieved_bytes_per_s)]
        if p.flops > 0:  # and on the roofline
            rings.append((p.intensity_flops_per_byte, p.achieved_flops_per_s))
        return rings

    def _marks(self, fig) -> list:
        marks = super()._marks(fig)
        if len(marks) == 4:  # the roofline's ring, named
            ax_r, p = fig.axes[3], self.current
            xy = (p.intensity_flops_per_byte, p.achieved_flops_per_s)
            text = f"{p.line} ×{p.x}"
            marks.append(
                (
                    ax_r,
                    ax_r.annotate(text, xy, xytext=(8, 4), textcoords="offset points", fontsize=8),
                )
            )
        return marks


def _size_label(size: int, llc_bytes: int) -> str:
    """``4.19M (16.0 MiB)``, and whether both buffers of a pass fit in the last-level cache."""
    cache = ", fits in cache" if 8 * size <= llc_bytes else ""
    return f"{_fmt.elements(size)} ({_fmt.binary_bytes(4 * size)}{cache})"


def _above_ceiling(p: Point, c: Any) -> str:
    """Words for a share over 100%: the ceiling, not the point, is what was wrong."""
    over = [
        name
        for name, got, ceiling in (
            ("bandwidth", p.achieved_bytes_per_s, c.mem_bandwidth_bytes_per_s),
            ("vector", p.achieved_flops_per_s, c.vector_flops_per_s),
        )
        if got > ceiling
    ]
    if not over:
        return ""
    return (
        f" Over 100% of the {' and '.join(over)} ceiling: this kernel beat it (the ceiling is "
        "the fastest of a copy and of chains of 16 to 64 multiplies, measured at another moment)."
    )


def repeat_explorer(
    *,
    size: int | None = None,
    max_repeat: int | None = None,
    device: str | torch.device | None = None,
    repeat: int = 1,
    mode: str = "eager",
) -> RepeatExplorer:
    """The repeat-count slider of chapter 02: eager against fused, against the roofline."""
    return RepeatExplorer(size=size, max_repeat=max_repeat, device=device, repeat=repeat, mode=mode)
