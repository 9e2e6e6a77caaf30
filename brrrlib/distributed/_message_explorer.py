"""A slider over message sizes, drawn against a measured sweep's alpha-beta model (chapter 05)."""

from __future__ import annotations

import math

from brrrlib import _checks, _fmt
from brrrlib.distributed._collective_results import CollectiveSweep
from brrrlib.distributed._comm_model import ring_factor
from brrrlib.widgets._explorer import _Explorer

__all__ = ["MessageSizeExplorer", "message_size_explorer"]

#: The slider's range, as powers of two of bytes: 4 B to 1 GiB.
_MIN_LOG2, _MAX_LOG2 = 2, 30


class MessageSizeExplorer(_Explorer):
    """The slider, a one-line readout and the plot; ``set(nbytes)`` does what the slider does."""

    _css_class = "brrr-message-explorer"
    _figsize = (8, 4)
    _measures = False

    def __init__(self, sweep: CollectiveSweep) -> None:
        import ipywidgets as W

        _checks.kind("sweep", sweep, CollectiveSweep, "bl.distributed.all_reduce_sweep()")
        self.sweep, self.fit = sweep, sweep.fit
        self._slider = W.IntSlider(
            value=_log2(sweep.sizes_bytes[len(sweep.sizes_bytes) // 2]),
            min=_MIN_LOG2,
            max=_MAX_LOG2,
            description="log2(bytes)",
            continuous_update=False,
        )
        self._build([self._slider])

    @property
    def nbytes(self) -> int:
        """The message size under the slider, in bytes (a power of two)."""
        return 2**self._slider.value

    current = nbytes  # what the ring marks

    def set(self, nbytes: int) -> None:
        """Show ``nbytes`` (rounded to a power of two within 4 B - 1 GiB): readout and plot."""
        self._move([(self._slider, _log2(_checks.number("nbytes", nbytes, positive=True)))])
        self._update()

    def _show(self, n: int) -> None:
        fit, sweep = self.fit, self.sweep
        t = fit.time_s(n)
        share = fit.alpha_s / t
        measured = dict(zip(sweep.sizes_bytes, sweep.median_s, strict=True)).get(n)
        cells = {
            "message": _fmt.binary_bytes(n),
            "model": _fmt.seconds(t),
            "alpha": f"{share:.0%}",
            "bytes": f"{1 - share:.0%}",
            "busbw": _fmt.si(ring_factor(sweep.world_size) * n / t, "B/s"),
            "fit busbw": _fmt.si(fit.bus_bytes_per_s, "B/s"),
            "measured": "-" if measured is None else _fmt.seconds(measured),
        }
        if not min(sweep.sizes_bytes) <= n <= max(sweep.sizes_bytes):
            cells["measured"] = "EXTRAPOLATED"  # the model, outside the sizes measured
        self._table(cells, "latency-bound" if share > 0.5 else "bandwidth-bound")

    def _draw(self, fig) -> None:
        self.sweep.plot_time(fig.add_subplot(), [2**k for k in range(_MIN_LOG2, _MAX_LOG2 + 1)])

    def _rings(self, n: int) -> list:
        return [(n, self.fit.time_s(n) * 1e6)]

    def _marks(self, fig) -> list:
        ax = fig.axes[0]
        return [*super()._marks(fig), (ax, ax.axvline(self.nbytes, color="black", lw=1))]


def _log2(nbytes: float) -> int:
    return max(_MIN_LOG2, min(_MAX_LOG2, round(math.log2(nbytes))))


#: A message-size slider over a sweep's alpha-beta model: where does latency stop mattering?
message_size_explorer = MessageSizeExplorer
