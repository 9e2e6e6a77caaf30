"""The roofline model: how fast can a workload go, given its FLOPs and bytes?"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from brrrlib import _checks, _fmt
from brrrlib.hardware import dtype_key

__all__ = [
    "RooflinePoint",
    "attainable_flops_per_s",
    "lower_bound_s",
    "plot",
    "regime",
    "ridge_point",
]

ABOVE_ROOF_TOLERANCE = 0.10
"""How far above the roof a point may sit before it is flagged: measured roofs are medians."""


def _roof(peak_flops_per_s: Any, mem_bandwidth_bytes_per_s: Any) -> tuple[float, float]:
    """The two numbers of a roof, checked: each a number > 0."""
    return (
        _checks.number("peak_flops_per_s", peak_flops_per_s, positive=True),
        _checks.number("mem_bandwidth_bytes_per_s", mem_bandwidth_bytes_per_s, positive=True),
    )


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved: ``flops / bytes_moved``."""
    flops = _checks.number("flops", flops, positive=False)
    bytes_moved = _checks.number("bytes_moved", bytes_moved, positive=True)
    return flops / bytes_moved


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
    return (
        isinstance(x, (tuple, list))
        and len(x) == 2
        and all(isinstance(v, Real) and not isinstance(v, bool) for v in x)
    )


def _is_spec(x: Any) -> bool:
    return hasattr(x, "peak_flops_per_s") and hasattr(x, "mem_bandwidth_bytes_per_s")


def _is_ceilings(x: Any) -> bool:
    return all(
        hasattr(x, a)
        for a in ("matmul_flops_per_s", "vector_flops_per_s", "mem_bandwidth_bytes_per_s")
    )


def _peak(device: Any, dtype: str) -> float:
    """A device's roof for ``dtype``: its measured matmul FLOP/s, or its spec sheet's peak."""
    if _is_ceilings(device):
        by_dtype = getattr(device, "matmul_flops_per_s_by_dtype", None) or {}
        peaks, missing = {**by_dtype, "fp32": device.matmul_flops_per_s}, "matmul measurement"
    else:
        peaks, missing = dict(device.peak_flops_per_s), "peak"
    if not peaks.get(dtype):
        raise ValueError(
            f"dtype: {_device_label(device)} has no {dtype!r} {missing} (it has "
            f"{sorted(k for k, v in peaks.items() if v)}); pass one of those, or use a "
            "spec-sheet device (bl.spec(...)) for other dtypes"
        )
    return float(peaks[dtype])


def _ceilings_of(device_or_spec: Any, dtype: str = "fp32") -> tuple[float, float]:
    """``(peak_flops_per_s, mem_bandwidth_bytes_per_s)`` of a spec, Ceilings or pair."""
    dtype = dtype_key(dtype)
    if _is_pair(device_or_spec):
        peak, bandwidth = device_or_spec
    elif _is_ceilings(device_or_spec) or _is_spec(device_or_spec):
        peak, bandwidth = _peak(device_or_spec, dtype), device_or_spec.mem_bandwidth_bytes_per_s
    else:
        raise TypeError(
            "device_or_spec: expected a DeviceSpec (bl.spec('A100')), Ceilings "
            f"(bl.measure_ceilings()) or a (peak_flops_per_s, mem_bandwidth_bytes_per_s) pair, "
            f"got {type(device_or_spec).__name__}"
        )
    return _roof(peak, bandwidth)


def _roofs(device: Any, dtype: str) -> list[tuple[str, float]]:
    """Horizontal roofs to draw, highest first: (label, flops_per_s)."""
    dtype = dtype_key(dtype)
    if _is_ceilings(device):
        return [
            (f"{dtype} matmul", _peak(device, dtype)),
            ("fp32 vector", float(device.vector_flops_per_s)),
        ]
    peak, _ = _ceilings_of(device, dtype)
    roofs = [(dtype, peak)]
    if _is_spec(device) and dtype != "fp32":
        fp32 = dict(device.peak_flops_per_s).get("fp32")
        if fp32 and fp32 < peak:
            roofs.append(("fp32, no tensor cores", float(fp32)))
    return roofs


def _device_label(device: Any) -> str:
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
        if not isinstance(self.label, str):
            raise TypeError(f"label must be a string, got {type(self.label).__name__}")
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
        if not (hasattr(counts, "flops") and hasattr(counts, "bytes_moved")):
            raise TypeError(
                f"counts: expected the result of bl.count(...), got {type(counts).__name__}"
            )
        if hasattr(timing, "median_s"):
            seconds = timing.median_s
            label = label if label is not None else getattr(timing, "label", None)
        else:
            seconds = _checks.seconds("timing (a Timing from bl.benchmark, or seconds)", timing)
        return cls(
            label=label if label is not None else "workload",
            flops=counts.flops,
            bytes_moved=counts.bytes_moved,
            seconds=seconds,
            precision=getattr(counts, "precision", "fp32"),
        )

    def __repr__(self) -> str:
        return (
            f"RooflinePoint({self.label!r}: {self.intensity_flops_per_byte:.3g} FLOP/byte, "
            f"{_fmt.si(self.achieved_flops_per_s, 'FLOP/s')}, {_fmt.si(self.achieved_bytes_per_s, 'B/s')})"
        )


def _as_xy(point: Any) -> tuple[str, float, float]:
    """(label, intensity, flops_per_s) from a RooflinePoint or such a tuple."""
    if isinstance(point, RooflinePoint):
        if point.flops == 0:
            raise ValueError(
                f"points: {point.label!r} did 0 FLOPs, so it has no place on log-log axes; "
                "plot its bytes per second against the bandwidth instead"
            )
        return point.label, point.intensity_flops_per_byte, point.achieved_flops_per_s
    if isinstance(point, (tuple, list)) and len(point) == 3:
        label, intensity, rate = point
        return (
            str(label),
            _checks.number("point intensity", intensity, positive=True),
            _checks.number("point flops_per_s", rate, positive=True),
        )
    raise TypeError(
        "points: each point must be a RooflinePoint or a (label, intensity_flops_per_byte, "
        f"flops_per_s) tuple, got {type(point).__name__}"
    )


def above_roof(point: Any, ceilings: Any, dtype: str | None = None) -> bool:
    """True when ``point`` claims more FLOP/s than ``ceilings``' roof allows: an error somewhere."""
    dtype = getattr(point, "precision", "fp32") if dtype is None else dtype
    _, intensity, rate = _as_xy(point)
    top = max(r for _, r in _roofs(ceilings, dtype))
    _, bandwidth = _ceilings_of(ceilings, dtype)
    return rate > attainable_flops_per_s(intensity, top, bandwidth) * (1 + ABOVE_ROOF_TOLERANCE)


# ---------------------------------------------------------------- plot


def _points_precision(points: Sequence[Any], device: Any) -> str:
    """The roof to draw for these points: their precision (the fastest when they differ)."""
    wanted = {getattr(p, "precision", "fp32") for p in points} - {"fp32"}
    usable = []
    for p in sorted(wanted):
        try:
            usable.append((_ceilings_of(device, p)[0], p))
        except (ValueError, TypeError):
            continue
    return max(usable)[1] if usable else "fp32"


def _devices(ceilings: Any, extra: Sequence[Any]) -> list[Any]:
    if isinstance(ceilings, (list, tuple)) and not _is_pair(ceilings):
        devices = list(ceilings)
    else:
        devices = [ceilings]
    devices += list(extra)
    if not devices:
        raise ValueError(
            "ceilings: give at least one device (bl.spec('A100') or bl.measure_ceilings())"
        )
    return devices


def plot(
    ceilings: Any,
    points: Sequence[Any] = (),
    *,
    ax: Any = None,
    dtype: str | None = None,
    extra: Sequence[Any] = (),
    title: str | None = None,
) -> Any:
    """Draw the roofline of one or more devices with measured points; returns the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    devices = _devices(ceilings, extra)
    if dtype is None:
        dtype = _points_precision(points, devices[0])
    resolved = [(d, _roofs(d, dtype), _ceilings_of(d, dtype)[1]) for d in devices]
    xy = [_as_xy(p) for p in points]
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5), layout="constrained")
    xs = [r[k][1] / bw for _, r, bw in resolved for k in (0, -1)] + [x for _, x, _ in xy]
    x_lo, x_hi = min(xs) / 30, max(xs) * 30
    grid = np.logspace(math.log10(x_lo), math.log10(x_hi), 400)
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
    for i, (device, roofs, bandwidth) in enumerate(resolved):
        _draw_device(ax, grid, _device_label(device), roofs, bandwidth, colors[i % len(colors)])
    for label, x, y in xy:
        _draw_point(ax, label, x, y, above_roof((label, x, y), devices[0], dtype))
    _finish(ax, x_lo, x_hi, f"{title or 'roofline'} ({dtype} roof)")
    return ax


def _draw_device(ax, grid, name: str, roofs, bandwidth: float, color) -> None:
    """One device: each roof as min(peak, intensity x bandwidth), and its ridge point."""
    import numpy as np

    for j, (roof_label, peak) in enumerate(roofs):
        label = f"{name} {roof_label}: {_fmt.si(peak, 'FLOP/s')}"
        label += f", {_fmt.si(bandwidth, 'B/s')}" if j == 0 else ""
        ax.plot(
            grid,
            np.minimum(peak, grid * bandwidth),
            "-" if j == 0 else "--",
            color=color,
            lw=2 if j == 0 else 1.3,
            label=label,
        )
    top = roofs[0][1]
    ridge = top / bandwidth
    ax.plot([ridge], [top], "o", color=color, ms=6)
    # above and left of the dot: points to its right sit under the roof, not on the label
    ax.annotate(
        f"ridge {ridge:.3g} FLOP/byte",
        (ridge, top),
        textcoords="offset points",
        xytext=(-4, 6),
        ha="right",
        fontsize=8,
        color=color,
    )


def _draw_point(ax, label: str, x: float, y: float, bad: bool) -> None:
    """A measured point; one above the roof as a red cross, because it cannot be right."""
    if bad:
        ax.plot([x], [y], "X", color="red", ms=11, zorder=5)
        ax.annotate(
            f"{label}\nabove the roof: a counting or timing error",
            (x, y),
            textcoords="offset points",
            xytext=(8, 6),
            fontsize=8,
            color="red",
        )
    else:
        ax.plot([x], [y], "o", color="black", ms=6, zorder=5)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, 4), fontsize=8)


def _finish(ax, x_lo: float, x_hi: float, title: str) -> None:
    """Log-log axes with their units, the title (which roof), grid and legend."""
    from matplotlib.ticker import EngFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.yaxis.set_major_formatter(EngFormatter(unit="FLOP/s"))
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
