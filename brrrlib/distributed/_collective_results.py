"""The results of chapter 05's measurements: an all-reduce sweep and data-parallel steps."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from brrrlib import _checks, _fmt
from brrrlib.distributed._collectives_worker import MODES
from brrrlib.distributed._comm_model import AlphaBeta, fit_alpha_beta, ring_factor
from brrrlib.timing import Comparison, Timing

__all__ = ["CollectiveSweep", "DataParallelRun", "GroupRun"]

_WHERE = ("world_size", "backend", "device_name", "threads_per_process")


def _paired(a_s: Sequence[float], b_s: Sequence[float], labels: tuple[str, str]) -> str:
    """``a_s`` over ``b_s``, round by round, said as a :class:`brrrlib.Comparison` says it."""
    ratios = tuple(a / b for a, b in zip(a_s, b_s, strict=True))
    a, b = Timing(b_s, "", label=labels[1]), Timing(a_s, "", label=labels[0])
    return Comparison(a=a, b=b, ratios=ratios).says()


def _frozen(value: Any) -> Any:
    """Lists (as JSON gives them) made tuples, all the way down."""
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    return tuple(map(_frozen, value)) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True, repr=False, kw_only=True)
class GroupRun(_fmt.Table):
    """Where a collective measurement ran: what both result types record beside their samples."""

    kind: ClassVar[str] = ""
    world_size: int
    backend: str
    device: str = "cpu"
    device_name: str = "cpu"
    launcher: str = "elastic_launch"  # torch's API under torchrun, called here; or "torchrun"
    hosts: tuple[str, ...] = ()
    threads_per_process: int = 1
    verified: bool = False
    torch_version: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, _frozen(getattr(self, f.name)))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """A result from its ``to_dict`` output or a worker's raw result (unknown keys dropped)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {"kind": self.kind, **asdict(self)}

    def where(self, **more: Any) -> str:
        """``world_size=2, backend=gloo, ..., nodes=1``, then ``more``: a result's title."""
        said = {k: getattr(self, k) for k in _WHERE} | {"nodes": len(set(self.hosts)) or 1}
        return ", ".join(f"{k}={v}" for k, v in {**said, **more}.items())


@dataclass(frozen=True, repr=False)
class CollectiveSweep(GroupRun):
    """All-reduce time against message size, measured over ``world_size`` processes."""

    kind: ClassVar[str] = "all_reduce"
    sizes_bytes: tuple[int, ...]
    samples_s: tuple[tuple[float, ...], ...]  # per size: seconds per call, one per round
    calls_per_sample: tuple[int, ...] = ()
    dtype: str = "float32"

    def __post_init__(self) -> None:
        super().__post_init__()
        rows = len(self.samples_s) == len(self.sizes_bytes) and all(self.samples_s)
        if not rows or not all(math.isfinite(x) and x > 0 for row in self.samples_s for x in row):
            raise ValueError("samples_s needs a row of positive, finite seconds per size")

    @property
    def median_s(self) -> tuple[float, ...]:
        """Median seconds per all-reduce, per size."""
        return tuple(map(_fmt.median, self.samples_s))

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
    def peak_busbw_bytes_per_s(self) -> float:
        """The highest bus bandwidth measured (usually at the largest sizes)."""
        return max(self.busbw_bytes_per_s)

    @property
    def fit(self) -> AlphaBeta:
        """The alpha-beta model fitted to the medians (alpha: the small-message plateau's median)."""
        return fit_alpha_beta(self.sizes_bytes, self.median_s, self.world_size)

    def time_ratio(self, size_a: int, size_b: int) -> str:
        """How many times longer ``size_a`` takes than ``size_b``, paired by round, in words."""
        _checks.one_of("size_a", size_a, self.sizes_bytes)
        _checks.one_of("size_b", size_b, self.sizes_bytes)
        a, b = (self.samples_s[self.sizes_bytes.index(n)] for n in (size_a, size_b))
        return _paired(a, b, (_fmt.binary_bytes(size_a), _fmt.binary_bytes(size_b)))

    def _table(self) -> tuple:
        # time: the median over rounds of the slowest rank; spread: IQR / median; model: self.fit
        columns = (self.median_s, self.relative_iqr, self.algbw_bytes_per_s, self.busbw_bytes_per_s)
        rows = [
            (_fmt.binary_bytes(n), f"{n // 4:,}", self.dtype, _fmt.seconds(t), f"{q:.0%}")
            + (_fmt.si(a, "B/s"), _fmt.si(b, "B/s"), _fmt.seconds(self.fit.time_s(n)))
            for n, t, q, a, b in zip(self.sizes_bytes, *columns, strict=True)
        ]
        where = self.where(rounds=len(self.samples_s[0]), verified=self.verified)
        header = ("size", "count", "type", "time", "spread", "algbw", "busbw", "model")
        return [f"CollectiveSweep: {where}"], header, rows, "lrrrrrrr"

    def plot(self) -> Any:
        """Two panels: time vs size with the fitted model, and bus bandwidth vs size; the axes."""
        import matplotlib.pyplot as plt

        ax_t, ax_b = plt.subplots(1, 2, figsize=(11, 4))[1]
        self.plot_time(ax_t, self.sizes_bytes)
        sizes, factor = self.sizes_bytes, ring_factor(self.world_size)
        ax_b.plot(sizes, [b / 1e9 for b in self.busbw_bytes_per_s], "o", label="measured")
        ax_b.plot(sizes, [factor * n / self.fit.time_s(n) / 1e9 for n in sizes], label="model")
        ax_b.set(xscale="log", yscale="log", xlabel="message size (bytes)", ylabel="busbw (GB/s)")
        ax_b.legend(fontsize=8)
        return ax_t, ax_b

    def plot_time(self, ax: Any, model_sizes: Sequence[float]) -> None:
        """Time against size: the medians with their IQR, the model over ``model_sizes``, alpha."""
        med = [t * 1e6 for t in self.median_s]
        low = [m - _fmt.quantile(r, 0.25) * 1e6 for m, r in zip(med, self.samples_s, strict=True)]
        high = [_fmt.quantile(r, 0.75) * 1e6 - m for m, r in zip(med, self.samples_s, strict=True)]
        ax.errorbar(self.sizes_bytes, med, yerr=[low, high], fmt="o", label="measured")
        model = [self.fit.time_s(n) * 1e6 for n in model_sizes]
        ax.plot(model_sizes, model, "-", label="model")
        ax.axhline(self.fit.alpha_s * 1e6, ls=":", color="gray", label="alpha")
        ax.set(xscale="log", yscale="log", title=f"{self.world_size} x {self.backend}")
        ax.set(xlabel="message size (bytes)", ylabel="time per all-reduce (µs)")
        ax.legend(fontsize=8)


@dataclass(frozen=True, repr=False)
class DataParallelRun(GroupRun):
    """Data-parallel training steps of a small model, per batch size and mode."""

    kind: ClassVar[str] = "data_parallel"
    batches: tuple[int, ...]
    samples_s: dict[str, tuple[tuple[float, ...], ...]]  # per mode: per batch, one per round
    allreduce_samples_s: tuple[float, ...]
    params: int
    grad_bytes: int
    model: dict[str, int]
    buckets: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.samples_s or any(len(r) != len(self.batches) for r in self.samples_s.values()):
            raise ValueError("samples_s needs one row per batch for every mode")

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes measured, in order."""
        return tuple(self.samples_s)

    def step_s(self, mode: str) -> tuple[float, ...]:
        """Median seconds per step in ``mode``, per batch."""
        return tuple(map(_fmt.median, self.samples_s[_checks.one_of("mode", mode, self.modes)]))

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

    def ratio_says(self, mode: str) -> tuple[str, ...]:
        """Per batch: ``mode``'s time over all-reduce after backward's, paired by round, in words."""
        pairs = zip(self.samples_s[mode], self.samples_s[MODES[1]], strict=True)
        return tuple(_paired(row, ref, (mode, MODES[1])) for row, ref in pairs)

    @property
    def measured_crossover_batch(self) -> float | None:
        """The batch at which compute equals the exposed all-reduce time (no overlap)."""
        comm = self.exposed_comm_s(MODES[1])
        logs = [
            (math.log(b), math.log(c / max(x, 1e-12)))
            for b, c, x in zip(self.batches, self.compute_s, comm, strict=True)
        ]
        for (x0, y0), (x1, y1) in zip(logs, logs[1:], strict=False):
            if y0 < 0 <= y1:  # compute / communication crosses 1 here: interpolate in log-log
                return math.exp(x0 - y0 * (x1 - x0) / (y1 - y0))
        return None

    def _table(self) -> tuple:
        # exposed: the share of a step (all-reduce after backward) spent beyond compute
        cols, exposed = [self.step_s(m) for m in MODES], self.exposed_comm_s(MODES[1])
        rows = [
            (str(b), *(_fmt.seconds(c[i]) for c in cols), _fmt.percent(exposed[i], cols[1][i]))
            for i, b in enumerate(self.batches)
        ]
        found = self.measured_crossover_batch
        more = {"params": _fmt.si(self.params), "comm_s": _fmt.seconds(self.comm_s)}
        title = f"DataParallelRun: {self.where(**more, crossover=f'{found:.0f}' if found else '-')}"
        return [title], ("batch", *MODES, "exposed"), rows, "lrrrr"

    def plot(self, *, predicted_crossover: float | None = None) -> Any:
        """Step time against batch per process for every mode, the all-reduce alone, the crossovers."""
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(8, 4.5))[1]
        for mode, marker in zip(self.modes, "os^", strict=False):
            ax.plot(self.batches, [t * 1e3 for t in self.step_s(mode)], marker=marker, label=mode)
        ax.axhline(self.comm_s * 1e3, ls=":", color="gray", label="comm_s")
        crossovers = {"measured": self.measured_crossover_batch, "predicted": predicted_crossover}
        for (how, x), ls in zip(crossovers.items(), ("-", "--"), strict=True):
            if x:
                ax.axvline(x, color="black", lw=1, ls=ls, label=f"crossover, {how}")
        ax.set(xscale="log", yscale="log", title=f"{self.world_size} x {self.backend}")
        ax.set(xlabel="batch per process (samples)", ylabel="time per step (ms)")
        ax.legend(fontsize=8)
        return ax
