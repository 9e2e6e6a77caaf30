"""The alpha-beta model of a collective, nccl-tests' ring factor, and what every result shares."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from brrrlib import _checks, _fmt

__all__ = ["FLOPS_PER_PARAM_PER_SAMPLE", "AlphaBeta", "fit_alpha_beta", "ring_factor"]

#: Training FLOPs per parameter per sample (token): 2 forward (a multiply and an add per
#: weight), 4 backward (input and weight gradients); Kaplan et al. 2020, section 2.1.
FLOPS_PER_PARAM_PER_SAMPLE = 6


def ring_factor(world_size: int) -> float:
    """``2 (n - 1) / n``: how many times each byte of an all-reduce crosses a link."""
    return 2 * (world_size - 1) / world_size


@dataclass(frozen=True, repr=False)
class AlphaBeta(_fmt.Table):
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
        return self.alpha_s * self.algorithm_bytes_per_s

    @property
    def _ratios(self) -> list[tuple[float, float]]:
        """``(size, model / measured)`` of every fitted size."""
        pairs = zip(self.sizes_bytes, self.times_s, strict=True)
        return [(n, self.time_s(n) / t) for n, t in pairs]

    @property
    def max_relative_error(self) -> float:
        """The worst ``|model - measured| / measured`` over the fitted points."""
        return max((abs(r - 1) for _, r in self._ratios), default=math.nan)

    @property
    def misfits(self) -> tuple[tuple[float, float], ...]:
        """``(size, model / measured)`` of every fitted size the model misses by over half."""
        return tuple((n, r) for n, r in self._ratios if abs(r - 1) > 0.5)

    def _table(self) -> tuple:
        bandwidths = (_fmt.si(b, "B/s") for b in (self.algorithm_bytes_per_s, self.bus_bytes_per_s))
        row = (
            _fmt.seconds(self.alpha_s),
            *bandwidths,
            _fmt.binary_bytes(self.half_bandwidth_bytes),
        )
        row += (str(self.plateau_sizes), f"{self.max_relative_error:.0%}")
        row += (str(self.world_size), str(len(self.times_s)))
        header = ("alpha", "1/beta", "busbw", "alpha/beta", "plateau_sizes", "max_relative_error")
        return ["AlphaBeta"], (*header, "world_size", "sizes"), [row], "rrrrrrrr"


def fit_alpha_beta(
    sizes_bytes: Sequence[float], times_s: Sequence[float], world_size: int
) -> AlphaBeta:
    """Fit ``t = alpha + beta S``: alpha from the small-message plateau, beta from large messages."""
    sizes, times = tuple(map(float, sizes_bytes)), tuple(map(float, times_s))
    points = sorted(zip(sizes, times, strict=True))
    _checks.some("sizes_bytes", points, "all_reduce_sweep().sizes_bytes", least=2)
    # 1. a first beta from the two largest messages
    (s0, t0), (s1, t1) = points[-2:]
    beta = (t1 - t0) / (s1 - s0) if s1 > s0 and t1 > t0 else (t1 / s1 if s1 > 0 else 0.0)
    # 2. alpha: the median over the plateau, the sizes whose bytes cost under a tenth of their time
    plateau = [(s, t) for s, t in points if beta * s < 0.1 * t] or points[:1]
    alpha = max(0.0, statistics.median(t - beta * s for s, t in plateau))
    # 3. beta again, alpha fixed: minimise sum(((alpha + beta S) / t - 1)^2) over the large sizes
    large = [(s / t, 1 - alpha / t) for s, t in points if t > 2 * alpha and s > 0]
    large = large or [(s1 / t1, 1 - alpha / t1)]
    sxx = sum(x * x for x, _ in large)
    beta = max(0.0, sum(x * y for x, y in large) / sxx) if sxx > 0 else 0.0
    return AlphaBeta(alpha, beta, world_size, sizes, times, len(plateau))
