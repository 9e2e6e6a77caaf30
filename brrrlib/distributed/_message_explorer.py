"""A slider over message sizes, drawn against a measured sweep's alpha-beta model (chapter 05).

The explorer measures nothing: it reads a :class:`~brrrlib.distributed.CollectiveSweep`
already measured by :func:`brrrlib.distributed.all_reduce_sweep` and, for the
size under the slider, draws the model ``t = alpha + beta S`` with the
measured points and says in words which term dominates: latency (a fixed cost,
like a tiny op's overhead) or bandwidth (time grows with the bytes). Between
measured sizes it interpolates with the model; beyond them it says it is
extrapolating.
"""

from __future__ import annotations

import html
import io
import math
from typing import Any

from brrrlib import _fmt
from brrrlib.distributed._comm_model import ring_factor

__all__ = ["MessageSizeExplorer", "message_size_explorer"]

#: The slider's range, as powers of two of bytes: 4 B to 1 GiB.
_MIN_LOG2, _MAX_LOG2 = 2, 30


class MessageSizeExplorer:
    """The slider, a readout in words and the plot; ``set(nbytes)`` does what the slider does.

    ``nbytes`` is the size shown; ``readout`` the words under the slider
    (plain text, for tests and for reading in code).
    """

    def __init__(self, sweep: Any, nbytes: int | None = None) -> None:
        import ipywidgets as W

        if not hasattr(sweep, "fit") or not hasattr(sweep, "sizes_bytes"):
            raise TypeError(
                f"sweep must come from distributed.all_reduce_sweep(), got {type(sweep).__name__}"
            )
        self.sweep, self.fit = sweep, sweep.fit
        start = nbytes if nbytes is not None else sweep.sizes_bytes[len(sweep.sizes_bytes) // 2]
        self._slider = W.IntSlider(
            value=_log2(start),
            min=_MIN_LOG2,
            max=_MAX_LOG2,
            step=1,
            description="log2(bytes)",
            continuous_update=False,
        )
        self._readout = W.HTML()
        self._plot = W.Image(format="png", layout=W.Layout(width="auto", max_width="100%"))
        self._slider.observe(lambda change: self.set(2 ** change["new"]), names="value")
        self.widget = W.VBox([self._slider, self._readout, self._plot])
        self.nbytes, self.readout = 0, ""
        self.set(2 ** _log2(start))

    def set(self, nbytes: int) -> None:
        """Show ``nbytes`` (rounded to a power of two within 4 B - 1 GiB): readout and plot."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or not nbytes > 0:
            raise ValueError(f"nbytes must be a positive number of bytes, got {nbytes!r}")
        self.nbytes = 2 ** _log2(nbytes)
        if self._slider.value != _log2(self.nbytes):
            self._slider.value = _log2(self.nbytes)  # calls set() again through observe; same value
            return
        self.readout = self._words(self.nbytes)
        self._readout.value = f"<div>{html.escape(self.readout)}</div>"
        self._plot.value = self._png()

    def _words(self, n: int) -> str:
        fit, sweep = self.fit, self.sweep
        t = fit.time_s(n)
        latency = fit.alpha_s / t
        regime = "latency-bound" if latency > 0.5 else "bandwidth-bound"
        busbw = ring_factor(sweep.world_size) * n / t
        lo, hi = min(sweep.sizes_bytes), max(sweep.sizes_bytes)
        where = (
            "between the sizes measured"
            if lo <= n <= hi
            else "EXTRAPOLATED beyond the sizes measured"
        )
        near = min(
            range(len(sweep.sizes_bytes)), key=lambda i: abs(math.log(sweep.sizes_bytes[i] / n))
        )
        measured = ""
        if sweep.sizes_bytes[near] == n:
            measured = f" Measured at this size: {_fmt.seconds(sweep.median_s[near])} (median)."
        return (
            f"{_fmt.binary_bytes(n)}: the model says {_fmt.seconds(t)} = alpha {_fmt.seconds(fit.alpha_s)} "
            f"({latency:.0%}) + size x beta {_fmt.seconds(t - fit.alpha_s)} ({1 - latency:.0%}): "
            f"{regime}; bus bandwidth {_fmt.si(busbw, 'B/s')} of the {_fmt.si(fit.bus_bytes_per_s, 'B/s')} "
            f"a very large message approaches ({where}).{measured}"
        )

    def _png(self) -> bytes:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 4), dpi=72)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        sweep, fit = self.sweep, self.fit
        xs = [2.0**k for k in range(_MIN_LOG2, _MAX_LOG2 + 1)]
        ax.plot(xs, [fit.time_s(x) * 1e6 for x in xs], "-", label="model: alpha + beta x size")
        ax.plot(
            sweep.sizes_bytes, [t * 1e6 for t in sweep.median_s], "o", label="measured (median)"
        )
        ax.axhline(fit.alpha_s * 1e6, ls=":", color="gray", label="alpha")
        ax.axvline(self.nbytes, color="black", lw=1)
        ax.plot(
            [self.nbytes],
            [fit.time_s(self.nbytes) * 1e6],
            marker="o",
            ms=12,
            mfc="none",
            mec="black",
        )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="message size (bytes)",
            ylabel="time per all-reduce (µs)",
            title=f"All-reduce over {sweep.world_size} processes ({sweep.backend})",
        )
        ax.legend(fontsize=8, loc="upper left")
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict:
        """The live widget; its plot as a PNG and its readout as text for viewers without widgets."""
        from brrrlib.widgets._explorer import mimebundle

        return mimebundle(
            self.widget, self._plot.value, self._readout.value, "message size", **kwargs
        )

    def __repr__(self) -> str:
        return f"MessageSizeExplorer({self.readout})"


def _log2(nbytes: float) -> int:
    return max(_MIN_LOG2, min(_MAX_LOG2, round(math.log2(nbytes))))


def message_size_explorer(sweep: Any, nbytes: int | None = None) -> MessageSizeExplorer:
    """A message-size slider over ``sweep``'s alpha-beta model: where does latency stop mattering?

    ``sweep`` comes from :func:`brrrlib.distributed.all_reduce_sweep`;
    ``nbytes`` is where the slider starts (default: the middle size measured).
    """
    return MessageSizeExplorer(sweep, nbytes)
