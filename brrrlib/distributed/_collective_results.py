"""The results of chapter 05's measurements: an all-reduce sweep and data-parallel steps."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from types import MappingProxyType
from typing import Any

from brrrlib import _fmt
from brrrlib.distributed._collectives_worker import MODES
from brrrlib.distributed._comm_model import AlphaBeta, fit_alpha_beta, ring_factor

__all__ = ["CollectiveSweep", "DataParallelRun", "GroupRun", "paired"]


def paired(a_s: Sequence[float], b_s: Sequence[float], labels: tuple[str, str] = ("B", "A")) -> Any:
    """``a_s`` over ``b_s``, round by round, as a :class:`brrrlib.Comparison` (``.says()``)."""
    from brrrlib.timing import Comparison, Timing

    pairs = [(a, b) for a, b in zip(a_s, b_s, strict=True) if b > 0]
    return Comparison(
        a=Timing([b for _, b in pairs], "", label=labels[1]),
        b=Timing([a for a, _ in pairs], "", label=labels[0]),
        ratios=tuple(a / b for a, b in pairs),
    )


@dataclass(frozen=True, kw_only=True)
class GroupRun:
    """Where a collective measurement ran: what both result types record beside their samples."""

    world_size: int
    backend: str
    device: str = "cpu"
    device_name: str = "cpu"
    launcher: str = "local processes"
    hosts: tuple[str, ...] = ()
    threads_per_process: int = 1
    verified: bool = False
    torch_version: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(self.hosts))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """A result from its ``to_dict`` output or a worker's raw result (unknown keys dropped)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def __repr__(self) -> str:
        table = _fmt.text_table(self._header(), self._rows(), "r" * len(self._header()))
        return f"{type(self).__name__}\n{table}\n{self._caption()}"

    def _repr_html_(self) -> str:
        return _fmt.html_table(self._header(), self._rows(), caption=self._caption())

    def where(self) -> str:
        """``4 processes (local processes, 1 machine), gloo on cpu, 1 thread(s) each``."""
        nodes = len(set(self.hosts)) or 1
        place = f"{nodes} nodes" if nodes > 1 else "1 machine"
        return (
            f"{self.world_size} processes ({self.launcher}, {place}), {self.backend} on "
            f"{self.device_name}, {self.threads_per_process} thread(s) each"
        )


@dataclass(frozen=True, repr=False)
class CollectiveSweep(GroupRun):
    """All-reduce time against message size, measured over ``world_size`` processes."""

    sizes_bytes: tuple[int, ...]
    samples_s: tuple[tuple[float, ...], ...]
    calls_per_sample: tuple[int, ...] = ()
    dtype: str = "float32"

    def __post_init__(self) -> None:
        sizes = tuple(int(s) for s in self.sizes_bytes)
        samples = tuple(tuple(float(x) for x in row) for row in self.samples_s)
        if len(sizes) != len(samples) or not sizes or not all(samples):
            raise ValueError("need one non-empty row of samples_s per size in sizes_bytes")
        if not all(math.isfinite(x) and x > 0 for row in samples for x in row):
            raise ValueError("samples_s must be positive, finite seconds")
        object.__setattr__(self, "sizes_bytes", sizes)
        object.__setattr__(self, "samples_s", samples)
        object.__setattr__(self, "calls_per_sample", tuple(self.calls_per_sample))
        super().__post_init__()

    # -- derived ---------------------------------------------------------------------
    @property
    def median_s(self) -> tuple[float, ...]:
        """Median seconds per all-reduce, per size."""
        return tuple(_fmt.median(row) for row in self.samples_s)

    @property
    def relative_iqr(self) -> tuple[float, ...]:
        """Spread per size: the interquartile range over the median."""
        return tuple(_fmt.iqr(row) / _fmt.median(row) for row in self.samples_s)

    @property
    def algbw_bytes_per_s(self) -> tuple[float, ...]:
        """nccl-tests' algorithm bandwidth per size: bytes / median time."""
        return tuple(n / t for n, t in zip(self.sizes_bytes, self.median_s, strict=True))

    @property
    def busbw_bytes_per_s(self) -> tuple[float, ...]:
        """nccl-tests' bus bandwidth per size: algbw x 2(n-1)/n."""
        return tuple(b * ring_factor(self.world_size) for b in self.algbw_bytes_per_s)

    @property
    def fit(self) -> AlphaBeta:
        """The alpha-beta model fitted to the medians (alpha: the small-message plateau's median)."""
        return fit_alpha_beta(self.sizes_bytes, self.median_s, self.world_size)

    def time_ratio(self, size_a: int, size_b: int) -> str:
        """How many times longer ``size_a`` takes than ``size_b``, paired by round, in words."""
        index = {n: i for i, n in enumerate(self.sizes_bytes)}
        if size_a not in index or size_b not in index:
            raise ValueError(f"both sizes must be among those measured: {self.sizes_bytes}")
        return paired(
            self.samples_s[index[size_a]],
            self.samples_s[index[size_b]],
            labels=(_fmt.binary_bytes(size_a), _fmt.binary_bytes(size_b)),
        ).says()

    @property
    def peak_busbw_bytes_per_s(self) -> float:
        """The highest bus bandwidth measured (usually at the largest sizes)."""
        return max(self.busbw_bytes_per_s)

    # -- rendering -------------------------------------------------------------------
    def _header(self) -> tuple[str, ...]:
        return ("size", "count", "type", "time", "spread", "algbw", "busbw", "model")

    def _rows(self) -> list[tuple[str, ...]]:
        fit = self.fit
        return [
            (
                _fmt.binary_bytes(n),
                f"{n // 4:,}",
                self.dtype,
                _fmt.seconds(t),
                f"{q:.0%}",
                _fmt.si(a, "B/s"),
                _fmt.si(b, "B/s"),
                _fmt.seconds(fit.time_s(n)),
            )
            for n, t, q, a, b in zip(
                self.sizes_bytes,
                self.median_s,
                self.relative_iqr,
                self.algbw_bytes_per_s,
                self.busbw_bytes_per_s,
                strict=True,
            )
        ]

    def _caption(self) -> str:
        check = "sums verified" if self.verified else "sums NOT verified"
        rounds = len(self.samples_s[0])
        return (
            f"all-reduce over {self.where()}; median of {rounds} rounds (slowest rank), "
            f"spread = IQR/median; {check}. Fit: {self.fit._text()}"
        )

    def plot(self, axes: Any = None) -> Any:
        """Two panels: time vs size with the fitted model, and bus bandwidth vs size; the axes."""
        import matplotlib.pyplot as plt

        if axes is None:
            _, axes = plt.subplots(1, 2, figsize=(11, 4))
        ax_t, ax_b = axes
        fit, sizes = self.fit, self.sizes_bytes
        self._plot_time(ax_t, sizes)
        ax_b.plot(sizes, [b / 1e9 for b in self.busbw_bytes_per_s], "o", label="measured busbw")
        ax_b.plot(
            sizes,
            [ring_factor(self.world_size) * n / fit.time_s(n) / 1e9 for n in sizes],
            "-",
            label="model busbw",
        )
        ax_b.set(
            xscale="log",
            yscale="log",
            xlabel="message size (bytes)",
            ylabel="bus bandwidth (GB/s)",
            title="Bus bandwidth = size / time x 2(n-1)/n",
        )
        ax_b.legend(fontsize=8)
        return axes

    def _plot_time(self, ax: Any, model_sizes: Sequence[float]) -> None:
        """Time against size: the medians with their IQR, the model over ``model_sizes``, alpha."""
        low = [_fmt.quantile(r, 0.25) * 1e6 for r in self.samples_s]
        high = [_fmt.quantile(r, 0.75) * 1e6 for r in self.samples_s]
        med = [t * 1e6 for t in self.median_s]
        below = [m - lo for m, lo in zip(med, low, strict=True)]
        above = [h - m for m, h in zip(med, high, strict=True)]
        ax.errorbar(
            self.sizes_bytes, med, yerr=[below, above], fmt="o", label="measured (median, IQR)"
        )
        model = [self.fit.time_s(n) * 1e6 for n in model_sizes]
        ax.plot(model_sizes, model, "-", label="alpha + beta x size")
        ax.axhline(self.fit.alpha_s * 1e6, ls=":", color="gray", label="alpha (latency)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="message size (bytes)",
            ylabel="time per all-reduce (µs)",
            title=f"All-reduce time, {self.world_size} processes, {self.backend}",
        )
        ax.legend(fontsize=8, loc="upper left")

    # -- JSON --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {"kind": "all_reduce", **asdict(self)}


@dataclass(frozen=True, repr=False)
class DataParallelRun(GroupRun):
    """Data-parallel training steps of a small model, per batch size and mode."""

    batches: tuple[int, ...]
    samples_s: Mapping[str, tuple[tuple[float, ...], ...]]
    allreduce_samples_s: tuple[float, ...]
    params: int
    grad_bytes: int
    model: Mapping[str, int]
    buckets: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        samples = {
            m: tuple(tuple(float(x) for x in row) for row in rows)
            for m, rows in dict(self.samples_s).items()
        }
        if not samples or any(len(rows) != len(self.batches) for rows in samples.values()):
            raise ValueError("samples_s needs one row per batch for every mode")
        object.__setattr__(self, "batches", tuple(int(b) for b in self.batches))
        object.__setattr__(self, "samples_s", MappingProxyType(samples))
        object.__setattr__(
            self, "allreduce_samples_s", tuple(float(x) for x in self.allreduce_samples_s)
        )
        object.__setattr__(self, "model", MappingProxyType(dict(self.model)))
        object.__setattr__(self, "buckets", MappingProxyType(dict(self.buckets)))
        super().__post_init__()

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes measured, in order."""
        return tuple(self.samples_s)

    def step_s(self, mode: str) -> tuple[float, ...]:
        """Median seconds per step in ``mode``, per batch."""
        if mode not in self.samples_s:
            raise ValueError(
                f"mode must be one of {', '.join(map(repr, self.modes))}, got {mode!r}"
            )
        return tuple(_fmt.median(row) for row in self.samples_s[mode])

    @property
    def compute_s(self) -> tuple[float, ...]:
        """Median seconds per step with no communication, per batch."""
        return self.step_s(MODES[0])

    @property
    def comm_s(self) -> float:
        """Median seconds of the gradient all-reduce on its own."""
        return _fmt.median(self.allreduce_samples_s)

    def exposed_comm_s(self, mode: str) -> tuple[float, ...]:
        """Seconds a step in ``mode`` spends beyond compute, per batch (paired by round)."""
        return tuple(
            _fmt.median([s - c for s, c in zip(row, base, strict=True)])
            for row, base in zip(self.samples_s[mode], self.samples_s[MODES[0]], strict=True)
        )

    def ratio_says(self, mode: str, base: str = MODES[1]) -> tuple[str, ...]:
        """Per batch: ``mode``'s time over ``base``'s, paired by round, in words with an interval."""
        return tuple(
            paired(row, ref, labels=(mode, base)).says()
            for row, ref in zip(self.samples_s[mode], self.samples_s[base], strict=True)
        )

    @property
    def measured_crossover_batch(self) -> float | None:
        """The batch at which compute equals the exposed all-reduce time (no overlap)."""
        comm = self.exposed_comm_s(MODES[1])
        ratio = [c / max(x, 1e-12) for c, x in zip(self.compute_s, comm, strict=True)]
        for i in range(1, len(ratio)):
            if ratio[i - 1] < 1 <= ratio[i]:
                x0, x1 = math.log(self.batches[i - 1]), math.log(self.batches[i])
                y0, y1 = math.log(ratio[i - 1]), math.log(ratio[i])
                return math.exp(x0 + (x1 - x0) * (0 - y0) / (y1 - y0))
        return None

    # -- rendering -------------------------------------------------------------------
    def _rows(self) -> list[tuple[str, ...]]:
        cols = [self.compute_s, *(self.step_s(m) for m in self.modes[1:])]
        exposed = self.exposed_comm_s(MODES[1])
        return [
            (str(b), *(_fmt.seconds(c[i]) for c in cols), _fmt.percent(exposed[i], cols[1][i]))
            for i, b in enumerate(self.batches)
        ]

    def _caption(self) -> str:
        found = self.measured_crossover_batch
        cross = f"about {found:.0f}" if found else "outside the batches measured"
        buckets = ", ".join(f"{m}: {n} bucket(s)" for m, n in self.buckets.items() if n)
        return (
            f"{_fmt.si(self.params)} parameters, {_fmt.binary_bytes(self.grad_bytes)} of gradients; "
            f"their all-reduce alone {_fmt.seconds(self.comm_s)}; {self.where()}; {buckets}. "
            f"Compute equals communication at batch {cross}."
        )

    def _header(self) -> tuple[str, ...]:
        return ("batch", *self.modes, "comm share (no overlap)")

    def plot(self, ax: Any = None, *, predicted_crossover: float | None = None) -> Any:
        """Step time against batch per process for every mode, the all-reduce alone, the crossovers."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(8, 4.5))
        for mode, marker in zip(self.modes, "os^", strict=False):
            ax.plot(self.batches, [t * 1e3 for t in self.step_s(mode)], marker=marker, label=mode)
        ax.axhline(self.comm_s * 1e3, ls=":", color="gray", label="gradient all-reduce alone")
        for x, ls, how in (
            (self.measured_crossover_batch, "-", "measured"),
            (predicted_crossover, "--", "predicted"),
        ):
            if x:
                ax.axvline(x, color="black", lw=1, ls=ls, label=f"crossover, {how}")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="batch per process (samples)",
            ylabel="time per step (ms)",
            title=f"Data-parallel steps over {self.world_size} processes ({self.backend})",
        )
        ax.legend(fontsize=8)
        return ax

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data.update(
            samples_s={m: [list(r) for r in rows] for m, rows in self.samples_s.items()},
            model=dict(self.model),
            buckets=dict(self.buckets),
        )
        return {"kind": "data_parallel", **data}
