"""Bandwidth by cache level: a working-set sweep from the first cache to memory (chapter 02)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from brrrlib import _fmt, machine, timing

__all__ = ["Levels", "measure_levels"]

#: A call cheaper than this many tiny ops measures the op's cost, not the cache's bandwidth.
OVERHEAD_CALLS = 10
#: The level a working set lives in past every cache.
MEMORY = "memory"
#: A working set read this many times faster than the largest one still lives in a cache.
EDGE_RATIO = 1.5


@dataclass(frozen=True)
class Levels:
    """One device's bandwidth by working-set size and pattern, and a roof per cache level."""

    device: str
    device_name: str
    threads: int
    caches: tuple[tuple[str, int], ...]
    points: tuple[tuple[str, int, float, float], ...]
    op_overhead_s: float

    @property
    def held(self) -> tuple[tuple[str, int], ...]:
        """The caches, the last one's capacity as the sweep found it where that is smaller."""
        caches = self.caches
        reads = sorted((size, rate) for p, size, rate, _ in self.points if p == "read")
        beyond = [rate for size, rate in reads if caches and size > caches[-1][1]]
        if not beyond:
            return caches
        before = caches[-2][1] if len(caches) > 1 else 0
        fast = [size for size, rate in reads if size > before and rate >= EDGE_RATIO * max(beyond)]
        edge = max(fast, default=before)
        if edge >= caches[-1][1] or edge <= before:
            return caches
        return (*caches[:-1], (caches[-1][0], edge))

    def level_of(self, working_set_bytes: float) -> str:
        """The nearest level (:attr:`held`) that holds ``working_set_bytes``, else ``"memory"``."""
        for name, capacity in self.held:
            if working_set_bytes <= capacity:
                return name
        return MEMORY

    def overhead_bound(self, seconds_per_call: float) -> bool:
        """True when a call costs less than :data:`OVERHEAD_CALLS` tiny ops."""
        return seconds_per_call < OVERHEAD_CALLS * self.op_overhead_s

    def roof(self, level: str, pattern: str = "read") -> float | None:
        """Bytes per second of ``level``'s fastest point not overhead-bound (``None``: none)."""
        rates = [
            rate
            for p, size, rate, call_s in self.points
            if p == pattern and self.level_of(size) == level and not self.overhead_bound(call_s)
        ]
        return max(rates) if rates else None

    def roofs(self, pattern: str = "read") -> dict[str, float | None]:
        """``{level: roof}`` for every level, nearest first, memory last."""
        return {name: self.roof(name, pattern) for name in [*dict(self.caches), MEMORY]}

    def rows(self) -> list[list[str]]:
        """The table: level, capacity as the sweep found it and as reported, each pattern's roof."""
        reported = dict(self.caches)
        capacity = {**dict(self.held), MEMORY: None}
        return [
            [
                name,
                _fmt.binary_bytes(capacity[name]) if capacity[name] else "beyond",
                _fmt.binary_bytes(reported[name]) if name in reported else "",
                *(
                    _fmt.si(r, "B/s") if (r := self.roof(name, p)) else "overhead-bound"
                    for p in self._patterns()
                ),
            ]
            for name in capacity
        ]

    def _patterns(self) -> list[str]:
        return sorted({p for p, *_ in self.points}, key=["read", "copy"].index)

    def _header(self) -> list[str]:
        return ["level", "holds", "reported", *(f"{p} roof" for p in self._patterns())]

    def _title(self) -> str:
        tiny = _fmt.seconds(self.op_overhead_s)
        return f"{self.device_name} ({self.device}, {self.threads} threads), one tiny op {tiny}"

    def __repr__(self) -> str:
        return self._title() + "\n" + _fmt.text_table(self._header(), self.rows(), align="lrrrr")

    def _repr_html_(self) -> str:
        return _fmt.html_table(self._header(), self.rows(), caption=self._title(), align="lrrrr")

    def plot(self, ax=None, peak_flops_per_s: float | None = None):
        """Bandwidth against working set, a line per pattern, each cache's capacity marked."""
        import matplotlib.pyplot as plt
        import matplotlib.ticker

        roof_ax = None
        if ax is None:
            panels = 2 if peak_flops_per_s else 1
            _, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4), squeeze=False)
            ax, roof_ax = axes[0][0], axes[0][-1] if peak_flops_per_s else None
        for pattern, style in (("read", "o-"), ("copy", "s--")):
            pts = [(s, r) for p, s, r, _ in self.points if p == pattern]
            ax.plot([s for s, _ in pts], [r / 1e9 for _, r in pts], style, label=pattern)
        if bound := [size for _, size, _, t in self.points if self.overhead_bound(t)]:
            grey = dict(color="grey", alpha=0.15, label="overhead-bound")
            ax.axvspan(min(bound) / 1.2, max(bound) * 1.2, **grey)
        reported = dict(self.caches)
        for name, capacity in self.held:  # what held, and what the system reports where not
            marks = [(capacity, name, ":", 0.98)]
            if reported[name] != capacity:
                marks.append((reported[name], f"{name} reported", "--", 0.92))
            for at, text, style, y in marks:
                ax.axvline(at, color="grey", lw=0.8, ls=style)
                top = {"transform": ax.get_xaxis_transform(), "ha": "right", "va": "top"}
                ax.text(at, y, text, fontsize=8, **top)
        ax.set(xscale="log", yscale="log", xlabel="working set (bytes)", ylabel="bandwidth (GB/s)")
        plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_title(self.device_name, fontsize=10)
        ax.legend(fontsize=8)
        if roof_ax is not None:
            _roofline(roof_ax, self, peak_flops_per_s)
            ax.figure.tight_layout()
        return ax


def _roofline(ax, levels: Levels, peak_flops_per_s: float) -> None:
    """One diagonal per measured level under the compute peak: the read roofs."""
    from brrrlib import roofline

    intensity = [2.0**k for k in range(-5, 9)]
    for level, roof in levels.roofs("read").items():
        if roof:
            attainable = [min(peak_flops_per_s, roof * i) for i in intensity]
            ax.plot(intensity, attainable, label=f"{level} read: {_fmt.si(roof, 'B/s')}")
    roofline._dress(ax, "")


def measure_levels(device: str | torch.device | None = None, *, budget_s: float = 0.03) -> Levels:
    """Sweep working sets from the first cache past the last, read and copy (module doc)."""
    dev = machine.physical(machine.resolve(device))
    if dev.type == "cpu":
        timing.settle_threads()  # a stalled thread would time the wait, not the cache
    threads = torch.get_num_threads() if dev.type == "cpu" else 1
    caches = machine.caches(dev)
    largest = caches[-1][1] if caches else machine.last_level_cache_bytes(dev)
    room = machine.available_memory_bytes(dev) // 8
    top = 2 ** int(math.log2(max(min(4 * largest, room), 2**20)))
    first = 16 * 2**10 if dev.type == "cpu" else 256 * 2**10
    points = []
    size = first
    while size <= top:
        points += _point(dev, size, budget_s)
        size *= 2
    a, b = torch.ones(1, device=dev), torch.zeros(1, device=dev)
    tiny = timing.quick_s(
        functools.partial(a.add_, b), dev, budget_s, graph=True
    )  # timed as the points are
    return Levels(dev.type, machine.device_name(dev), threads, caches, tuple(points), tiny)


def _point(dev: torch.device, size: int, budget_s: float) -> list[tuple[str, int, float, float]]:
    """Both patterns at one working set: (pattern, bytes, bytes per second, seconds per call)."""
    x = torch.ones(size // 4, device=dev)
    half = torch.ones(size // 8, device=dev)
    out = torch.empty_like(half)
    read_s = min(
        timing.quick_s(f, dev, budget_s, graph=True)
        for f in (x.sum, functools.partial(torch.dot, *x.chunk(2)))
    )
    copy_s = timing.quick_s(functools.partial(out.copy_, half), dev, budget_s, graph=True)
    return [("read", size, size / read_s, read_s), ("copy", size, size / copy_s, copy_s)]
