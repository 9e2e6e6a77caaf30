"""What the explorers share: controls, a readout (a table and one verdict line), the picture."""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence
from typing import Any

from brrrlib import _checks, _fmt, sweeps

__all__ = ["COLOURS", "COMPUTE_FLOOR", "KNEE", "MEMORY_FLOOR", "NOISY", "RING", "_Explorer"]
__all__ += ["control_value", "legend_below", "model_panels", "note", "peak", "up_to"]

COLOURS = {"eager": "tab:blue", "fused": "tab:orange", "batch": "tab:green"}
#: Names the explorers' tables and plots share.
KNEE, NOISY = "knee (model)", "noisy timing: re-measure"
MEMORY_FLOOR, COMPUTE_FLOOR = "memory floor", "compute floor"
#: How the current point is marked on every panel.
RING = dict(marker="o", markersize=14, markerfacecolor="none", markeredgecolor="black", mew=2)


def peak(ceilings: Any, precision: str) -> tuple[float, str]:
    """The matmul ceiling of ``precision`` and its precision; fp32's where it was not measured."""
    by_dtype = ceilings.matmul_flops_per_s_by_dtype
    return (by_dtype[precision], precision) if precision in by_dtype else (by_dtype["fp32"], "fp32")


def note(p: Any) -> str:
    """A sweep point's caveats: the sweep's reason, a wait for cores, a noisy timing ("-": none)."""
    noisy = NOISY if p.timing.noisy else ""
    return "; ".join(filter(None, (p.reason, sweeps.waited_words(p), noisy))) or "-"


def model_panels(
    fig, xs: Sequence, panels: list[dict], knee: float, marks: dict | None = None
) -> list:
    """Side by side over ``xs``: each panel's dashed ``{label: (ys, colour)}``; on all, the knee
    (where in range) and ``marks`` ``{label: (x, colour, style)}`` (x None: not drawn)."""
    axes = fig.subplots(1, len(panels))
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.27, top=0.9, wspace=0.3)
    marks = {KNEE: (knee if xs[0] <= knee <= xs[-1] else None, "black", ":"), **(marks or {})}
    for ax, lines in zip(axes, panels, strict=True):
        for label, (ys, colour) in lines.items():
            ax.plot(xs, ys, "--", color=colour, lw=1, alpha=0.7, label=label)
        for label, (x, colour, style) in marks.items():
            if x is not None:
                ax.axvline(x, color=colour, ls=style, lw=1, label=label)
    return list(axes)


def legend_below(fig, *axes) -> None:
    """One legend under the panels, for the labelled lines of ``axes`` (each label once)."""
    pairs = [ax.get_legend_handles_labels() for ax in axes]
    named = {t: h for hs, ts in pairs for h, t in zip(hs, ts, strict=True)}
    fig.legend(named.values(), named.keys(), fontsize=7, loc="lower center", ncols=3)


# Rasterising is the slow step of a redraw: tests that do not look at pixels replace these two.
def _render(canvas) -> None:
    canvas.draw()


def _png(canvas) -> bytes:
    """The canvas's pixels as PNG bytes (fast compression: the image is redrawn often)."""
    from PIL import Image

    size = canvas.get_width_height()
    image = Image.frombuffer("RGBA", size, canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def control_value(name: str) -> property:
    """A read-only property: the value of the control ``name`` (made by ``_control``)."""
    return property(lambda self: self._menus[name][0].value)


def up_to(name: str, top: Any, steps: Sequence[int] = ()) -> tuple[int, ...]:
    """A slider's options: ``steps`` (default: the powers of two) up to ``top``, and ``top``."""
    top = _checks.positive_int(name, top)
    steps = steps or [2**k for k in range(top.bit_length())]
    return tuple(sorted({*(s for s in steps if s <= top), top}))


class _Explorer:
    """The VBox of controls, readout and picture; a move measures what is missing, then draws."""

    # A subclass names its state: _point() (the sweep point under the controls, or None),
    # _measure(), _forget() (for re-measure), _show(point) (the readout), and the picture:
    # _draw(fig) and _rings(point), redrawn when the data or a control in _redraw_on changes.
    _css_class = ""
    _figsize = (10, 6.4)
    _measures = True  # with a re-measure button
    _busy = "measuring"
    _redraw_on: tuple[str, ...] = ()

    def _build(self, controls: list) -> None:
        import ipywidgets as W

        self._plot = W.Image(format="png", layout=W.Layout(width="auto", max_width="100%"))
        self._plot.add_class("brrr-plot")
        self._readout = W.HTML(value="")
        self._readout.add_class("brrr-readout")
        buttons = [W.Button(description="re-measure")] if self._measures else []
        for b in buttons:
            b.on_click(lambda _button: self.remeasure())
        row = W.HBox([*controls, *buttons], layout=W.Layout(flex_flow="row wrap"))
        self.widget = W.VBox([row, self._readout, self._plot])
        self.widget.add_class(self._css_class)
        self.error: str | None = None
        self.exception: BaseException | None = None  # the last failure, to re-raise or inspect
        #: Why a point does not fit (its controls' values -> the reason): not tried again.
        self.refused: dict[tuple, str] = {}
        self._version, self.readout = 0, ""
        self._base: tuple[Any, Any, Any] | None = None  # (data version, figure, saved pixels)
        self._suspended = False  # while _move sets the controls: one update after, not one each
        for w in controls:
            w.observe(lambda _change: None if self._suspended else self._update(), names="value")
        self._update()

    def _control(self, name: str, options: Sequence, value: Any, /, kind=None, **kw):
        """The control ``name`` over ``options``: by default a slider that measures when let go."""
        import ipywidgets as W

        _checks.one_of(name, value, options)
        if kind is None:
            kind = W.SelectionSlider
            kw = {"options": [(str(o), o) for o in options], "continuous_update": False, **kw}
        widget = kind(**{"options": options, "value": value, "description": name, **kw})
        self._menus = {**getattr(self, "_menus", {}), name: (widget, options)}
        return widget

    def _set(self, values: dict[str, Any], **kw: Any) -> Any:
        """Move the named controls from code (None: leave as is), then measure; the current point."""
        for name, value in values.items():
            if value is not None:
                _checks.one_of(name, value, self._menus[name][1])
        self._move([(self._menus[name][0], value) for name, value in values.items()])
        return self._update(**kw)

    def _move(self, changes: list) -> None:
        """Set ``(control, value)`` pairs from code, with one update afterwards, not one each."""
        self._suspended = True
        try:
            for w, value in changes:
                if value is not None:
                    w.value = value
        finally:
            self._suspended = False

    def remeasure(self) -> Any:
        """Forget the point under the controls (and its pairing) and measure it again."""
        self.refused.pop(self._key(), None)
        self._forget()
        return self._update()

    # -- the point under the controls ---------------------------------------------------
    def _key(self) -> tuple:
        return tuple(w.value for w, *_ in self._menus.values())

    def _where(self) -> str:
        """The controls in words: ``repeat 4 · size 4 Mi (16 MiB) · mode eager``."""
        return " · ".join(f"{name} {w.label}" for name, (w, *_) in self._menus.items())

    @property
    def current(self) -> Any:
        """The measured point under the controls, or None (not measured, refused or failed)."""
        p = self._point()
        return p if p is not None and p.measured else None

    def _missing(self) -> tuple[str, bool] | None:
        """Why there is no point: ``(reason, is_error)``; a point skipped as too slow is no error."""
        if self._key() in self.refused:
            return self.refused[self._key()], True
        p = self._point()
        return None if p is None or p.measured else (p.reason, p.status != sweeps.TOO_SLOW)

    def _needs_measuring(self) -> bool:
        return self.current is None and self._key() not in self.refused

    def _update(self, **kw: Any) -> Any:
        """Measure the point under the controls if needed (a failure is shown), show it, redraw."""
        failed = None
        if self._needs_measuring():
            self._say(f"{self._where()} · {self._busy}…", busy=True)
            try:
                self._measure(**kw)
            except MemoryError as exc:  # refused as too big, or out of memory: shown, kept
                self.refused[self._key()] = str(exc)
            except Exception as exc:  # noqa: BLE001 -- shown to the learner, the kernel stays alive
                self.exception, failed = exc, f"{type(exc).__name__}: {exc}"
            self._version += 1
        p = self.current
        if p is not None:
            self.error = None
            self._show(p)
        elif failed or (missing := self._missing()):
            reason, is_error = (failed, True) if failed else missing
            self.error = f"{self._where()}: {reason}" if is_error else None
            self._say(f"<b>{html.escape(self._where())}</b>: {html.escape(reason)}")
        self._readout.remove_class("brrr-error")
        if self.error:
            self._readout.add_class("brrr-error")
        self._redraw()
        return p

    # -- the readout ----------------------------------------------------------------
    def _say(self, text_html: str, *, busy: bool = False) -> None:
        (self._readout.add_class if busy else self._readout.remove_class)("brrr-busy")
        self._readout.value = text_html
        #: The readout as plain text (what a page without widgets shows).
        self.readout = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text_html)).split())

    def _table(self, cells: dict[str, str], verdict: str = "") -> None:
        """The readout: ``cells`` as a one-row table (header: their names), then ``verdict``."""
        header, row = list(cells), list(cells.values())
        line = f"<div><b>{html.escape(verdict)}</b></div>" if verdict else ""
        self._say(_fmt.html_table(header, [row]) + line)
        self.readout = _fmt.text_table(header, [row]) + (f"\n{verdict}" if verdict else "")

    # -- picture --------------------------------------------------------------------
    def _redraw(self) -> None:
        """The base again if the data changed, then the current point's marks over it."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        version = (self._version, *(self._menus[name][0].value for name in self._redraw_on))
        if self._base is None or self._base[0] != version:
            fig = Figure(figsize=self._figsize, dpi=72)
            canvas = FigureCanvasAgg(fig)
            self._draw(fig)
            _render(canvas)
            for ax in fig.axes:  # the marks drawn later must not move the limits under the pixels
                ax.set_autoscale_on(False)
            self._base = (version, fig, canvas.copy_from_bbox(fig.bbox))
        _version, fig, pixels = self._base
        fig.canvas.restore_region(pixels)
        for ax, artist in self._marks(fig):
            ax.draw_artist(artist)
            artist.remove()
        self._plot.value = _png(fig.canvas)

    def _marks(self, fig) -> list:
        """``(axes, artist)`` pairs drawn over the base: a ring at the current point per panel."""
        p = self.current
        rings = zip(fig.axes, self._rings(p) if p is not None else [], strict=False)
        return [(ax, ax.plot([x], [y], **RING)[0]) for ax, (x, y) in rings]

    def __repr__(self) -> str:
        return f"{self._css_class.removeprefix('brrr-')}: {self.readout}"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The live widget, with the current plot as a PNG and the readout as text beside it."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        if self._plot.value:
            bundle["image/png"] = base64.b64encode(bytes(self._plot.value)).decode()
        bundle["text/plain"] = repr(self)
        return bundle
