"""Shared plumbing of the explorers in :mod:`brrrlib.widgets`: memory, readout, picture.

:class:`_Explorer` is what both explorers share: the ``ipywidgets.VBox``
with its controls, the one-line HTML readout and its states (busy, error),
a measurement that fails without killing the kernel, the memory check that
refuses a request before anything is allocated, and the plot drawn by
matplotlib's Agg renderer into PNG bytes. Each explorer's own module adds
its controls, its words and its picture.
"""

from __future__ import annotations

import gc
import html
import io
import math
import os
from collections.abc import Callable
from typing import Any

import torch

from brrrlib import devices

__all__ = [
    "MEMORY_HEADROOM",
    "_COLOURS",
    "_PREDICTED_STYLE",
    "_Explorer",
    "_available_memory_bytes",
    "_eng_log_axis",
    "_fmt_bytes",
    "_fmt_elements",
    "_last_level_cache_bytes",
]

# A request may use at most this fraction of the memory that is free right
# now: the rest is for Python, the plot and whatever else the kernel holds.
MEMORY_HEADROOM = 0.5

_PREDICTED_STYLE = {"linestyle": "--", "linewidth": 1.0, "alpha": 0.7}
_COLOURS = {"eager": "tab:blue", "fused": "tab:orange", "batch": "tab:green"}


# --------------------------------------------------------------------------- formatting


def _fmt_bytes(nbytes: float) -> str:
    """Binary units, as memory is sold: 67108864 -> '64 MiB'."""
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} B"


def _fmt_elements(n: int) -> str:
    for scale, unit in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n:,}"


# --------------------------------------------------------------------------- memory


def _available_memory_bytes(device: torch.device) -> int:
    """Bytes that can be allocated on `device` right now (an estimate).

    CUDA: ``torch.cuda.mem_get_info`` (free bytes as the driver sees them).
    MPS: the recommended working set minus what the driver holds. CPU:
    ``MemAvailable`` from /proc/meminfo (free plus reclaimable page cache),
    else free physical pages from ``os.sysconf``.
    """
    if device.type == "cuda":
        free_bytes, _total = torch.cuda.mem_get_info(device)
        return int(free_bytes)
    if device.type == "mps" and hasattr(torch.mps, "recommended_max_memory"):  # torch >= 2.5
        return int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    # CPU (and MPS on an older torch: unified memory, so the system's free memory)
    if os.path.isfile("/proc/meminfo"):  # Linux
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    page_bytes = os.sysconf("SC_PAGE_SIZE")
    if "SC_AVPHYS_PAGES" in os.sysconf_names:
        return int(os.sysconf("SC_AVPHYS_PAGES") * page_bytes)
    # macOS has no "available" figure without extra packages: assume half the RAM.
    return int(os.sysconf("SC_PHYS_PAGES") * page_bytes // 2)


def _is_out_of_memory(exc: BaseException) -> bool:
    """True for the errors torch raises when an allocation fails."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in text or "can't allocate memory" in text
    )


def _free_memory(device: torch.device) -> None:
    """Give back what a failed measurement left behind."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def _last_level_cache_bytes(device: torch.device) -> int:
    """Size of the largest cache in front of memory (L3 on a CPU, L2 on a GPU)."""
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 * 2**20))
    return devices.last_level_cache_bytes(device)


# --------------------------------------------------------------------------- widgets plumbing


def _eng_log_axis(axis, unit: str) -> None:
    """Log y ticks labelled '20 ms', '5 GB/s': at 1, 2, 5 x 10^k over a few decades."""
    from matplotlib.ticker import EngFormatter, LogLocator, NullFormatter

    low, high = axis.axes.get_ylim()
    decades = math.log10(high / low) if low > 0 and high > low else 10.0
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if decades <= 3 else (1.0,)))
    axis.set_major_formatter(EngFormatter(unit=unit))
    axis.set_minor_formatter(NullFormatter())


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


class _Explorer:
    """What both explorers share: the VBox, the plot Image, the HTML readout."""

    _css_class = ""
    _name = ""

    def _build(self, controls: list) -> None:
        import ipywidgets as W

        self._plot = W.Image(format="png", layout=W.Layout(width="auto", max_width="100%"))
        self._plot.add_class("brrr-plot")
        self._readout = W.HTML(value="")
        self._readout.add_class("brrr-readout")
        row = W.HBox(controls, layout=W.Layout(flex_flow="row wrap", align_items="center"))
        self.widget = W.VBox([row, self._readout, self._plot])
        self.widget.add_class(self._css_class)
        self.error: str | None = None
        self.exception: BaseException | None = None  # the last failure, to re-raise or inspect

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

    def _clear_error(self) -> None:
        self.error = None
        self._readout.remove_class("brrr-error")

    def _measure_safely(self, device: torch.device, what: str, call: Callable[[], Any]):
        """Run one measurement; on failure report it in the readout, return None."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 -- shown to the learner, kernel stays alive
            self.exception = exc
            if _is_out_of_memory(exc):
                _free_memory(device)
                self._fail(
                    f"{what} ran out of memory on {device.type} ({exc.__class__.__name__}); "
                    "memory was freed. Pick a smaller size."
                )
            else:
                self._fail(f"{what} failed: {exc.__class__.__name__}: {exc}")
            return None

    def _fits(self, device: torch.device, needed_bytes: int, what: str) -> bool:
        available = _available_memory_bytes(device)
        if needed_bytes > MEMORY_HEADROOM * available:
            self._fail(
                f"{what} needs about {_fmt_bytes(needed_bytes)}, but only "
                f"{_fmt_bytes(available)} is free on {device.type} (the explorer uses at most "
                f"{MEMORY_HEADROOM:.0%} of it). Nothing was allocated; pick a smaller size."
            )
            return False
        return True

    def _redraw(self) -> None:
        from matplotlib.figure import Figure

        # Fixed margins, not layout="constrained": that draws the figure twice (2x slower).
        fig = Figure(figsize=(10, 6.4), dpi=72)
        self._draw(fig)
        self._plot.value = _png(fig)

    def _draw(self, fig) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
