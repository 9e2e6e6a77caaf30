"""The latency-bandwidth model of a collective, and nccl-tests' ring factor (chapter 05)."""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from brrrlib import _fmt

__all__ = ["FLOPS_PER_PARAM_PER_SAMPLE", "AlphaBeta", "fit_alpha_beta", "ring_factor"]

#: Training FLOPs per parameter per sample (token): 2 in the forward pass (a
#: multiply and an add per weight), 4 in the backward pass (gradients of the
#: inputs and of the weights). The usual estimate for dense models (Kaplan et
#: al. 2020, "Scaling Laws for Neural Language Models", section 2.1).
FLOPS_PER_PARAM_PER_SAMPLE = 6


def ring_factor(world_size: int) -> float:
    """``2 (n - 1) / n``: how many times each byte of an all-reduce crosses a link."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a whole number >= 1, got {world_size!r}")
    return 2 * (world_size - 1) / world_size


@dataclass(frozen=True, repr=False)
class AlphaBeta:
    """The latency-bandwidth model of a collective: ``t(S) = alpha_s + beta_s_per_byte x S``."""

    alpha_s: float
    beta_s_per_byte: float
    world_size: int
    sizes_bytes: tuple[float, ...] = ()
    times_s: tuple[float, ...] = ()
    plateau_sizes: int = 0  # how many of the smallest sizes gave alpha (their median)

    def time_s(self, nbytes: float) -> float:
        """The model's time for one all-reduce of ``nbytes``."""
        return self.alpha_s + self.beta_s_per_byte * nbytes

    @property
    def algorithm_bytes_per_s(self) -> float:
        """``1 / beta``: the algorithm bandwidth a very large message approaches."""
        return 1 / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf

    @property
    def bus_bytes_per_s(self) -> float:
        """The large-message bus bandwidth: ``2(n-1)/n / beta``, to set beside a link's spec."""
        return ring_factor(self.world_size) * self.algorithm_bytes_per_s

    @property
    def half_bandwidth_bytes(self) -> float:
        """``alpha / beta``: where latency and bandwidth cost the same."""
        return self.alpha_s / self.beta_s_per_byte if self.beta_s_per_byte > 0 else math.inf

    @property
    def max_relative_error(self) -> float:
        """The worst ``|model - measured| / measured`` over the fitted points."""
        errors = [
            abs(self.time_s(n) - t) / t for n, t in zip(self.sizes_bytes, self.times_s, strict=True)
        ]
        return max(errors, default=math.nan)

    @property
    def misfits(self) -> tuple[tuple[float, float], ...]:
        """``(size, model / measured)`` of every fitted size the model misses by over MISFIT."""
        return tuple(
            (n, self.time_s(n) / t)
            for n, t in zip(self.sizes_bytes, self.times_s, strict=True)
            if abs(self.time_s(n) - t) > MISFIT * t
        )

    def _text(self) -> str:
        return (
            f"alpha {_fmt.seconds(self.alpha_s)}, beta {_fmt.seconds(self.beta_s_per_byte * 1e6)} "
            f"per MB ({_fmt.si(self.algorithm_bytes_per_s, 'B/s')} algorithm, "
            f"{_fmt.si(self.bus_bytes_per_s, 'B/s')} bus bandwidth, n={self.world_size}); "
            f"half bandwidth at {_fmt.binary_bytes(self.half_bandwidth_bytes)}; "
            f"alpha = median of the {self.plateau_sizes} smallest sizes; "
            f"worst misfit {self.max_relative_error:.0%} over {len(self.times_s)} sizes"
        )

    def __repr__(self) -> str:
        return f"AlphaBeta({self._text()})"

    def _repr_html_(self) -> str:
        return f"<div><b>t(S) = &alpha; + &beta;S</b>: {html.escape(self._text())}</div>"


#: A size is on the small-message plateau while its bandwidth term is under this share of its
#: time; alpha is the median of the plateau's times.
_PLATEAU_SHARE = 0.1
#: A measured size the model misses by more than this share of its time is a misfit.
MISFIT = 0.5


def fit_alpha_beta(
    sizes_bytes: Sequence[float], times_s: Sequence[float], world_size: int = 2
) -> AlphaBeta:
    """Fit ``t = alpha + beta S``: alpha from the small-message plateau, beta from large messages."""
    sizes = [float(s) for s in sizes_bytes]
    times = [float(t) for t in times_s]
    if len(sizes) != len(times) or len(sizes) < 2:
        raise ValueError(
            f"need at least 2 (size, time) pairs of equal length, got {len(sizes)} and {len(times)}"
        )
    if not all(t > 0 and math.isfinite(t) for t in times) or not all(s >= 0 for s in sizes):
        raise ValueError("times_s must be positive and finite, sizes_bytes >= 0")
    points = sorted(zip(sizes, times, strict=True))
    (s0, t0), (s1, t1) = points[-2], points[-1]
    beta = (t1 - t0) / (s1 - s0) if s1 > s0 and t1 > t0 else (t1 / s1 if s1 > 0 else 0.0)  # 1.
    plateau = [(s, t) for s, t in points if beta * s < _PLATEAU_SHARE * t] or points[:1]
    alpha = max(0.0, statistics.median(t - beta * s for s, t in plateau))  # 2.
    large = [(s, t) for s, t in points if t > 2 * alpha and s > 0] or points[-1:]
    beta = _beta_given(alpha, *zip(*large, strict=True))  # 3.
    return AlphaBeta(alpha, beta, world_size, tuple(sizes), tuple(times), len(plateau))


def _beta_given(alpha: float, sizes: Sequence[float], times: Sequence[float]) -> float:
    """The beta >= 0 minimising ``sum(((alpha + beta S) / t - 1)^2)`` with alpha fixed."""
    sbb = sum((s / t) ** 2 for s, t in zip(sizes, times, strict=True))
    sb = sum((1 - alpha / t) * s / t for s, t in zip(sizes, times, strict=True))
    return max(0.0, sb / sbb) if sbb > 0 else 0.0
