"""What both explorers of :mod:`brrrlib.widgets` share: the controls, the readout, the picture."""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "COLOURS",
    "RING",
    "_Explorer",
    "legend_below",
    "offered",
    "peak",
    "slider",
]

COLOURS = {"eager": "tab:blue", "fused": "tab:orange", "batch": "tab:green"}
#: How the current point is marked on every panel.
RING = {
    "marker": "o",
    "markersize": 14,
    "markerfacecolor": "none",
    "markeredgecolor": "black",
    "markeredgewidth": 2,
}


def slider(description: str, options: Sequence[Any], value: Any) -> Any:
    """A slider over ``options`` that moves (and measures) when let go, not while dragged."""
    import ipywidgets as W

    return W.SelectionSlider(
        options=[(str(o), o) for o in options],
        value=value,
        description=description,
        continuous_update=False,
    )


def offered(name: str, value: Any, options: Sequence[Any], note: str = "") -> None:
    """Refuse a ``value`` the control ``name`` does not offer, naming the ones it does."""
    if value not in options:
        raise ValueError(f"{name}={value!r} is not offered; use one of {tuple(options)}{note}")


def peak(ceilings: Any, precision: str) -> tuple[float, str]:
    """The matmul ceiling of ``precision``, or the fp32 one and a sentence saying so."""
    try:
        return ceilings.matmul_peak(precision), ""
    except KeyError:
        return ceilings.matmul_flops_per_s, (
            f"No {precision} matmul ceiling was measured here: the compute line uses the fp32 one."
        )


def legend_below(fig, *axes) -> None:
    """One legend under the panels, for the labelled lines of ``axes``."""
    pairs = [ax.get_legend_handles_labels() for ax in axes]
    handles = [h for hs, _ls in pairs for h in hs]
    labels = [label for _hs, ls in pairs for label in ls]
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncols=3)


def _render(canvas) -> None:
    """Rasterise the whole figure (the slow step: tests that do not look at pixels skip it)."""
    canvas.draw()


def _png(canvas) -> bytes:
    """The canvas's pixels as PNG bytes (fast compression: the image is redrawn often)."""
    from PIL import Image

    width, height = canvas.get_width_height()
    image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class _Explorer:
    """The VBox, the readout and the two-layer picture; subclasses add controls and words."""

    _css_class = ""
    _name = ""
    _figsize = (10, 6.4)
    _measures = True  # with a re-measure button

    def _build(self, controls: list) -> None:
        """The VBox around ``controls``; a move of one calls ``_update``, as does the first draw."""
        import ipywidgets as W

        self._plot = W.Image(format="png", layout=W.Layout(width="auto", max_width="100%"))
        self._plot.add_class("brrr-plot")
        self._readout = W.HTML(value="")
        self._readout.add_class("brrr-readout")
        buttons = []
        if self._measures:
            buttons.append(
                W.Button(
                    description="re-measure", tooltip="measure the point under the slider again"
                )
            )
            buttons[0].on_click(lambda _button: self.remeasure())
        row = W.HBox(
            [*controls, *buttons], layout=W.Layout(flex_flow="row wrap", align_items="center")
        )
        self.widget = W.VBox([row, self._readout, self._plot])
        self.widget.add_class(self._css_class)
        self.error: str | None = None
        self.exception: BaseException | None = None  # the last failure, to re-raise or inspect
        self._base: tuple[Any, Any, Any] | None = None  # (data version, figure, saved pixels)
        self._suspended = False  # while _move sets the controls: one update after, not one each
        for w in controls:
            w.observe(lambda _change: None if self._suspended else self._update(), names="value")
        self._update()

    def remeasure(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _update(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _move(self, changes: list) -> None:
        """Set ``(control, value)`` pairs from code, with one update afterwards, not one each."""
        self._suspended = True
        try:
            for w, value in changes:
                if value is not None:
                    w.value = value
        finally:
            self._suspended = False

    # -- readout states -------------------------------------------------------------
    def _say(self, text_html: str, *, busy: bool = False) -> None:
        if busy:
            self._readout.add_class("brrr-busy")
        else:
            self._readout.remove_class("brrr-busy")
        self._readout.value = text_html

    def _fail(self, message: str) -> None:
        self.error = message
        self._readout.add_class("brrr-error")
        self._say(f"<b>{html.escape(self._name)}</b>: {html.escape(message)}")

    @staticmethod
    def _words(head_html: str, lines: list[str]) -> str:
        """The readout: a bold head, then each non-empty line of ``lines`` small, escaped."""
        return head_html + "".join(f"<br><small>{html.escape(t)}</small>" for t in lines if t)

    def _clear_error(self) -> None:
        self.error = None
        self._readout.remove_class("brrr-error")

    def _safely(self, what: str, call: Callable[[], Any]) -> Any:
        """Run one measurement; if it raises, say so in the readout and return None."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 -- shown to the learner, the kernel stays alive
            self.exception = exc
            self._fail(f"{what} failed: {exc.__class__.__name__}: {exc}")
            return None

    # -- picture --------------------------------------------------------------------
    def _redraw(self) -> None:
        """The base again if the data changed, then the current point's marks over it."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        version = self._data_version()
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
        if p is None:
            return []
        rings = zip(fig.axes, self._rings(p), strict=False)  # panels past the rings: none
        return [(ax, ax.plot([x], [y], **RING)[0]) for ax, (x, y) in rings]

    def _data_version(self) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def _draw(self, fig) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _rings(self, point: Any) -> list:  # pragma: no cover - overridden
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The live widget, with the current plot as a PNG and the readout as text beside it."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs) or {})
        if self._plot.value:
            bundle["image/png"] = base64.b64encode(bytes(self._plot.value)).decode()
        words = re.sub(r"<[^>]+>", " ", self._readout.value or "")
        bundle["text/plain"] = f"{self._name}: " + " ".join(html.unescape(words).split())
        return bundle
