"""The two interactive explorers: repeat count (chapter 02) and batch size (chapter 03).

Each explorer is a slider, a plot and a one-line readout. Moving the slider
asks the library for one new measurement (:func:`brrrlib.benchmark` for the
time, :func:`brrrlib.count` for FLOPs and bytes) and redraws; nothing here
times anything itself, and nothing is measured twice: every result is kept in
a cache keyed by what was measured, so going back to a point is instant.

The plot is drawn with matplotlib's Agg renderer into PNG bytes that replace
the value of an ``ipywidgets.Image``, so the picture updates in place (no
flicker, no interactive backend needed). The readout is an ``ipywidgets.HTML``
that states the current numbers in words; it gets the CSS class ``brrr-busy``
while a measurement runs and ``brrr-error`` while it shows an error. A request
that would not fit in memory is refused with a message before anything is
allocated, and an out-of-memory error during a measurement is caught, memory
is freed and the error reported: the kernel stays alive.

Both explorers keep their state for you to read::

    ex = bl.widgets.repeat_explorer()
    ex                                  # the last expression in a cell shows it
    ex.set(repeat=32, mode="fused")     # what the slider does, from code
    ex.points                           # every measured point (frozen dataclasses)
"""

from __future__ import annotations

import functools
import gc
import html
import io
import math
import os
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from brrrlib import counting, devices, roofline, timing

__all__ = [
    "BatchExplorer",
    "BatchPoint",
    "RepeatExplorer",
    "RepeatPoint",
    "batch_explorer",
    "measure_batch",
    "measure_repeat",
    "predicted_knee_repeat",
    "repeat_explorer",
]

# A request may use at most this fraction of the memory that is free right
# now: the rest is for Python, the plot and whatever else the kernel holds.
MEMORY_HEADROOM = 0.5

# Time budget for one point, in seconds (bl.benchmark's budget_s/warmup_s).
# Small, so a slider move stays well under ~2 s when one call is short;
# bl.benchmark still takes at least 5 samples, so a call that lasts 0.5 s
# costs ~3.5 s to measure (the readout warns before such a measurement).
POINT_BUDGET_S = 0.15
POINT_WARMUP_S = 0.02
# Warm-up after a fresh torch.compile. Measured on a busy 2-core CPU: right
# after a compile the new kernel's calls often took ~12 ms instead of 15 µs
# (4096 elements; 0.02 s warm-up: 12 ms median, 1 s: 16 µs), the OpenMP
# threads of a new kernel settling (see pytorch/pytorch#93665). Not always
# enough on an overloaded machine: the Timing then says "noisy".
FUSED_WARMUP_S = 1.0

# An eager point predicted to take longer than this to measure (seconds) is
# skipped with a note unless forced: its time is repeat x one pass anyway.
MAX_MEASURE_S = 10.0

# Repeat counts the slider offers: powers of two and the halfway points
# (1, 2, 3, 4, 6, 8, 12, ...), even steps on a log axis.
_REPEATS = tuple(sorted({m * 2**k for k in range(11) for m in (2, 3)} | {1}))

# Doubling the batch and the time grows by less than this factor: the cost
# is (mostly) fixed per call, the overhead signature. More than _LINEAR: the
# cost grows with the work, compute- or bandwidth-bound.
_FLAT = 1.3
_LINEAR = 1.7
# Below this, twice the work took clearly less time: the machine was busy.
_NOISE = 0.8

_MODES = ("eager", "fused")

_PREDICTED_STYLE = {"linestyle": "--", "linewidth": 1.0, "alpha": 0.7}
_COLOURS = {"eager": "tab:blue", "fused": "tab:orange", "batch": "tab:green"}


# --------------------------------------------------------------------------- formatting


def _fmt(value: float, unit: str) -> str:
    """`value` with an SI prefix: _fmt(4.1e9, 'B/s') -> '4.1 GB/s'."""
    if not math.isfinite(value) or value == 0:
        return f"{value:g} {unit}"
    prefixes = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
    for scale, prefix in prefixes:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _fmt_s(seconds: float) -> str:
    """Seconds with the unit that keeps 3 digits: 1.23e-5 -> '12.3 µs'."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


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


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}")
    return value


def _last_level_cache_bytes(device: torch.device) -> int:
    """Size of the largest cache in front of memory (L3 on a CPU, L2 on a GPU)."""
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 * 2**20))
    largest = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    if os.path.isdir(base):
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue  # an index without a size file
            scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                largest = max(largest, int(digits) * scale)
    return largest or 32 * 2**20  # unknown: assume a large desktop L3


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


# =========================================================================== chapter 02


class _MeasuredPoint:
    """What both explorers' points derive from a Timing and their counts."""

    timing: Any  # brrrlib.Timing: every sample, median and spread
    flops: int
    bytes_moved: int

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        return self.timing.median_s

    @property
    def flops_per_s(self) -> float:
        """Achieved FLOP/s: counted FLOPs over the median time."""
        return self.flops / self.median_s

    @property
    def bytes_per_s(self) -> float:
        """Achieved memory bandwidth: counted bytes moved over the median time."""
        return self.bytes_moved / self.median_s


@dataclass(frozen=True)
class RepeatPoint(_MeasuredPoint):
    """One measured point of the repeat-count experiment (chapter 02).

    ``repeat`` multiplications ``x = x * 2`` applied to a float32 tensor of
    ``size`` elements, run ``mode="eager"`` (one kernel per multiplication,
    each a full pass over memory) or ``mode="fused"`` (``torch.compile`` of
    the same loop: one kernel, one pass, ``repeat`` multiplications per
    element). ``flops`` counts one FLOP per element per multiplication (the
    convention of :func:`brrrlib.count`); ``bytes_moved`` is what the
    kernels must read and write: ``repeat x 2 x 4 x size`` bytes eager,
    ``2 x 4 x size`` fused. ``compile_s`` is the first call of the fused
    version (compilation), kept apart from the timing.
    """

    size: int
    repeat: int
    mode: str
    device: str
    timing: Any  # brrrlib.Timing: every sample, median and spread
    flops: int
    bytes_moved: int
    compile_s: float | None = None

    @property
    def intensity_flops_per_byte(self) -> float:
        """Arithmetic intensity: FLOPs per byte moved (repeat/8 fused, 1/8 eager)."""
        return self.flops / self.bytes_moved

    def __repr__(self) -> str:
        return (
            f"RepeatPoint(repeat={self.repeat}, mode={self.mode!r}, size={self.size}, "
            f"device={self.device!r}, median={_fmt_s(self.median_s)}, "
            f"{_fmt(self.bytes_per_s, 'B/s')}, {_fmt(self.flops_per_s, 'FLOP/s')})"
        )


def _repeat_mul(repeat: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``x = x * 2``, ``repeat`` times: the essay's repeat-count experiment."""

    def repeat_mul(x: torch.Tensor) -> torch.Tensor:
        for _ in range(repeat):
            x = x * 2  # out of place: eager allocates and writes a new tensor each time
        return x

    return repeat_mul


@functools.cache
def _fused_repeat_mul(repeat: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``torch.compile`` of ``_repeat_mul(repeat)``: one kernel doing ``repeat`` muls.

    torch.compile caches compiled graphs per *code object* and, after a
    limit (8 by default), silently falls back to eager. Every repeat count
    is a different graph, so each one gets its own copy of the code object
    (``code.replace()``) and hence its own cache: 20 slider positions never
    hit the limit. (Multiplying by 2 is not folded into one multiply by
    2**repeat by the compiler: the measured time grows with repeat.)
    """
    base = _repeat_mul(repeat)
    fn = types.FunctionType(
        base.__code__.replace(), base.__globals__, f"repeat_mul_{repeat}", None, base.__closure__
    )
    return torch.compile(fn, dynamic=False)


@functools.cache
def _counted_per_element(repeat: int) -> tuple[float, float]:
    """FLOPs and bytes per element of the eager loop, counted by bl.count.

    Every op in the loop is pointwise, so its cost is exactly proportional
    to the number of elements: counting a 1024-element tensor and scaling is
    exact and avoids running the full-size loop once more just to count.
    """
    n = 1024
    counts = counting.count(_repeat_mul(repeat), torch.ones(n))
    return counts.flops / n, counts.bytes_moved / n


def _repeat_bytes_needed(size: int, mode: str) -> int:
    """Peak memory of one call: input, output and (eager) one intermediate."""
    live = 3 if mode == "eager" else 2
    return live * 4 * size


def measure_repeat(
    size: int,
    repeat: int,
    mode: str,
    device: str | torch.device | None = None,
    *,
    budget_s: float = POINT_BUDGET_S,
) -> RepeatPoint:
    """Measure ``repeat`` x ``x = x * 2`` on ``size`` float32 elements, eager or fused.

    This is what :func:`repeat_explorer` calls for each new slider position;
    call it yourself to measure a point from code. Time through
    :func:`brrrlib.benchmark` (warm-up, sync, repeats, median); FLOPs and
    eager bytes through :func:`brrrlib.count`. Fused bytes are the minimum
    one kernel must move: read the input once, write the output once
    (``bl.count`` counts each op's reads and writes, the unfused cost).
    The fused function's first call compiles it; its duration is kept in
    ``compile_s`` and is not part of the timing, and the fused kernel gets a
    longer warm-up (``FUSED_WARMUP_S``): right after a compile its first
    calls can be far slower than its steady state.
    """
    size = _positive_int("size", size)
    repeat = _positive_int("repeat", repeat)
    if mode not in _MODES:
        raise ValueError(f"mode must be 'eager' or 'fused', got {mode!r}")
    dev = devices.resolve(device)
    x = torch.randn(size, device=dev)
    flops_per_el, eager_bytes_per_el = _counted_per_element(repeat)
    compile_s = None
    if mode == "eager":
        fn = _repeat_mul(repeat)
        bytes_moved = round(eager_bytes_per_el * size)
    else:
        fn = _fused_repeat_mul(repeat)
        bytes_moved = 2 * x.element_size() * size
        compile_s = _first_call_s(fn, x, dev)
    label = f"{repeat} x (x * 2), {mode}, {size} elements"
    warmup_s = FUSED_WARMUP_S if mode == "fused" else POINT_WARMUP_S
    t = timing.benchmark(fn, x, budget_s=budget_s, warmup_s=warmup_s, device=dev, label=label)
    return RepeatPoint(
        size=size,
        repeat=repeat,
        mode=mode,
        device=str(dev),
        timing=t,
        flops=round(flops_per_el * size),
        bytes_moved=bytes_moved,
        compile_s=compile_s,
    )


def _first_call_s(fn: Callable, x: torch.Tensor, dev: torch.device) -> float:
    """Wall time of one call, synced: for a compiled function, the compile."""
    import time

    devices.sync(dev)
    start = time.perf_counter()
    fn(x)
    devices.sync(dev)
    return time.perf_counter() - start


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
    available = _available_memory_bytes(device)
    sizes = [s for s in (n // 64, n // 16, n // 4, n // 2, n, 2 * n, 4 * n) if s >= 2**10]
    fitting = [s for s in sizes if _repeat_bytes_needed(s, "eager") <= MEMORY_HEADROOM * available]
    fitting = fitting or sizes[:1]
    default = n if n in fitting else fitting[-1]
    return tuple(fitting), default


def predicted_knee_repeat(ceilings: Any, element_size: int = 4) -> float:
    """Repeat count where the fused loop turns from memory- to compute-bound.

    One fused call reads and writes each element once (``2 x element_size``
    bytes) and does ``repeat`` FLOPs on it. Its time by the roofline model is
    ``max(repeat x N / F, 2 x element_size x N / B)`` with F the vector
    (non-matmul) FLOP/s and B the memory bandwidth; the two are equal at::

        repeat* = F x (2 x element_size) / B

    Below repeat* the extra multiplications are free (waiting on memory);
    above it the time grows with repeat. Eager never gets there: each
    multiplication is its own pass, intensity 1/8 FLOP/byte at any repeat.
    """
    return ceilings.vector_flops_per_s * 2 * element_size / ceilings.mem_bandwidth_bytes_per_s


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
            ceilings
            if ceilings is not None
            else devices.measure_ceilings(self.device, progress=False)
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
        ax_f.axhline(c.vector_flops_per_s, color="grey", linewidth=1)
        ax_f.annotate(
            "vector FLOP/s ceiling",
            (rs[0], c.vector_flops_per_s),
            fontsize=8,
            va="bottom",
            color="grey",
        )
        ax_b.axhline(c.mem_bandwidth_bytes_per_s, color="grey", linewidth=1)
        ax_b.annotate(
            "memory bandwidth ceiling",
            (rs[0], c.mem_bandwidth_bytes_per_s),
            fontsize=8,
            va="bottom",
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
            f" predicted knee ≈ {knee:.0f}",
            (knee, ax_t.get_ylim()[1]),
            color="tab:red",
            fontsize=8,
            va="top",
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


# =========================================================================== chapter 03


@dataclass(frozen=True)
class BatchPoint(_MeasuredPoint):
    """One measured point of the batch-size experiment (chapter 03).

    One forward pass (no grad) of the model on ``batch`` samples: the timing
    from :func:`brrrlib.benchmark`, and from :func:`brrrlib.count` the FLOPs,
    the bytes moved (every op's reads and writes, weights included) and the
    number of ops. ``weight_bytes`` is the size of the parameters, which every
    call reads whatever the batch: at a small batch they can be most of the
    bytes, and then the call is bandwidth-bound on the weights.
    """

    batch: int
    device: str
    timing: Any  # brrrlib.Timing
    flops: int
    bytes_moved: int
    weight_bytes: int
    ops: int

    @property
    def per_sample_s(self) -> float:
        """Seconds per sample: the time per batch over the batch size."""
        return self.median_s / self.batch

    @property
    def weight_share(self) -> float:
        """Fraction of the bytes moved that are the weights."""
        return self.weight_bytes / self.bytes_moved if self.bytes_moved else 0.0

    def __repr__(self) -> str:
        return (
            f"BatchPoint(batch={self.batch}, device={self.device!r}, "
            f"median={_fmt_s(self.median_s)}, per_sample={_fmt_s(self.per_sample_s)}, "
            f"{_fmt(self.flops_per_s, 'FLOP/s')}, weights {self.weight_share:.0%} of bytes)"
        )


def _weight_bytes(model: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))


def _default_mlp(ceilings: Any, device: torch.device) -> nn.Module:
    """A 4-layer MLP (Linear, ReLU, ...) sized to this device.

    The width ``w`` puts the predicted knee near batch 32: one call costs
    about ``8 ops x op_overhead_s`` fixed, plus ``2 x 4 x w**2`` FLOPs per
    sample at the matmul peak; they are equal at batch
    ``op_overhead_s x matmul_flops_per_s / w**2``. Clamped to 128..4096 and
    rounded to a power of two. Built under a forked RNG with seed 0, so it is
    the same every time and the learner's random state is untouched.
    """
    w = math.sqrt(ceilings.op_overhead_s * ceilings.matmul_flops_per_s / 32)
    w = min(4096, max(128, 2 ** round(math.log2(max(w, 1)))))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers: list[nn.Module] = []
        for i in range(4):
            layers += [nn.Linear(w, w)] + ([nn.ReLU()] if i < 3 else [])
        model = nn.Sequential(*layers)
    return model.to(device).eval()


def _input_maker(model: nn.Module, make_input: Callable[[int], torch.Tensor] | None):
    if make_input is not None:
        if not callable(make_input):
            raise TypeError("make_input must be a function batch -> input tensor")
        return make_input
    first = next((m for m in model.modules() if isinstance(m, nn.Linear)), None)
    if first is None:
        raise ValueError(
            "model: could not find an nn.Linear to infer the input width; pass "
            "make_input=lambda batch: torch.randn(batch, ...) (on the model's device)"
        )
    p = first.weight

    def make(batch: int) -> torch.Tensor:
        return torch.randn(batch, first.in_features, device=p.device, dtype=p.dtype)

    return make


def measure_batch(
    model: nn.Module,
    batch: int,
    device: str | torch.device | None = None,
    *,
    make_input: Callable[[int], torch.Tensor] | None = None,
    budget_s: float = POINT_BUDGET_S,
) -> BatchPoint:
    """Measure one forward pass of ``model`` on ``batch`` samples (no grad).

    What :func:`batch_explorer` calls for each new slider position. The
    input comes from ``make_input(batch)`` (default: ``torch.randn(batch,
    in_features)`` of the first ``nn.Linear``). Time with
    :func:`brrrlib.benchmark`; FLOPs, bytes and op count with
    :func:`brrrlib.count` (one extra untimed call).
    """
    batch = _positive_int("batch", batch)
    dev = devices.resolve(device) if device is not None else _model_device(model)
    x = _input_maker(model, make_input)(batch)
    with torch.no_grad():  # grad mode is thread-local: benchmark's calls run without grad too
        counts = counting.count(model, x)
        t = timing.benchmark(
            model, x, budget_s=budget_s, warmup_s=POINT_WARMUP_S, device=dev, label=f"batch {batch}"
        )
    return BatchPoint(
        batch=batch,
        device=str(dev),
        timing=t,
        flops=int(counts.flops),
        bytes_moved=int(counts.bytes_moved),
        weight_bytes=_weight_bytes(model),
        ops=int(counts.ops),
    )


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return devices.device()


def _bytes_per_sample(model: nn.Module, x: torch.Tensor) -> int:
    """Upper bound on activation memory per sample: every leaf module's output, kept."""
    total = [x.numel() * x.element_size()]

    def hook(_module, _inputs, output) -> None:
        if isinstance(output, torch.Tensor):
            total[0] += output.numel() * output.element_size()

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return max(1, total[0] // max(1, x.shape[0]))


class BatchExplorer(_Explorer):
    """The batch-size experiment of chapter 03, as a slider and a live plot.

    Time one forward pass of a small model as the batch doubles. While a call
    is dominated by a fixed cost, doubling the batch adds only a little time
    (the "double the batch, +10% time" signature) and the time per sample
    halves: more samples per call are nearly free. Once the work per sample
    dominates, the time per batch doubles with the batch and the time per
    sample stops falling: the knee. The fixed cost is *overhead* (Python,
    dispatch, kernel launches: ``ops x op_overhead_s``) or, for a model with
    large weights, *bandwidth on the weights* (every call reads them all:
    ``weight_bytes / mem_bandwidth_bytes_per_s``). Both look flat on the
    plot; the readout tells them apart with :func:`brrrlib.count`'s bytes.

    The plot shows time per batch and time per sample against the batch (log
    axes), measured dots and the model's dashed lines: the overhead floor,
    the weight-reading time, the compute time (FLOPs / matmul peak) and the
    memory time (bytes / bandwidth). The predicted knee is where the
    per-sample work overtakes the larger fixed cost::

        batch* = max(ops x op_overhead_s, weight_bytes / B)
                 / max(flops_per_sample / F_matmul, activation_bytes_per_sample / B)

    Each move measures the new batch and, for the doubling ratio, half of it
    (if not measured yet); nothing is measured twice.

    Attributes: ``widget`` (VBox, CSS class ``brrr-batch-explorer``),
    ``points`` (:class:`BatchPoint`, sorted), ``current``, ``error``,
    ``exception``, ``model``, ``ceilings``. ``measure`` replaces :func:`measure_batch`
    (called as ``measure(batch=..., device=...)``), for tests.
    """

    _css_class = "brrr-batch-explorer"
    _name = "batch explorer"

    def __init__(
        self,
        *,
        model: nn.Module | None = None,
        max_batch: int | None = None,
        device: str | torch.device | None = None,
        batch: int = 1,
        make_input: Callable[[int], torch.Tensor] | None = None,
        ceilings: Any = None,
        measure: Callable[..., BatchPoint] | None = None,
    ) -> None:
        import ipywidgets as W

        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if max_batch is not None:
            max_batch = _positive_int("max_batch", max_batch)
        batch = _positive_int("batch", batch)
        if device is None:
            self.device = _model_device(model) if model is not None else devices.device()
        else:
            self.device = devices.resolve(device)
        self.ceilings = (
            ceilings
            if ceilings is not None
            else devices.measure_ceilings(self.device, progress=False)
        )
        if model is None:
            model = _default_mlp(self.ceilings, self.device)
        elif _model_device(model).type != self.device.type:
            raise ValueError(
                f"model is on {_model_device(model)} but device={str(self.device)!r}; "
                f"move it first: model.to({str(self.device)!r})"
            )
        self.model = model
        self._make_input = _input_maker(model, make_input)
        self.weight_bytes = _weight_bytes(model)
        self._sample_bytes = _bytes_per_sample(model, self._make_input(1))
        if measure is None:

            def measure(*, batch: int, device: torch.device) -> BatchPoint:
                return measure_batch(self.model, batch, device, make_input=self._make_input)

        self._measure = measure
        self._cache: dict[tuple[int, str], BatchPoint] = {}

        if max_batch is None:
            max_batch = 4096 if self.device.type == "cpu" else 65536
            free = _available_memory_bytes(self.device)
            while max_batch > 1 and self._bytes_needed(max_batch) > MEMORY_HEADROOM * free / 4:
                max_batch //= 2
        top = 2 ** math.ceil(math.log2(max_batch))
        self.batch_options = tuple(
            b for b in (2**k for k in range(int(math.log2(top)) + 1)) if b <= max_batch
        ) + (() if max_batch & (max_batch - 1) == 0 else (max_batch,))
        if batch not in self.batch_options:
            raise ValueError(f"batch={batch} is not on the slider; use one of {self.batch_options}")
        self._batch_w = W.SelectionSlider(
            options=[(str(b), b) for b in self.batch_options],
            value=batch,
            description="batch",
            continuous_update=False,
        )
        self._build([self._batch_w])
        self._suspended = False
        self._batch_w.observe(self._on_change, names="value")
        self._update()

    # -- state ----------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """The batch size under the slider."""
        return self._batch_w.value

    @property
    def points(self) -> tuple[BatchPoint, ...]:
        """Every measured point, sorted by batch."""
        return tuple(sorted(self._cache.values(), key=lambda p: p.batch))

    @property
    def current(self) -> BatchPoint | None:
        """The measured point under the slider, or None (refused or failed)."""
        return self._cache.get((self.batch, str(self.device)))

    def set(self, *, batch: int) -> BatchPoint | None:
        """Move the slider from code and measure if needed; returns the current point."""
        if batch not in self.batch_options:
            raise ValueError(
                f"batch={batch!r} is not on the slider; use one of {self.batch_options}"
            )
        self._suspended = True
        try:
            self._batch_w.value = batch
        finally:
            self._suspended = False
        return self._update()

    def remeasure(self) -> BatchPoint | None:
        """Forget the current batch (and half of it) and measure again (a busy machine)."""
        for b in (self.batch, self.batch // 2):
            self._cache.pop((b, str(self.device)), None)
        return self._update()

    def _bytes_needed(self, batch: int) -> int:
        # Weights are already allocated; the call needs room for its activations.
        return batch * self._sample_bytes

    def _on_change(self, _change: dict) -> None:
        if not self._suspended:
            self._update()

    def _get(self, batch: int) -> BatchPoint | None:
        key = (batch, str(self.device))
        point = self._cache.get(key)
        if point is not None:
            return point
        what = f"batch {batch}"
        if not self._fits(self.device, self._bytes_needed(batch), what):
            return None
        self._say(f"batch {self.batch} · measuring…", busy=True)
        point = self._measure_safely(
            self.device, what, lambda: self._measure(batch=batch, device=self.device)
        )
        if point is not None:
            self._cache[key] = point
        return point

    def _update(self) -> BatchPoint | None:
        point = self._get(self.batch)
        if point is None:
            self._redraw()
            return None
        half = self._get(self.batch // 2) if self.batch > 1 else None
        if self.batch > 1 and half is None:
            self._redraw()
            return point
        self._clear_error()
        self._say(self._describe(point, half))
        self._redraw()
        return point

    # -- the model --------------------------------------------------------------------
    def _model_lines(self) -> dict[str, Any] | None:
        """Per-batch costs from the roofline model, scaled from a measured point."""
        pts = self.points
        if not pts:
            return None
        ref = pts[-1]  # the largest batch: per-sample terms are least diluted
        c = self.ceilings
        bw = c.mem_bandwidth_bytes_per_s
        flops_per_sample = ref.flops / ref.batch
        act_per_sample = max(0, ref.bytes_moved - ref.weight_bytes) / ref.batch
        overhead_s = ref.ops * c.op_overhead_s
        weights_s = ref.weight_bytes / bw
        per_sample_s = max(flops_per_sample / c.matmul_flops_per_s, act_per_sample / bw)
        fixed_s = max(overhead_s, weights_s)
        return {
            "overhead_s": overhead_s,
            "weights_s": weights_s,
            "compute_s": lambda b: b * flops_per_sample / c.matmul_flops_per_s,
            "memory_s": lambda b: ref.weight_bytes / bw + b * act_per_sample / bw,
            "knee": fixed_s / per_sample_s if per_sample_s > 0 else math.inf,
            "ops": ref.ops,
        }

    def _describe(self, p: BatchPoint, half: BatchPoint | None) -> str:
        c = self.ceilings
        bw = c.mem_bandwidth_bytes_per_s
        head = (
            f"<b>batch {p.batch} · {_fmt_s(p.median_s)} per batch · "
            f"{_fmt_s(p.per_sample_s)} per sample · {_fmt(p.flops_per_s, 'FLOP/s')}</b>"
            f" · {html.escape(getattr(c, 'device_name', p.device))}"
        )
        weights_s = p.weight_bytes / bw
        overhead_s = p.ops * c.op_overhead_s
        weights_text = (
            f"bl.count: the weights are {_fmt_bytes(p.weight_bytes)}, {p.weight_share:.0%} of the "
            f"{_fmt_bytes(p.bytes_moved)} moved; reading them takes ≥ {_fmt_s(weights_s)} at "
            f"{_fmt(bw, 'B/s')}"
        )
        if half is None:
            verdict = (
                "Move the slider right: the readout compares each batch with half of it. "
                + weights_text
                + f"; {p.ops} ops × {_fmt_s(c.op_overhead_s)} op overhead ≈ "
                f"{_fmt_s(overhead_s)}."
            )
        else:
            ratio = p.median_s / half.median_s
            verdict = f"Doubling the batch {half.batch} → {p.batch} cost ×{ratio:.2f} time: "
            if _NOISE <= ratio < _FLAT:
                if weights_s >= 0.5 * p.median_s:
                    verdict += (
                        "a fixed cost per call, and here it is bandwidth on the weights, not "
                        f"overhead: {weights_text}, {weights_s / p.median_s:.0%} of the call. "
                        "A bigger batch reuses each weight read for more samples."
                    )
                else:
                    verdict += (
                        "the overhead signature. The call costs about the same whatever the "
                        f"batch: Python, dispatch and launches ({p.ops} ops; ≥ {_fmt_s(overhead_s)}"
                        f" at the measured {_fmt_s(c.op_overhead_s)} per tiny op), not the work. "
                        f"{weights_text} ({weights_s / p.median_s:.0%} of the call), so not "
                        "bandwidth-bound either. More samples per call are nearly free."
                    )
            elif ratio > _LINEAR:
                compute_s = p.flops / c.matmul_flops_per_s
                memory_s = p.bytes_moved / bw
                kind = (
                    f"compute-bound ({p.flops_per_s / c.matmul_flops_per_s:.0%} of the matmul peak)"
                    if compute_s >= memory_s
                    else f"bandwidth-bound ({p.bytes_per_s / bw:.0%} of the memory bandwidth)"
                )
                verdict += (
                    f"the time grows with the work: past the knee, {kind}. The time per sample "
                    "no longer falls; a bigger batch buys nothing more."
                )
                lines = self._model_lines()
                if lines is not None and p.batch < lines["knee"] / 4:
                    verdict += (
                        f" But the model expects a flat curve this far below its knee (batch ≈ "
                        f"{lines['knee']:.3g}): if .remeasure() gives the same, the per-sample "
                        "cost is higher than the ceilings suggest; if not, it was noise."
                    )
            elif ratio < _NOISE:
                verdict += (
                    "less time for more work. That is noise: something else ran during the "
                    "smaller batch's measurement. Run .remeasure() or close other programs."
                )
            else:
                verdict += "in the knee: the fixed cost and the per-sample work are comparable."
        lines = self._model_lines()
        if lines is not None and math.isfinite(lines["knee"]):
            verdict += f" Knee predicted from the ceilings at batch ≈ {lines['knee']:.3g}."
        if getattr(p.timing, "noisy", False):
            verdict += " (The timing is noisy: the machine is busy.)"
        return f"{head}<br><small>{html.escape(verdict)}</small>"

    # -- picture --------------------------------------------------------------------
    def _draw(self, fig) -> None:
        from matplotlib.ticker import FuncFormatter, NullLocator

        fig.set_size_inches(10, 4.2)
        ax_b, ax_s = fig.subplots(1, 2)
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.25, top=0.92, wspace=0.28)
        bs = self.batch_options
        pts = self.points
        lines = self._model_lines()
        if lines is not None:
            model = {
                f"overhead floor ({lines['ops']} ops × op overhead)": [lines["overhead_s"]]
                * len(bs),
                "reading the weights (weights ÷ bandwidth)": [lines["weights_s"]] * len(bs),
                "compute (FLOPs ÷ matmul peak)": [lines["compute_s"](b) for b in bs],
                "memory (bytes ÷ bandwidth)": [lines["memory_s"](b) for b in bs],
            }
            for (label, ys), colour in zip(
                model.items(), ("tab:red", "tab:purple", "tab:orange", "tab:blue"), strict=True
            ):
                ax_b.plot(bs, ys, color=colour, label=label, **_PREDICTED_STYLE)
                ax_s.plot(
                    bs,
                    [y / b for y, b in zip(ys, bs, strict=True)],
                    color=colour,
                    **_PREDICTED_STYLE,
                )
            if math.isfinite(lines["knee"]) and bs[0] <= lines["knee"] <= bs[-1]:
                for ax in (ax_b, ax_s):
                    ax.axvline(lines["knee"], color="black", linestyle=":", linewidth=1)
                ax_b.annotate(
                    f" predicted knee ≈ {lines['knee']:.3g}",
                    (lines["knee"], 0.02),
                    xycoords=("data", "axes fraction"),
                    fontsize=8,
                )
        kw = {"color": _COLOURS["batch"], "marker": "o", "linewidth": 1.5}
        if pts:
            ax_b.plot([p.batch for p in pts], [p.median_s for p in pts], label="measured", **kw)
            ax_s.plot([p.batch for p in pts], [p.per_sample_s for p in pts], **kw)
        cur = self.current
        ring = {
            "marker": "o",
            "markersize": 14,
            "markerfacecolor": "none",
            "markeredgecolor": "black",
            "markeredgewidth": 2,
        }
        if cur is not None:
            ax_b.plot([cur.batch], [cur.median_s], **ring)
            ax_s.plot([cur.batch], [cur.per_sample_s], **ring)
        for ax in (ax_b, ax_s):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.set_yscale("log")
            ax.set_xlabel("batch size")
            ax.grid(True, alpha=0.25)
            ax.xaxis.set_minor_locator(NullLocator())
        for ax in (ax_b, ax_s):
            _eng_log_axis(ax.yaxis, "s")
        ax_b.set_ylabel("seconds per batch")
        ax_b.set_title("time per batch", fontsize=10)
        ax_s.set_ylabel("seconds per sample")
        ax_s.set_title("time per sample", fontsize=10)
        fig.legend(fontsize=7, loc="lower center", ncols=3)


def batch_explorer(
    *,
    model: nn.Module | None = None,
    max_batch: int | None = None,
    device: str | torch.device | None = None,
    batch: int = 1,
    make_input: Callable[[int], torch.Tensor] | None = None,
) -> BatchExplorer:
    """The batch-size slider of chapter 03: does doubling the batch double the time?

    ``model`` defaults to a 4-layer MLP sized so its knee falls near batch
    32 on this device (see :class:`BatchExplorer` for the formula); pass
    your own ``nn.Module`` (and ``make_input=lambda batch: ...`` if its first
    layer is not an ``nn.Linear``). The slider doubles the batch from 1 to
    ``max_batch`` (default 4096 on a CPU, 65536 on a GPU, less if memory is
    short). Each batch is measured once (:func:`brrrlib.benchmark`, no grad)
    and counted (:func:`brrrlib.count`). The readout states the doubling
    ratio and what it means: overhead, bandwidth on the weights, or past
    the knee, compute- or bandwidth-bound. Returns a :class:`BatchExplorer`;
    as the last expression of a cell it shows itself.
    """
    return BatchExplorer(
        model=model, max_batch=max_batch, device=device, batch=batch, make_input=make_input
    )
