"""The arithmetic of communication: the ring factor, the alpha-beta model, data-parallel balance.

Pure functions and small frozen results, no measuring (chapter 05):

* :func:`ring_factor` and :func:`bus_bandwidth`: nccl-tests' convention
  (``doc/PERFORMANCE.md``). An all-reduce of S bytes over n ranks makes every
  byte cross a link 2(n-1)/n times whatever the algorithm, so the *bus
  bandwidth* ``S / t x 2(n-1)/n`` can be set beside a link's spec bandwidth
  whatever n is, where the *algorithm bandwidth* ``S / t`` cannot.
* :class:`AlphaBeta` and :func:`fit_alpha_beta`: the latency-bandwidth model
  ``t(S) = alpha + beta S``. ``alpha`` is the fixed cost of one collective
  (software, synchronisation, the link's latency): the overhead regime of
  chapter 03 on a wire. ``1 / beta`` is the bandwidth a large message gets.
* :class:`DataParallelPrediction` and :func:`predict_data_parallel`: a
  data-parallel step computes ``6 x params`` FLOPs per sample (forward 2,
  backward 4) and all-reduces ``params x bytes per gradient``; so its
  *intensity*, FLOPs per byte communicated, grows with the batch per device,
  and below the *crossover batch* the link, not the chip, sets the pace.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from brrrlib import _fmt, hardware

__all__ = [
    "FLOPS_PER_PARAM_PER_SAMPLE",
    "AlphaBeta",
    "DataParallelPrediction",
    "bus_bandwidth",
    "fit_alpha_beta",
    "predict_data_parallel",
    "ring_factor",
]

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


def bus_bandwidth(nbytes: float, seconds: float, world_size: int) -> float:
    """nccl-tests' bus bandwidth of one all-reduce: ``nbytes / seconds x 2(n-1)/n`` (bytes/s)."""
    if not (seconds > 0 and nbytes >= 0):
        raise ValueError(f"need nbytes >= 0 and seconds > 0, got {nbytes!r} and {seconds!r}")
    return nbytes / seconds * ring_factor(world_size)


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
    which is linear in alpha and beta: two normal equations, solved in closed
    form. A negative alpha or beta (noise at one end) is clamped to zero and
    the other refitted alone.
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
    saa, sab, sbb = (
        sum(x * x for x in a),
        sum(x * y for x, y in zip(a, b, strict=True)),
        sum(y * y for y in b),
    )
    det = saa * sbb - sab * sab
    alpha = beta = -1.0
    if det > 0:
        alpha = (sum(a) * sbb - sum(b) * sab) / det
        beta = (saa * sum(b) - sab * sum(a)) / det
    if alpha < 0 or det <= 0:
        alpha, beta = 0.0, sum(b) / sbb if sbb > 0 else 0.0
    if beta < 0:
        alpha, beta = sum(a) / saa, 0.0
    return AlphaBeta(alpha, beta, world_size, tuple(sizes), tuple(times))


@dataclass(frozen=True, repr=False)
class DataParallelPrediction:
    """When data-parallel training on ``device`` over ``link`` is compute- or communication-bound.

    Per step, each device computes ``6 x params x batch`` FLOPs (at the
    spec's peak in ``dtype``) and all-reduces ``params x grad_bytes_per_param``
    bytes (a ring over ``world_size`` devices, at the link's one-way spec
    bandwidth). Both grow with ``params``, so their ratio does not depend on
    the model's size:

    * ``intensity_flops_per_byte(batch)``: FLOPs per byte communicated,
      ``6 batch / (2(n-1)/n x grad bytes)``, grows with the batch;
    * ``ridge_flops_per_byte``: peak FLOP/s over link bytes/s, the intensity
      at which compute and communication take equal time, as the roofline's
      ridge does for memory;
    * ``crossover_batch``: the batch per device at the ridge. Below it the
      link sets the pace; with the all-reduce overlapped with the backward
      pass (4 of the 6 FLOPs per parameter), below
      ``overlapped_crossover_batch`` it cannot be hidden.

    Peak FLOP/s is rarely reached, so real crossovers come at smaller batches
    (the chip is slower than its peak); latency (alpha) moves them up for
    small models. The JAX scaling book derives the same condition for TPUs
    ("How to Parallelize a Transformer for Training", data parallelism).
    """

    device: str
    link: str
    dtype: str
    peak_flops_per_s: float
    link_bytes_per_s: float
    world_size: int
    grad_bytes_per_param: float = 2.0

    @property
    def ridge_flops_per_byte(self) -> float:
        """FLOPs per byte communicated at which compute and the all-reduce take equal time."""
        return self.peak_flops_per_s / self.link_bytes_per_s

    def intensity_flops_per_byte(self, batch: float) -> float:
        """FLOPs per byte sent over the link, at ``batch`` samples per device."""
        moved = ring_factor(self.world_size) * self.grad_bytes_per_param
        return FLOPS_PER_PARAM_PER_SAMPLE * batch / moved

    @property
    def crossover_batch(self) -> float:
        """Samples (tokens) per device per step below which communication takes longer."""
        return self.ridge_flops_per_byte / self.intensity_flops_per_byte(1.0)

    @property
    def overlapped_crossover_batch(self) -> float:
        """The same when the all-reduce hides behind the backward pass (4/6 of the compute)."""
        return self.crossover_batch * FLOPS_PER_PARAM_PER_SAMPLE / 4

    def compute_s(self, batch: float, params: float) -> float:
        """Seconds of compute per step at the spec's peak."""
        return FLOPS_PER_PARAM_PER_SAMPLE * params * batch / self.peak_flops_per_s

    def comm_s(self, params: float) -> float:
        """Seconds of the gradient all-reduce per step at the link's spec bandwidth."""
        moved = ring_factor(self.world_size) * params * self.grad_bytes_per_param
        return moved / self.link_bytes_per_s

    def comm_share(self, batch: float) -> float:
        """The share of a non-overlapped step spent communicating, at ``batch`` per device."""
        return 1 / (1 + batch / self.crossover_batch)

    def _text(self) -> str:
        return (
            f"{self.device} ({self.dtype} peak {_fmt.si(self.peak_flops_per_s, 'FLOP/s')}) over "
            f"{self.link} ({_fmt.si(self.link_bytes_per_s, 'B/s')} each way), {self.world_size} "
            f"devices: ridge {self.ridge_flops_per_byte:,.0f} FLOP/B; communication-bound below "
            f"{self.crossover_batch:,.0f} samples per device per step "
            f"({self.overlapped_crossover_batch:,.0f} with the all-reduce overlapped)"
        )

    def __repr__(self) -> str:
        return f"DataParallelPrediction({self._text()})"

    def _repr_html_(self) -> str:
        return f"<div><b>predicted</b> (spec sheets): {html.escape(self._text())}</div>"


def predict_data_parallel(
    device: str,
    link: str,
    *,
    world_size: int = 64,
    dtype: str = "bf16",
    grad_bytes_per_param: float = 2.0,
) -> DataParallelPrediction:
    """Predict data-parallel balance from the spec table: ``device``'s peak, ``link``'s bandwidth.

    ``predict_data_parallel("H100", "NDR InfiniBand")``: gradients in bf16
    (2 bytes) across 64 GPUs, one 400 Gb/s port per GPU, as in a DGX H100
    cluster. Chapter 05 sets A100 and H100 clusters side by side, inside a
    node (NVLink) and across nodes (InfiniBand).
    """
    spec = hardware.spec(device)
    wire = hardware.link(link)
    ring_factor(world_size)  # validates
    if not grad_bytes_per_param > 0:
        raise ValueError(
            f"grad_bytes_per_param must be > 0 (2 for bf16), got {grad_bytes_per_param!r}"
        )
    return DataParallelPrediction(
        device=spec.name,
        link=wire.name,
        dtype=hardware.dtype_key(dtype),
        peak_flops_per_s=spec.peak(dtype),
        link_bytes_per_s=wire.bandwidth_bytes_per_s,
        world_size=world_size,
        grad_bytes_per_param=float(grad_bytes_per_param),
    )
