"""The batch-size explorer of chapter 03: does doubling the batch double the time?"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from brrrlib import _checks, _fmt, hardware, machine, sweeps
from brrrlib.ceilings import measure_ceilings
from brrrlib.sweeps import Case, Point, Sweep
from brrrlib.widgets import _experiments
from brrrlib.widgets._experiments import model_device
from brrrlib.widgets._explorer import COLOURS, _Explorer, legend_below, offered, peak, slider

__all__ = ["BatchExplorer", "Doubling", "batch_explorer"]

#: The knee: the batch where the fixed cost equals the work. Doubling a batch b there
#: costs (F + 2F) / (F + F) = x1.5 time; below it less, above it more.
KNEE_RATIO = 1.5
#: A fixed cost at least this share of the call is the call's time: the fixed cost's cause names
#: the regime (overhead, or reading the weights) only then.
FIXED_DOMINATES = 0.5


@dataclass(frozen=True)
class Doubling:
    """What doubling the batch ``batch // 2 -> batch`` did, read from its paired comparison."""

    batch: int
    ratio: float
    low: float
    high: float
    narrow: bool
    versus_double: str
    reading: str

    @property
    def fixed_share(self) -> tuple[float, float, float]:
        """``(share, low, high)``: the fixed cost's share of the smaller call, ``2 - ratio``."""
        return 2 - self.ratio, 2 - self.high, 2 - self.low


def read_doubling(batch: int, cmp: Any, weights_share: float) -> Doubling:
    """Read one doubling (pure): ``cmp`` is batch ``batch`` against ``batch // 2``."""
    versus = cmp.versus(2.0)
    lo, hi = 2 - cmp.high, 2 - cmp.low  # the fixed cost's share of the smaller call
    if not cmp.decided or cmp.waited:
        reading = "can't tell"
    elif cmp.direction == "faster" or versus == "above":
        reading = "other code"
    elif versus == "below" and lo > FIXED_DOMINATES:
        reading = "weights" if weights_share >= FIXED_DOMINATES else "overhead"
    elif versus == "below" and hi < FIXED_DOMINATES:
        reading = "work"
    elif versus == "can't tell" and cmp.narrow:
        reading = "work"  # twice the time, within a narrow interval
    elif cmp.narrow:
        reading = "knee"
    else:
        reading = "can't tell"
    return Doubling(batch, cmp.ratio, cmp.low, cmp.high, cmp.narrow, versus, reading)


def _default_mlp(ceilings: Any, device: torch.device) -> nn.Module:
    """A 4-layer MLP (Linear, ReLU, ...) whose predicted knee falls near batch 32."""
    w = math.sqrt(ceilings.op_overhead_s * ceilings.matmul_flops_per_s / 32)
    w = min(4096, max(128, 2 ** round(math.log2(max(w, 1)))))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers: list[nn.Module] = []
        for i in range(4):
            layers += [nn.Linear(w, w)] + ([nn.ReLU()] if i < 3 else [])
    return nn.Sequential(*layers).to(device).eval()


def _precision(dtype: torch.dtype, device: torch.device) -> str:
    """The matmul precision a model of ``dtype`` runs in; fp32 is TF32 where CUDA is allowed it."""
    key = hardware.dtype_key(dtype)
    if (
        key == "fp32"
        and device.type == "cuda"
        and torch.get_float32_matmul_precision() != "highest"
    ):
        return "tf32"
    return key


class BatchExplorer(_Explorer):
    """The batch-size experiment of chapter 03, as a slider and a live plot."""

    _css_class = "brrr-batch-explorer"
    _name = "batch explorer"
    _figsize = (10, 4.2)

    def __init__(
        self,
        *,
        model: nn.Module | None = None,
        max_batch: int | None = None,
        device: str | torch.device | None = None,
        batch: int = 1,
        make_input: Callable[[int], torch.Tensor] | None = None,
        ceilings: Any = None,
        setup: Callable[..., Case] | None = None,
    ) -> None:
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        batch = _checks.positive_int("batch", batch)
        default = model_device(model) if model is not None else machine.device()
        self.device = machine.resolve(device) if device is not None else default
        self.ceilings = ceilings if ceilings is not None else measure_ceilings(self.device)
        self.model = model if model is not None else _default_mlp(self.ceilings, self.device)
        if model_device(self.model).type != self.device.type:
            raise ValueError(
                f"model is on {model_device(self.model)} but device={str(self.device)!r}; "
                f"move it first: model.to({str(self.device)!r})"
            )
        make, self._sample_bytes = _experiments.checked_input_maker(self.model, make_input)
        self._setup = setup or (
            lambda *, batch, device: _experiments.batch_case(self.model, batch, make, device)
        )
        dtype = next((p.dtype for p in self.model.parameters() if p.is_floating_point()), None)
        self.precision = _precision(dtype or torch.float32, self.device)
        self._peak, self._peak_note = peak(self.ceilings, self.precision)
        self.sweep = Sweep("batch", "batch size (samples per call)", ())
        self._version = 0
        self.batch_options = self._batch_menu(max_batch)
        offered("batch", batch, self.batch_options)
        self._batch_w = slider("batch", self.batch_options, batch)
        self._build([self._batch_w])

    def _batch_menu(self, max_batch: int | None) -> tuple[int, ...]:
        """Powers of two up to ``max_batch`` (default 4096 on a CPU, 65536 on a GPU, less if short)."""
        if max_batch is None:
            max_batch = 4096 if self.device.type == "cpu" else 65536
            free = machine.available_memory_bytes(self.device)
            while (
                max_batch > 1 and max_batch * self._sample_bytes > sweeps.MEMORY_HEADROOM * free / 4
            ):
                max_batch //= 2
        max_batch = _checks.positive_int("max_batch", max_batch)
        return tuple(sorted({*(2**k for k in range(max_batch.bit_length())), max_batch}))

    # -- state ----------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """The batch size under the slider."""
        return self._batch_w.value

    @property
    def points(self) -> tuple[Point, ...]:
        """Every measured point, by batch."""
        return tuple(p for p in self.sweep.line("batch") if p.measured)

    @property
    def current(self) -> Point | None:
        """The measured point under the slider, or None (refused or failed)."""
        p = self.sweep.point(self.batch, "batch")
        return p if p is not None and p.measured else None

    def set(self, *, batch: int) -> Point | None:
        """Move the slider from code and measure if needed; returns the current point."""
        offered("batch", batch, self.batch_options)
        self._move([(self._batch_w, batch)])
        return self._update()

    def remeasure(self) -> Point | None:
        """Forget the current batch and its pairing with half of it, and measure both again."""
        self.sweep = self.sweep.without([(self.batch, "batch")])
        self._version += 1
        return self._update()

    # -- measuring ------------------------------------------------------------------
    def _update(self) -> Point | None:
        b = self.batch
        if self.current is None or (b > 1 and self._doubled(b) is None):
            half = f", together with batch {b // 2}" if b > 1 else ""
            self._say(f"batch {b} · measuring{half}…", busy=True)
            res = self._safely(f"batch {b}", lambda: self._measure(b))
            if res is not None:
                self.sweep, self._version = res, self._version + 1
        point, missing = self.current, self.sweep.point(b, "batch")
        if point is not None:
            self._clear_error()
            self._say(self._describe(point, self._doubled(b)))
        elif missing is not None:
            self._fail(f"batch {b}: {missing.reason}")
        self._redraw()
        return point

    def _measure(self, batch: int) -> Sweep:
        """``batch`` into the sweep, and half of it with it, in alternating rounds."""
        return sweeps.sweep(
            "batch",
            [batch],
            ["batch"],
            lambda x, _line: self._setup(batch=x, device=self.device),
            pairs=[((batch // 2, "batch"), (batch, "batch"))] if batch > 1 else [],
            memory=lambda x, _line: x * self._sample_bytes,
            device=self.device,
            into=self.sweep,
        )

    # -- the model --------------------------------------------------------------------
    def _model_lines(self) -> dict[str, Any] | None:
        """Per-batch costs from the roofline model, scaled from the largest measured point."""
        if not self.points:
            return None
        ref, c = self.points[-1], self.ceilings
        bw = c.mem_bandwidth_bytes_per_s
        flops_per_sample = ref.flops / ref.x
        act_per_sample = max(0, ref.bytes_moved - ref.weight_bytes) / ref.x
        overhead_s, weights_s = ref.ops * c.op_overhead_s, ref.weight_bytes / bw
        per_sample_s = max(flops_per_sample / self._peak, act_per_sample / bw)
        return {
            f"overhead floor ({ref.ops} ops × op overhead)": lambda b: overhead_s,
            "reading the weights (weights ÷ bandwidth)": lambda b: weights_s,
            f"compute (FLOPs ÷ {self.precision} matmul peak)": lambda b: (
                b * flops_per_sample / self._peak
            ),
            "memory (bytes ÷ bandwidth)": lambda b: weights_s + b * act_per_sample / bw,
            "knee": max(overhead_s, weights_s) / per_sample_s if per_sample_s > 0 else math.inf,
        }

    @property
    def model_knee(self) -> float:
        """The batch where the model's per-sample work overtakes its fixed cost (inf if none)."""
        model = self._model_lines()
        return math.inf if model is None else model["knee"]

    def doubling(self, batch: int | None = None) -> Doubling | None:
        """The reading of ``batch // 2 -> batch`` (default: the slider's), or None if not measured."""
        b = self.batch if batch is None else batch
        cmp = self._doubled(b)
        half = self.sweep.point(b // 2, "batch")
        if cmp is None or half is None or not half.measured:
            return None
        weights_s = half.weight_bytes / self.ceilings.mem_bandwidth_bytes_per_s
        return read_doubling(b, cmp, weights_s / half.median_s)

    @property
    def measured_knee(self) -> tuple[int, int] | None:
        """``(low, high)``: two neighbouring doublings put the knee between these batches."""
        for p in self.points:
            first, second = self._doubled(p.x), self._doubled(2 * p.x)
            if first is None or second is None or first.waited or second.waited:
                continue
            if first.versus(KNEE_RATIO) == "below" and second.versus(KNEE_RATIO) == "above":
                return p.x // 2, p.x
        return None

    def _doubled(self, b: int) -> Any:
        """The paired comparison of batch ``b // 2`` with ``b`` (None: not measured, or b = 1)."""
        return self.sweep.comparison((b // 2, "batch"), (b, "batch")) if b > 1 else None

    def _costs(self, p: Point) -> str:
        """The sentence that states the weights' reading time and the ops' overhead."""
        c = self.ceilings
        weights_s, overhead_s = (
            p.weight_bytes / c.mem_bandwidth_bytes_per_s,
            p.ops * c.op_overhead_s,
        )
        return (
            f"bl.count: the weights are {_fmt.binary_bytes(p.weight_bytes)}, "
            f"{_fmt.percent(p.weight_bytes, p.bytes_moved)} of the {_fmt.binary_bytes(p.bytes_moved)}"
            f" moved; reading them takes ≥ {_fmt.seconds(weights_s)} at "
            f"{_fmt.si(c.mem_bandwidth_bytes_per_s, 'B/s')}; {p.ops} ops × "
            f"{_fmt.seconds(c.op_overhead_s)} op overhead ≥ {_fmt.seconds(overhead_s)}."
        )

    def _describe(self, p: Point, cmp: Any) -> str:
        head = (
            f"<b>batch {p.x} · {_fmt.seconds(p.median_s)} per batch · {_fmt.seconds(p.per_x_s)} per "
            f"sample · {_fmt.si(p.achieved_flops_per_s, 'FLOP/s')}</b> · "
            f"{html.escape(getattr(self.ceilings, 'device_name', p.device))}"
        )
        lines = [self._verdict(p, cmp)]
        knee, measured = self.model_knee, self.measured_knee
        if math.isfinite(knee):
            where = (
                f"at batch ≈ {knee:.3g}" if knee >= 1 else "below batch 1 (the work outweighs it)"
            )
            lines.append(f"The ceilings' model puts the knee (fixed cost = work) {where}.")
        if measured is not None:
            lines.append(
                f"Measured: the knee lies between batch {measured[0]} and {measured[1]} "
                f"(doubling cost under ×{KNEE_RATIO} below it, over ×{KNEE_RATIO} above)."
            )
        lines += [p.reason, self._peak_note]
        if cmp is None and p.waited:
            lines.append(f"Not this machine's best: {sweeps.waited_words(p)}.")
        return self._words(head, lines)

    def _verdict(self, p: Point, cmp: Any) -> str:
        """The doubling in words: a reading only as far as the interval allows."""
        costs = self._costs(p)
        if cmp is None:
            return (
                "Move the slider right: each batch is measured together with half of it, in "
                "alternating rounds, for the doubling ratio. " + costs
            )
        d = self.doubling(p.x)
        if d is None or d.reading == "can't tell":
            return (
                f"Doubling the batch {p.x // 2} → {p.x}: {cmp.says()}. No reading until it narrows."
            )
        share, share_lo, share_hi = d.fixed_share
        said = (
            f"Doubling the batch {p.x // 2} → {p.x} cost ×{d.ratio:.2f} time (95% interval "
            f"×{d.low:.2f}–×{d.high:.2f}, alternating rounds): "
        )
        fixed = (
            f"a fixed cost is {_fmt.percent(share_lo, 1)}–{_fmt.percent(min(share_hi, 1), 1)} "
            f"of the batch-{p.x // 2} call (2 − ratio)"
        )
        if d.reading == "other code":
            grew = "less time" if d.ratio < 1 else "more than twice the time"
            return said + (
                f"{grew} for twice the work, in alternating rounds: the library ran "
                "different code at the two sizes (BLAS picks its method by shape) or "
                "the data left a cache. That says nothing about the regime. " + costs
            )
        if d.reading == "weights":
            return said + (
                f"{fixed}, and it is bandwidth on the weights, not overhead: {costs} "
                "A bigger batch reuses each weight read for more samples."
            )
        if d.reading == "overhead":
            return said + (
                f"{fixed}: the overhead signature, Python, dispatch and launches, not "
                f"the work. {costs} More samples per call are nearly free."
            )
        if d.reading == "knee":
            return said + f"{fixed}: the fixed cost and the work are about equal here."
        return said + self._past_knee(p, d)

    def _past_knee(self, p: Point, d: Doubling) -> str:
        bw = self.ceilings.mem_bandwidth_bytes_per_s
        kind = (
            f"compute-bound ({_fmt.percent(p.achieved_flops_per_s, self._peak)} of the "
            f"{self.precision} matmul peak)"
            if p.flops / self._peak >= p.bytes_moved / bw
            else f"bandwidth-bound ({_fmt.percent(p.achieved_bytes_per_s, bw)} of the bandwidth)"
        )
        grew = (
            "about twice the time for twice the work"
            if d.versus_double == "can't tell"
            else f"the work is most of the call (a fixed cost at most "
            f"{_fmt.percent(min(d.fixed_share[2], 1), 1)})"
        )
        text = (
            f"{grew}: past the knee, {kind}. The time per sample no longer falls much; a "
            "bigger batch buys little more."
        )
        if p.x < self.model_knee / 4:
            text += (
                f" But the model expects a flat curve this far below its knee (batch ≈ "
                f"{self.model_knee:.3g}): the per-sample cost is higher than the ceilings suggest."
            )
        return text

    # -- picture --------------------------------------------------------------------
    def _data_version(self) -> Any:
        return self._version

    def _draw(self, fig) -> None:
        ax_b, ax_s = fig.subplots(1, 2)
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.25, top=0.92, wspace=0.28)
        bs, model = self.batch_options, self._model_lines()
        for ax, y, title in ((ax_b, "time", "time per batch"), (ax_s, "per_x", "time per sample")):
            if model is not None:
                colours = ("tab:red", "tab:purple", "tab:orange", "tab:blue")
                for (label, cost), colour in zip(list(model.items())[:4], colours, strict=True):
                    ys = [cost(b) / (b if y == "per_x" else 1) for b in bs]
                    dashed = {"color": colour, "linestyle": "--", "linewidth": 1, "alpha": 0.7}
                    ax.plot(bs, ys, label=label if ax is ax_b else None, **dashed)
                if bs[0] <= model["knee"] <= bs[-1]:
                    ax.axvline(model["knee"], color="black", linestyle=":", linewidth=1)
            self.sweep.plot(ax, y=y, colours=COLOURS, legend=False)
            ax.set_title(title, fontsize=10)
        ax_b.set_ylabel("time per batch (s)")
        ax_s.set_ylabel("time per sample (s)")
        legend_below(fig, ax_b)

    def _rings(self, p: Point) -> list:
        return [(p.x, p.median_s), (p.x, p.per_x_s)]


def batch_explorer(
    *,
    model: nn.Module | None = None,
    max_batch: int | None = None,
    device: str | torch.device | None = None,
    batch: int = 1,
    make_input: Callable[[int], torch.Tensor] | None = None,
) -> BatchExplorer:
    """The batch-size slider of chapter 03: does doubling the batch double the time?"""
    return BatchExplorer(
        model=model, max_batch=max_batch, device=device, batch=batch, make_input=make_input
    )
