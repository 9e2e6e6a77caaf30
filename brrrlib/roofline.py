"""The roofline model: how fast can a workload go, given its FLOPs and bytes?"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from brrrlib import _checks, _fmt
from brrrlib._counts import Counts
from brrrlib.hardware import dtype_key

__all__ = [
    "RooflinePoint",
    "attainable_flops_per_s",
    "lower_bound_s",
    "plot",
    "regime",
    "ridge_point",
]

#: How far above the roof a point may sit before it is flagged: measured roofs are medians.
ABOVE_ROOF_TOLERANCE = 0.10
_MARKERS = ("o", "s", "^", "D", "v", "P")
_TEXT = {"textcoords": "offset points", "fontsize": 8}
#: The x axis of every roofline, and a ridge point's label on it.
INTENSITY_LABEL = "arithmetic intensity (FLOP/byte)"
RIDGE_LABEL = "ridge {:.3g} FLOP/byte"


def _roof(peak_flops_per_s: Any, mem_bandwidth_bytes_per_s: Any) -> tuple[float, float]:
    """The two numbers of a roof, checked: each a number > 0."""
    return (
        _checks.number("peak_flops_per_s", peak_flops_per_s, positive=True),
        _checks.number("mem_bandwidth_bytes_per_s", mem_bandwidth_bytes_per_s, positive=True),
    )


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved: ``flops / bytes_moved``."""
    flops = _checks.number("flops", flops, positive=False)
    return flops / _checks.number("bytes_moved", bytes_moved, positive=True)


def ridge_point(peak_flops_per_s: float, mem_bandwidth_bytes_per_s: float) -> float:
    """The intensity (FLOP/byte) where the memory slope meets the compute roof."""
    peak, bandwidth = _roof(peak_flops_per_s, mem_bandwidth_bytes_per_s)
    return peak / bandwidth


def attainable_flops_per_s(
    intensity_flops_per_byte: float, peak_flops_per_s: float, mem_bandwidth_bytes_per_s: float
) -> float:
    """The roof at this intensity: ``min(peak_flops_per_s, intensity * bandwidth)``."""
    intensity = _checks.number("intensity_flops_per_byte", intensity_flops_per_byte, positive=False)
    peak, bandwidth = _roof(peak_flops_per_s, mem_bandwidth_bytes_per_s)
    return min(peak, intensity * bandwidth)


def lower_bound_s(
    flops: float, bytes_moved: float, peak_flops_per_s: float, mem_bandwidth_bytes_per_s: float
) -> float:
    """Seconds at the least: ``max(flops / peak, bytes_moved / bandwidth)``, overhead not in it."""
    flops = _checks.number("flops", flops, positive=False)
    bytes_moved = _checks.number("bytes_moved", bytes_moved, positive=False)
    peak, bandwidth = _roof(peak_flops_per_s, mem_bandwidth_bytes_per_s)
    return max(flops / peak, bytes_moved / bandwidth)


def regime(
    intensity_flops_per_byte: float, peak_flops_per_s: float, mem_bandwidth_bytes_per_s: float
) -> str:
    """``"memory"`` below the ridge point, ``"compute"`` at or above it (counts alone)."""
    intensity = _checks.number("intensity_flops_per_byte", intensity_flops_per_byte, positive=False)
    ridge = ridge_point(peak_flops_per_s, mem_bandwidth_bytes_per_s)
    return "compute" if intensity >= ridge else "memory"


# ---------------------------------------------------------------- devices


def _is_pair(x: Any) -> bool:
    real = lambda v: isinstance(v, Real) and not isinstance(v, bool)  # noqa: E731
    return isinstance(x, (tuple, list)) and len(x) == 2 and all(map(real, x))


def _roofs(device: Any, dtype: str) -> tuple[list[tuple[str, float]], float]:
    """A device's roofs to draw (label, FLOP/s), highest first, and its bandwidth."""
    # Ceilings: the matmul roof of dtype and the fp32 vector one; a DeviceSpec: its dtype peak and
    # fp32 below it where tensor cores make the difference; a (FLOP/s, bytes/s) pair: one roof.
    dtype = dtype_key(dtype)
    if _is_pair(device):
        peak, bandwidth = _roof(*device)
        return [(dtype, peak)], bandwidth
    if not hasattr(device, "mem_bandwidth_bytes_per_s"):
        what = "bl.spec(...), bl.measure_ceilings() or a (FLOP/s, bytes/s) pair"
        raise TypeError(f"device_or_spec must be {what}, got {type(device).__name__}")
    measured = hasattr(device, "vector_flops_per_s")
    if measured:
        by_dtype = getattr(device, "matmul_flops_per_s_by_dtype", None) or {}
        peaks = {**by_dtype, "fp32": device.matmul_flops_per_s}
    else:
        peaks = dict(device.peak_flops_per_s)
    _checks.one_of("dtype", dtype, sorted(k for k, v in peaks.items() if v))
    peak, bandwidth = _roof(peaks[dtype], device.mem_bandwidth_bytes_per_s)
    if measured:
        return [(f"{dtype} matmul", peak), ("fp32 vector", device.vector_flops_per_s)], bandwidth
    fp32 = peaks.get("fp32") or math.inf  # and fp32's roof below it, where tensor cores lift one
    return [(dtype, peak), *[("fp32, no tensor cores", fp32)] * (fp32 < peak)], bandwidth


def _label(device: Any) -> str:
    return str(getattr(device, "name", None) or getattr(device, "device_name", None) or "device")


# ---------------------------------------------------------------- points


@dataclass(frozen=True)
class RooflinePoint:
    """A measured workload to place on the roofline: counted work, timed seconds."""

    label: str
    flops: float
    bytes_moved: float
    seconds: float
    precision: str = "fp32"  # the roof it is judged against

    def __post_init__(self) -> None:
        _checks.kind("label", self.label, str, "str")
        _checks.number("flops", self.flops, positive=False)
        _checks.number("bytes_moved", self.bytes_moved, positive=True)
        _checks.number("seconds", self.seconds, positive=True)

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved: the x coordinate."""
        return self.flops / self.bytes_moved

    @property
    def achieved_flops_per_s(self) -> float:
        """FLOPs per second actually reached: the y coordinate."""
        return self.flops / self.seconds

    @property
    def achieved_bytes_per_s(self) -> float:
        """Bytes per second actually moved (compare with the memory bandwidth)."""
        return self.bytes_moved / self.seconds

    @classmethod
    def from_counts(cls, counts: Any, timing: Any, label: str | None = None) -> RooflinePoint:
        """A point from ``bl.count(...)`` and a ``Timing`` (its median) or seconds of that work."""
        _checks.kind("counts", counts, Counts, "bl.count(...)")
        seconds = getattr(timing, "median_s", None) or _checks.seconds("timing", timing)
        label = label or getattr(timing, "label", None) or "workload"
        return cls(label, counts.flops, counts.bytes_moved, seconds, counts.precision)

    def __repr__(self) -> str:
        x = f"{self.intensity_flops_per_byte:.3g} FLOP/byte"
        flops = _fmt.si(self.achieved_flops_per_s, "FLOP/s")
        moved = _fmt.si(self.achieved_bytes_per_s, "B/s")
        return f"RooflinePoint({self.label!r}, {x}, {flops}, {moved})"


def _as_xy(point: Any) -> tuple[str, float, float]:
    """(label, intensity, flops_per_s) from a RooflinePoint or such a tuple."""
    if isinstance(point, RooflinePoint):
        if point.flops == 0:
            raise ValueError(f"points: {point.label!r} did 0 FLOPs: no place on log-log axes")
        return point.label, point.intensity_flops_per_byte, point.achieved_flops_per_s
    if not (isinstance(point, (tuple, list)) and len(point) == 3):
        what = "a RooflinePoint or a (label, FLOP/byte, FLOP/s) tuple"
        raise TypeError(f"points must be {what}, got {type(point).__name__}")
    label, intensity, rate = point
    intensity = _checks.number("intensity_flops_per_byte", intensity, positive=True)
    return str(label), intensity, _checks.number("achieved_flops_per_s", rate, positive=True)


def above_roof(point: Any, ceilings: Any, dtype: str | None = None) -> bool:
    """True when ``point`` claims more FLOP/s than ``ceilings``' roof allows: an error somewhere."""
    _, intensity, rate = _as_xy(point)
    roofs, bandwidth = _roofs(ceilings, dtype or getattr(point, "precision", "fp32"))
    top = max(r for _, r in roofs)
    return rate > attainable_flops_per_s(intensity, top, bandwidth) * (1 + ABOVE_ROOF_TOLERANCE)


# ---------------------------------------------------------------- plot


def _points_precisions(points: Sequence[Any], device: Any) -> list[str]:
    """The roofs to draw for these points: each precision among them that ``device`` has."""
    found = []
    for precision in dict.fromkeys(getattr(p, "precision", "fp32") for p in points):
        with contextlib.suppress(ValueError):  # no such roof here: not drawn
            _roofs(device, precision)
            found.append(precision)
    return found or ["fp32"]


def plot(
    ceilings: Any,
    points: Sequence[Any] = (),
    *,
    ax: Any = None,
    dtype: Any = None,
    extra: Sequence[Any] = (),
    title: str | None = None,
    keyed: bool = False,
    colours: Mapping[str, str] | None = None,
) -> Any:
    """Devices' roofs, of ``dtype``, a list of them or the points' own; points labelled or ``keyed``."""
    import matplotlib.pyplot as plt
    import numpy as np

    many = isinstance(ceilings, (list, tuple)) and not _is_pair(ceilings)
    devices = [*(ceilings if many else [ceilings]), *extra]
    _checks.some("ceilings", devices, "bl.spec('H100')")
    dtypes = _points_precisions(points, devices[0]) if dtype is None else dtype
    dtypes = [dtype_key(t) for t in (dtypes if isinstance(dtypes, (list, tuple)) else [dtypes])]
    resolved = []
    for device, precision in itertools.product(devices, dtypes):
        roofs, bandwidth = _roofs(device, precision)
        resolved.append((_label(device), roofs[:1] if len(dtypes) > 1 else roofs, bandwidth))
    xy = [_as_xy(p) for p in points]
    # each point judged on the roof of its own precision where that is drawn
    judged = [d if (d := getattr(p, "precision", "")) in dtypes else dtypes[0] for p in points]
    over = [above_roof(p, devices[0], d) for p, d in zip(points, judged, strict=True)]
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    xs = [r[k][1] / bw for _, r, bw in resolved for k in (0, -1)] + [x for _, x, _ in xy]
    grid = np.geomspace(min(xs) / 30, max(xs) * 30, 400)
    for i, (name, roofs, bandwidth) in enumerate(resolved):
        _draw_device(ax, grid, name, roofs, bandwidth, f"C{i}")
    _draw_points(ax, xy, over, keyed, colours or {})
    _dress(ax, title or "")
    ax.set_xlim(grid[0], grid[-1])
    return ax


def _dress(ax: Any, title: str) -> None:
    """Log axes in FLOP/byte and FLOP/s, a light grid, the legend beside the axes."""
    from matplotlib.ticker import EngFormatter

    ax.set(xscale="log", yscale="log", xlabel=INTENSITY_LABEL)
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(title, pad=14)  # above the ridge labels
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.grid(True, which="major", alpha=0.3)
    _fmt.legend_beside(ax)


def _draw_device(ax, grid, name: str, roofs, bandwidth: float, colour) -> None:
    """One device: each roof as min(peak, intensity x bandwidth), and its ridge point."""
    for j, (roof, peak) in enumerate(roofs):
        label = f"{name} {roof}".strip() + f": {_fmt.si(peak, 'FLOP/s')}"
        label += "" if j else f", {_fmt.si(bandwidth, 'B/s')}"
        style = {"ls": "--", "lw": 1.3} if j else {"ls": "-", "lw": 2}
        ax.plot(grid, [min(peak, x * bandwidth) for x in grid], color=colour, label=label, **style)
    ridge, top = roofs[0][1] / bandwidth, roofs[0][1]
    ax.plot([ridge], [top], "o", color=colour, ms=6)
    # above and left of the dot: points to its right sit under the roof, not on the label
    text = RIDGE_LABEL.format(ridge)
    ax.annotate(text, (ridge, top), xytext=(-6, 6), ha="right", color=colour, **_TEXT)


def _draw_points(ax, xy, over: Sequence[bool], keyed: bool, colours: Mapping[str, str]) -> None:
    """The points: keyed in the legend or labelled beside; one above the roof as a red cross."""
    for i, key in enumerate(dict.fromkeys(label for label, _, _ in xy) if keyed else ()):
        xs, ys = zip(*[(x, y) for label, x, y in xy if label == key], strict=True)
        style = {"marker": _MARKERS[i % len(_MARKERS)], "mec": colours.get(key, f"C{3 + i}")}
        ax.plot(xs, ys, ls="none", ms=8, mfc="white", mew=2, zorder=6, label=key, **style)
    for i, ((label, x, y), bad) in enumerate(zip(xy, over, strict=True)):
        if bad:
            ax.plot([x], [y], "X", color="red", ms=11, zorder=7)
            label += "\nabove the roof: a counting or timing error"
        elif keyed:
            continue
        else:
            ax.plot([x], [y], "o", color=colours.get(label, "black"), mec="black", ms=7, zorder=5)
        # Points at one intensity (eager and compiled, fp32 and TF32) stack in one column: their
        # labels go right and left of it in turn, so no label covers another.
        left = sum(abs(math.log10(x / x0)) < 0.05 for _, x0, _ in xy[:i]) % 2
        side = {"xytext": (-6, 4), "ha": "right"} if left else {"xytext": (6, 4)}
        ax.annotate(label, (x, y), color="red" if bad else "black", **side, **_TEXT)
