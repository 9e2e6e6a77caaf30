"""The repeat-count explorer of chapter 02: eager vs fused, against the roofline.

:func:`repeat_explorer` and its :class:`RepeatExplorer`; each point comes
from :func:`brrrlib.widgets.measure_repeat`. Re-exported by
:mod:`brrrlib.widgets`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

import torch

from brrrlib import _explorer, devices, roofline
from brrrlib._explorer import (
    _COLOURS,
    _PREDICTED_STYLE,
    _eng_log_axis,
    _Explorer,
    _fmt_bytes,
    _fmt_elements,
    _last_level_cache_bytes,
)
from brrrlib._fmt import seconds as _fmt_s
from brrrlib._points import (
    _MODES,
    RepeatPoint,
    _positive_int,
    measure_repeat,
    predicted_knee_repeat,
)
from brrrlib.ceilings import measure_ceilings
from brrrlib.counting import _si as _fmt

__all__ = ["MAX_MEASURE_S", "RepeatExplorer", "repeat_explorer"]

# An eager point predicted to take longer than this to measure (seconds) is
# skipped with a note unless forced: its time is repeat x one pass anyway.
MAX_MEASURE_S = 10.0

# Repeat counts the slider offers: powers of two and the halfway points
# (1, 2, 3, 4, 6, 8, 12, ...), even steps on a log axis.
_REPEATS = tuple(sorted({m * 2**k for k in range(11) for m in (2, 3)} | {1}))


def _repeat_bytes_needed(size: int, mode: str) -> int:
    """Peak memory of one call: input, output and (eager) one intermediate."""
    live = 3 if mode == "eager" else 2
    return live * 4 * size


def _repeat_sizes(device: torch.device, ceilings: Any) -> tuple[tuple[int, ...], int]:
    """Tensor sizes (elements) the size menu offers, and the default one.

    The default is the smallest power of two whose float32 tensor is at
    least twice the last-level cache (so every pass goes to memory, not to
    cache) and whose single pass lasts at least 20 times the cost of
    launching an op (so the op's fixed overhead does not hide the memory
    time). The menu adds smaller sizes (the cache effect) and larger ones,
    up to what fits in memory.
    """
    cache = _last_level_cache_bytes(device)
    n = 2**16
    while (
        4 * n < 2 * cache
        or 8 * n / ceilings.mem_bandwidth_bytes_per_s < 20 * ceilings.op_overhead_s
    ):
        n *= 2
    # Read on _explorer at call time, so a test can replace them there.
    available = _explorer._available_memory_bytes(device)
    sizes = [s for s in (n // 64, n // 16, n // 4, n // 2, n, 2 * n, 4 * n) if s >= 2**10]
    fitting = [
        s
        for s in sizes
        if _repeat_bytes_needed(s, "eager") <= _explorer.MEMORY_HEADROOM * available
    ]
    fitting = fitting or sizes[:1]
    default = n if n in fitting else fitting[-1]
    return tuple(fitting), default


class RepeatExplorer(_Explorer):
    """The repeat-count experiment of chapter 02, as a slider and a live plot.

    Apply ``x = x * 2`` ``repeat`` times to a float32 tensor of ``size``
    elements. Eager runs one kernel per multiplication: ``repeat`` passes over
    memory, so the time grows with ``repeat`` from the start. Fused
    (``torch.compile`` of the same loop) runs one kernel: one pass, and
    ``repeat`` multiplications per element while the data is in registers.
    Its time stays flat (memory-bound: the arithmetic is free) until the
    knee predicted from this machine's measured ceilings::

        repeat* = vector_flops_per_s x 8 bytes / mem_bandwidth_bytes_per_s

    (8 bytes: one float32 read plus one written per element), after which it
    grows with ``repeat`` (compute-bound). The plot shows runtime, achieved
    FLOP/s and achieved GB/s against repeat (dashed: the roofline model's
    prediction from the ceilings; dots: measured), and the current point on
    the roofline. On a CPU the measured bandwidth of an out-of-place op is
    well below the copy bandwidth the ceilings report: each new output tensor
    is fresh memory from the OS and every first write to a page faults. That
    is what PyTorch costs there, so it is what the explorer shows. A second
    honest gap: ``x * 2`` is one FLOP per instruction, while the vector
    ceiling is measured with fused multiply-adds (two FLOPs each), so a chain
    of multiplications tops out near half of it. Both move the measured knee
    to the right of the prediction; the prediction is a model, the dots are
    this machine.

    Attributes:
        widget: the ``ipywidgets.VBox`` (CSS class ``brrr-repeat-explorer``).
        points: every measured :class:`RepeatPoint`, sorted.
        current: the point under the controls (``None`` if not measured).
        error: the message the readout shows, or ``None``.
        exception: the exception behind the last failed measurement, if any.
        ceilings: the :class:`brrrlib.Ceilings` the predictions use.

    ``measure`` replaces :func:`measure_repeat` (same keyword arguments
    ``size``, ``repeat``, ``mode``, ``device``): for tests, or to explore
    another workload with the same controls.
    """

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
        measure: Callable[..., RepeatPoint] | None = None,
    ) -> None:
        import ipywidgets as W

        self.device = devices.resolve(device)
        if size is not None:
            size = _positive_int("size", size)
        if max_repeat is not None:
            max_repeat = _positive_int("max_repeat", max_repeat)
        repeat = _positive_int("repeat", repeat)
        if mode not in _MODES:
            raise ValueError(f"mode must be 'eager' or 'fused', got {mode!r}")
        self.ceilings = (
            ceilings if ceilings is not None else measure_ceilings(self.device, progress=False)
        )
        self._measure = measure if measure is not None else measure_repeat
        self._cache: dict[tuple[int, int, str, str], RepeatPoint] = {}

        sizes, default_size = _repeat_sizes(self.device, self.ceilings)
        if size is not None and size not in sizes:
            sizes = tuple(sorted({*sizes, size}))
        self.size_options = sizes
        if max_repeat is None:
            knee = predicted_knee_repeat(self.ceilings)
            max_repeat = min(1024, max(16, 2 ** math.ceil(math.log2(max(3 * knee, 1)))))
        self.repeat_options = tuple(r for r in _REPEATS if r <= max_repeat) + (
            (max_repeat,) if max_repeat not in _REPEATS else ()
        )
        self.repeat_options = tuple(sorted(set(self.repeat_options)))
        if repeat not in self.repeat_options:
            raise ValueError(
                f"repeat={repeat} is not on the slider; use one of {self.repeat_options}"
            )

        llc = _last_level_cache_bytes(self.device)
        self._repeat_w = W.SelectionSlider(
            options=[(str(r), r) for r in self.repeat_options],
            value=repeat,
            description="repeat",
            continuous_update=False,
        )
        self._size_w = W.Dropdown(
            options=[
                (
                    f"{_fmt_elements(s)} ({_fmt_bytes(4 * s)}"
                    f"{', fits in cache' if 8 * s <= llc else ''})",
                    s,
                )
                for s in sizes
            ],
            value=size if size is not None else default_size,
            description="size",
        )
        self._mode_w = W.ToggleButtons(
            options=list(_MODES),
            value=mode,
            description="mode",
            style={"button_width": "70px", "description_width": "initial"},
            layout=W.Layout(display="flex", flex_flow="row", align_items="center"),
        )
        self._build([self._repeat_w, self._size_w, self._mode_w])
        self._suspended = False
        for w in (self._repeat_w, self._size_w, self._mode_w):
            w.observe(self._on_change, names="value")
        self._update()

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
    def points(self) -> tuple[RepeatPoint, ...]:
        """Every measured point, sorted by size, mode and repeat."""
        return tuple(sorted(self._cache.values(), key=lambda p: (p.size, p.mode, p.repeat)))

    @property
    def current(self) -> RepeatPoint | None:
        """The measured point under the controls, or None (refused or failed)."""
        return self._cache.get(self._key())

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
    ) -> RepeatPoint | None:
        """Move the controls from code (as the learner would) and measure if needed.

        Returns the point now under the controls, or None when the request was
        refused or failed (then ``error`` says why, as the readout does).
        An eager point predicted to take more than ``MAX_MEASURE_S`` to
        measure is skipped with a note (its time is ``repeat`` x one pass,
        which the dashed line shows); ``force=True`` measures it anyway.
        """
        if repeat is not None and repeat not in self.repeat_options:
            raise ValueError(
                f"repeat={repeat!r} is not on the slider; use one of {self.repeat_options}"
            )
        if size is not None and size not in self.size_options:
            raise ValueError(
                f"size={size!r} is not in the size menu; use one of {self.size_options}"
            )
        if mode is not None and mode not in _MODES:
            raise ValueError(f"mode must be 'eager' or 'fused', got {mode!r}")
        self._suspended = True
        try:
            if repeat is not None:
                self._repeat_w.value = repeat
            if size is not None:
                self._size_w.value = size
            if mode is not None:
                self._mode_w.value = mode
        finally:
            self._suspended = False
        return self._update(force=force)

    def remeasure(self) -> RepeatPoint | None:
        """Forget the point under the controls and measure it again (a busy machine)."""
        self._cache.pop(self._key(), None)
        return self._update()

    # -- measuring ------------------------------------------------------------------
    def _key(self) -> tuple[int, int, str, str]:
        return (self.size, self.repeat, self.mode, str(self.device))

    def _on_change(self, _change: dict) -> None:
        if not self._suspended:
            self._update()

    def _update(self, force: bool = False) -> RepeatPoint | None:
        key = self._key()
        point = self._cache.get(key)
        if point is None:
            size, repeat, mode = self.size, self.repeat, self.mode
            what = f"repeat {repeat} · {mode} · {_fmt_elements(size)} elements"
            if not self._fits(self.device, _repeat_bytes_needed(size, mode), what):
                self._redraw()
                return None
            call_s = self._expected_call_s(size, repeat, mode)
            if mode == "eager" and 7 * call_s > MAX_MEASURE_S and not force:
                self._clear_error()
                self._say(
                    f"<b>repeat {repeat} · eager · not measured</b><br><small>"
                    f"{html.escape(self._skip_note(repeat, call_s))}</small>"
                )
                self._redraw()
                return None
            self._say(self._busy_message(call_s), busy=True)
            point = self._measure_safely(
                self.device,
                what,
                lambda: self._measure(size=size, repeat=repeat, mode=mode, device=self.device),
            )
            if point is None:
                self._redraw()
                return None
            self._cache[key] = point
        self._clear_error()
        self._say(self._describe(point))
        self._redraw()
        return point

    def _predicted_s(self, size: int, repeat: int, mode: str) -> float:
        """The roofline model's time for one call (plus op overhead per kernel)."""
        c = self.ceilings
        peak, bw = c.vector_flops_per_s, c.mem_bandwidth_bytes_per_s
        if mode == "eager":
            one_pass = roofline.lower_bound_s(size, 8 * size, peak, bw) + c.op_overhead_s
            return repeat * one_pass
        return roofline.lower_bound_s(repeat * size, 8 * size, peak, bw) + c.op_overhead_s

    def _expected_call_s(self, size: int, repeat: int, mode: str) -> float:
        """One call's time: the model, or (eager) the per-pass time measured here."""
        call_s = self._predicted_s(size, repeat, mode)
        same = [p for p in self._cache.values() if p.size == size and p.mode == "eager"]
        if mode == "eager" and same:  # what this machine really does per pass beats the model
            per_pass_s = min(p.median_s / p.repeat for p in same)
            call_s = max(call_s, per_pass_s * repeat)
        return call_s

    def _skip_note(self, repeat: int, call_s: float) -> str:
        return (
            f"Measuring it would take about {7 * call_s:.0f} s (bl.benchmark makes at least "
            f"7 calls, each {repeat} passes over memory, ≈ {_fmt_s(call_s)} per call), over the "
            f"{MAX_MEASURE_S:.0f} s this explorer allows one point. Eager time is repeat × one "
            "pass, as the dashed line shows; the lesson is in the fused curve. To measure it "
            f"anyway: .set(repeat={repeat}, mode='eager', force=True)."
        )

    def _busy_message(self, call_s: float) -> str:
        head = f"repeat {self.repeat} · {self.mode} · "
        if self.mode == "fused":
            return head + (
                "compiling… then measuring (torch.compile builds one kernel for this repeat "
                "count; the first compile of a session takes ~20 s on a CPU, later ones a few s)"
            )
        total_s = 7 * call_s  # bl.benchmark: first call, estimate, >= 5 samples
        tail = f" (about {total_s:.0f} s: {self.repeat} passes per call)" if total_s > 1.5 else ""
        return head + f"measuring…{tail}"

    # -- words ----------------------------------------------------------------------
    def _describe(self, p: RepeatPoint) -> str:
        c = self.ceilings
        head = (
            f"<b>repeat {p.repeat} · {p.mode} · {_fmt_s(p.median_s)} · "
            f"{_fmt(p.bytes_per_s, 'B/s')} · {_fmt(p.flops_per_s, 'FLOP/s')}</b>"
            f" · {_fmt_elements(p.size)} elements ({_fmt_bytes(4 * p.size)}) on "
            f"{html.escape(getattr(c, 'device_name', p.device))}"
        )
        knee = self.predicted_knee_repeat
        knee_text = (
            f"knee predicted at repeat ≈ {knee:.0f} = 8 B × {_fmt(c.vector_flops_per_s, 'FLOP/s')}"
            f" ÷ {_fmt(c.mem_bandwidth_bytes_per_s, 'B/s')} (vector FLOP/s × bytes per "
            "element ÷ bandwidth)"
        )
        if p.mode == "eager":
            fused = self._cache.get((p.size, p.repeat, "fused", p.device))
            than = (
                f"; fused measured {_fmt_s(fused.median_s)} "
                f"(×{p.median_s / fused.median_s:.1f} faster)"
                if fused
                else f"; fused, the model predicts {_fmt_s(self._predicted_s(p.size, p.repeat, 'fused'))}"
            )
            per_pass_s = p.median_s / p.repeat
            if per_pass_s < 3 * c.op_overhead_s:
                regime = (
                    f"overhead-bound: one pass ({_fmt_s(per_pass_s)}) is close to the cost of "
                    f"launching any op ({_fmt_s(c.op_overhead_s)}); pick a larger size"
                )
            else:
                regime = "memory-bound at every repeat"
            kernels = "1 kernel" if p.repeat == 1 else f"{p.repeat} kernels"
            body = (
                f"Eager: {kernels}, each a full pass over memory "
                f"({p.intensity_flops_per_byte:.3g} FLOP/byte at any repeat), so the time grows "
                f"with repeat: {regime}{than}. Fused: {knee_text}."
            )
        else:
            bound = (
                "memory-bound: the extra multiplications are free"
                if p.repeat < knee
                else ("compute-bound: now each multiplication costs time")
            )
            body = (
                f"Fused: one kernel, one pass, {p.intensity_flops_per_byte:.3g} FLOP/byte; "
                f"{knee_text}; the model says this point is {bound}. Achieved "
                f"{p.bytes_per_s / c.mem_bandwidth_bytes_per_s:.0%} of the bandwidth ceiling, "
                f"{p.flops_per_s / c.vector_flops_per_s:.0%} of vector peak."
            )
            if p.compile_s is not None:
                body += f" First call (compile) {_fmt_s(p.compile_s)}, not in the timing."
        notes = []
        if self.device.type == "cpu" and p.bytes_per_s < 0.5 * c.mem_bandwidth_bytes_per_s:
            notes.append(
                "On a CPU every call writes a freshly allocated output: new memory from the OS, "
                "and the first write to each page faults. So an out-of-place op moves "
                f"{_fmt(p.bytes_per_s, 'B/s')} here, against the "
                f"{_fmt(c.mem_bandwidth_bytes_per_s, 'B/s')} of a copy into memory that exists. "
                "These are honest PyTorch numbers; the knee moves right by the same factor."
            )
        if getattr(p.timing, "noisy", False):
            notes.append(
                "The timing is noisy (spread over 10% of the median): the machine is busy."
            )
        extra = "".join(f"<br><small>{html.escape(n)}</small>" for n in notes)
        return f"{head}<br><small>{html.escape(body)}</small>{extra}"

    # -- picture --------------------------------------------------------------------
    def _draw(self, fig) -> None:
        from matplotlib.ticker import FuncFormatter, NullLocator

        c = self.ceilings
        size = self.size
        ax_t, ax_f, ax_b, ax_r = fig.subplots(2, 2).ravel()
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.08, top=0.95, hspace=0.35, wspace=0.28)
        rs = self.repeat_options
        knee = self.predicted_knee_repeat
        measured = {m: [p for p in self.points if p.size == size and p.mode == m] for m in _MODES}
        for mode in _MODES:
            colour = _COLOURS[mode]
            pred_s = [self._predicted_s(size, r, mode) for r in rs]
            flops = [r * size for r in rs]
            moved = [(r if mode == "eager" else 1) * 8 * size for r in rs]
            ax_t.plot(rs, pred_s, color=colour, **_PREDICTED_STYLE, label=f"{mode}, predicted")
            ax_f.plot(
                rs,
                [f / t for f, t in zip(flops, pred_s, strict=True)],
                color=colour,
                **_PREDICTED_STYLE,
            )
            ax_b.plot(
                rs,
                [b / t for b, t in zip(moved, pred_s, strict=True)],
                color=colour,
                **_PREDICTED_STYLE,
            )
            pts = measured[mode]
            if pts:
                x = [p.repeat for p in pts]
                kw = {"color": colour, "marker": "o", "linestyle": "-", "linewidth": 1.2}
                ax_t.plot(x, [p.median_s for p in pts], label=f"{mode}, measured", **kw)
                ax_f.plot(x, [p.flops_per_s for p in pts], **kw)
                ax_b.plot(x, [p.bytes_per_s for p in pts], **kw)
        for ax, ceiling, label in (
            (ax_f, c.vector_flops_per_s, "vector FLOP/s ceiling"),
            (ax_b, c.mem_bandwidth_bytes_per_s, "memory bandwidth ceiling"),
        ):
            ax.axhline(ceiling, color="grey", linewidth=1)
            ax.annotate(
                label,
                (rs[0], ceiling),
                xytext=(2, -2),
                textcoords="offset points",  # just under the line, so the line never strikes it
                fontsize=8,
                va="top",
                color="grey",
            )
        cur = self.current
        for ax, value in ((ax_t, "median_s"), (ax_f, "flops_per_s"), (ax_b, "bytes_per_s")):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.set_yscale("log")
            ax.set_xlabel("repeat (multiplications per element)")
            ax.axvline(knee, color="tab:red", linestyle=":", linewidth=1)
            ax.grid(True, alpha=0.25)
            ax.xaxis.set_minor_locator(NullLocator())
            if cur is not None:
                ax.plot(
                    [cur.repeat],
                    [getattr(cur, value)],
                    marker="o",
                    markersize=14,
                    markerfacecolor="none",
                    markeredgecolor="black",
                    markeredgewidth=2,
                )
        for ax, unit in ((ax_t, "s"), (ax_f, "FLOP/s"), (ax_b, "B/s")):
            _eng_log_axis(ax.yaxis, unit)
        ax_t.set_ylabel("time per call")
        ax_t.set_title(
            f"runtime, {_fmt_elements(size)} elements ({_fmt_bytes(4 * size)})", fontsize=10
        )
        ax_t.annotate(
            f"predicted knee ≈ {knee:.0f} ",
            (knee, ax_t.get_ylim()[1]),
            color="tab:red",
            fontsize=8,
            va="top",
            ha="right",  # left of the line: the knee sits in the right half, text would be cut off
        )
        ax_t.legend(fontsize=7, loc="upper left")
        ax_f.set_ylabel("achieved FLOP/s")
        ax_f.set_title("achieved FLOP/s", fontsize=10)
        ax_b.set_ylabel("achieved bytes/s")
        ax_b.set_title("achieved memory bandwidth", fontsize=10)
        self._draw_roofline(ax_r, cur)

    def _draw_roofline(self, ax, cur: RepeatPoint | None) -> None:
        c = self.ceilings
        pts = [p for p in self.points if p.size == self.size]
        # The library draws the roofs (matmul and vector), sizes the axes to fit every
        # point and labels the current one; the rest go unlabelled so labels do not
        # pile up, and are coloured by mode on top.
        marks = [
            (
                f"{p.mode} ×{p.repeat}" if p is cur else "",
                p.intensity_flops_per_byte,
                p.flops_per_s,
            )
            for p in pts
        ]
        roofline.plot(c, marks, ax=ax)
        for mode in _MODES:
            mine = [p for p in pts if p.mode == mode]
            if mine:
                ax.plot(
                    [p.intensity_flops_per_byte for p in mine],
                    [p.flops_per_s for p in mine],
                    "o",
                    color=_COLOURS[mode],
                    label=mode,
                    markersize=6,
                    zorder=6,  # above the library's black dots
                )
        if cur is not None:
            ax.plot(
                [cur.intensity_flops_per_byte],
                [cur.flops_per_s],
                marker="o",
                markersize=14,
                markerfacecolor="none",
                markeredgecolor="black",
                markeredgewidth=2,
            )
        ax.legend(fontsize=6, loc="upper left", framealpha=0.6)  # empty above the slope
        ax.set_title("this point on the roofline", fontsize=10)


def repeat_explorer(
    *,
    size: int | None = None,
    max_repeat: int | None = None,
    device: str | torch.device | None = None,
    repeat: int = 1,
    mode: str = "eager",
) -> RepeatExplorer:
    """The repeat-count slider of chapter 02: eager vs fused, against the roofline.

    ``x = x * 2`` applied ``repeat`` times to ``size`` float32 elements (default:
    a power of two at least twice the last-level cache, so every pass goes to
    memory). Eager: ``repeat`` kernels, ``repeat`` passes over memory. Fused
    (``torch.compile``): one kernel, one pass, free arithmetic until

        repeat* = vector_flops_per_s x 8 bytes / mem_bandwidth_bytes_per_s

    from this machine's :func:`brrrlib.measure_ceilings` (8 bytes: one fp32
    read, one written, per element). The slider goes to ``max_repeat``
    (default: the power of two at least 3 x repeat*). It starts eager,
    because the first ``torch.compile`` of a session takes ~20 s on a CPU;
    flip to fused to compile (the readout says "compiling…"). Each point is
    measured once with :func:`brrrlib.benchmark` and kept. Returns a
    :class:`RepeatExplorer`; as the last expression of a cell it shows itself.
    """
    return RepeatExplorer(size=size, max_repeat=max_repeat, device=device, repeat=repeat, mode=mode)
