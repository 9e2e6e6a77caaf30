"""The latency-bandwidth model of a collective, and nccl-tests' ring factor (chapter 05).

* :class:`AlphaBeta` and :func:`fit_alpha_beta`: the model
  ``t(S) = alpha + beta S`` fitted to a measured sweep. ``alpha`` is the fixed
  cost of one collective (software, synchronisation, the link's latency): the
  overhead regime of chapter 03 on a wire. ``1 / beta`` is the bandwidth a
  large message gets.
* :func:`ring_factor`: ``2(n-1)/n``, how nccl-tests turns the algorithm
  bandwidth of an all-reduce into the bus bandwidth (``doc/PERFORMANCE.md``);
  the sweep's table and plot use it.

What the chapter teaches with them (bus bandwidth, the data-parallel
crossover, the all-reduce across nodes) is worked in the chapter's cells.
"""

from __future__ import annotations

import html
import math
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
    """``2 (n - 1) / n``: how many times each byte of an all-reduce crosses a link.

    A ring all-reduce is a reduce-scatter (n - 1 steps, each moving 1/n of
    the data) then an all-gather (n - 1 more). nccl-tests multiplies the
    algorithm bandwidth by this factor to get the bus bandwidth. 1 for two
    ranks, 1.75 for eight, approaching 2 for many.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a whole number >= 1, got {world_size!r}")
    return 2 * (world_size - 1) / world_size


@dataclass(frozen=True, repr=False)
class AlphaBeta:
    """The latency-bandwidth model of a collective: ``t(S) = alpha_s + beta_s_per_byte x S``.

    Made by :func:`fit_alpha_beta` from measured (size, time) points, which it
    keeps. ``half_bandwidth_bytes`` (``alpha / beta``) is the message size at
    which the fixed cost and the bandwidth term are equal: a message that
    size gets half of ``algorithm_bytes_per_s``; much smaller ones are
    latency-bound (time barely depends on size, like an overhead-bound op),
    much larger ones bandwidth-bound.
    """

    alpha_s: float
    beta_s_per_byte: float
    world_size: int
    sizes_bytes: tuple[float, ...] = ()
    times_s: tuple[float, ...] = ()

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

    def _text(self) -> str:
        return (
            f"alpha {_fmt.seconds(self.alpha_s)}, beta {_fmt.seconds(self.beta_s_per_byte * 1e6)} "
            f"per MB ({_fmt.si(self.algorithm_bytes_per_s, 'B/s')} algorithm, "
            f"{_fmt.si(self.bus_bytes_per_s, 'B/s')} bus bandwidth, n={self.world_size}); "
            f"half bandwidth at {_fmt.binary_bytes(self.half_bandwidth_bytes)}; "
            f"worst misfit {self.max_relative_error:.0%} over {len(self.times_s)} sizes"
        )

    def __repr__(self) -> str:
        return f"AlphaBeta({self._text()})"

    def _repr_html_(self) -> str:
        return f"<div><b>t(S) = &alpha; + &beta;S</b>: {html.escape(self._text())}</div>"


def fit_alpha_beta(
    sizes_bytes: Sequence[float], times_s: Sequence[float], world_size: int = 2
) -> AlphaBeta:
    """Fit ``t = alpha + beta S`` to measured times, each point weighted by its own size.

    Times of a sweep span four orders of magnitude. An ordinary least-squares
    fit minimises *absolute* errors, so the largest messages would decide
    everything and alpha would come out as noise (even negative). This fit
    minimises *relative* errors instead, ``sum((alpha + beta S_i) / t_i - 1)^2``,
    a quadratic in alpha and beta, under three constraints that the model
    itself sets:

    * ``alpha >= 0`` and ``beta >= 0``: neither a fixed cost nor a cost per
      byte can be negative;
    * ``alpha <= min(t_i)``: alpha is the time of a message that carries
      nothing, so no all-reduce that was measured can have taken less. On a
      busy machine the small messages' medians scatter (a process waits for a
      core), and an unconstrained fit can put alpha above the fastest of them.

    The minimum lies inside those bounds or on one of their edges: the fit
    solves the two normal equations, then each edge with one term fixed, and
    keeps the feasible candidate with the smallest error.
    """
    sizes = [float(s) for s in sizes_bytes]
    times = [float(t) for t in times_s]
    if len(sizes) != len(times) or len(sizes) < 2:
        raise ValueError(
            f"need at least 2 (size, time) pairs of equal length, got {len(sizes)} and {len(times)}"
        )
    if not all(t > 0 and math.isfinite(t) for t in times) or not all(s >= 0 for s in sizes):
        raise ValueError("times_s must be positive and finite, sizes_bytes >= 0")
    a = [1 / t for t in times]  # d(relative error)/d(alpha)
    b = [s / t for s, t in zip(sizes, times, strict=True)]  # d(relative error)/d(beta)
    saa = sum(x * x for x in a)
    sab = sum(x * y for x, y in zip(a, b, strict=True))
    sbb = sum(y * y for y in b)
    sa, sb, top = sum(a), sum(b), min(times)

    def error(alpha: float, beta: float) -> float:
        return sum((alpha * x + beta * y - 1) ** 2 for x, y in zip(a, b, strict=True))

    def beta_given(alpha: float) -> float:  # the best beta >= 0 with alpha fixed
        return max(0.0, (sb - alpha * sab) / sbb) if sbb > 0 else 0.0

    candidates = [(0.0, beta_given(0.0)), (top, beta_given(top))]  # the edges alpha = 0, = min
    candidates.append((min(top, max(0.0, sa / saa)), 0.0))  # the edge beta = 0
    det = saa * sbb - sab * sab
    if det > 0:  # the normal equations, kept when inside the bounds
        alpha, beta = (sa * sbb - sb * sab) / det, (saa * sb - sab * sa) / det
        if 0 <= alpha <= top and beta >= 0:
            candidates.append((alpha, beta))
    alpha, beta = min(candidates, key=lambda ab: error(*ab))
    return AlphaBeta(alpha, beta, world_size, tuple(sizes), tuple(times))
