"""The batch-size explorer of chapter 03: does doubling the batch double the time?"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from brrrlib import _checks, _fmt, counting, hardware, machine, sweeps, timing
from brrrlib.ceilings import measure_ceilings
from brrrlib.sweeps import Case, Point, Sweep
from brrrlib.widgets import _explorer
from brrrlib.widgets._explorer import COLOURS, KNEE, _Explorer, control_value, legend_below, note
from brrrlib.workloads import _linear_input

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
    versus, unsure = cmp.versus(2.0), timing.CANT_TELL  # as the comparison says it
    lo, hi = 2 - cmp.high, 2 - cmp.low  # the fixed cost's share of the smaller call
    if not cmp.decided or cmp.waited:
        reading = unsure
    elif cmp.direction == "faster" or versus == "above":
        reading = "other code"
    elif versus == "below" and lo > FIXED_DOMINATES:
        reading = "weights" if weights_share >= FIXED_DOMINATES else "overhead"
    elif (versus == "below" and hi < FIXED_DOMINATES) or (versus == unsure and cmp.narrow):
        reading = "work"  # most of the call, or twice the time within a narrow interval
    else:
        reading = "knee" if cmp.narrow else unsure
    return Doubling(batch, cmp.ratio, cmp.low, cmp.high, cmp.narrow, versus, reading)


def _default_mlp(ceilings: Any, device: torch.device) -> nn.Module:
    """A 4-layer MLP (Linear, ReLU, ...) whose predicted knee falls near batch 32."""
    w = math.sqrt(ceilings.op_overhead_s * ceilings.matmul_flops_per_s / 32)
    w = min(4096, max(128, 2 ** round(math.log2(max(w, 1)))))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers = [m for i in range(4) for m in (nn.Linear(w, w), nn.ReLU())][:-1]
    return nn.Sequential(*layers).to(device).eval()


def _precision(dtype: torch.dtype, device: torch.device) -> str:
    """The matmul precision a model of ``dtype`` runs in; fp32 is TF32 where CUDA is allowed it."""
    key = hardware.dtype_key(dtype)
    tf32 = device.type == "cuda" and torch.get_float32_matmul_precision() != "highest"
    return "tf32" if key == "fp32" and tf32 else key


def _input_maker(
    model: nn.Module, make_input: Callable[[int], torch.Tensor] | None
) -> tuple[Callable[[int], torch.Tensor], int]:
    """``make_input`` (or one built from the first ``nn.Linear``), checked; and bytes per sample."""
    example = "pass make_input=lambda batch: torch.randn(batch, 16)"
    make = make_input if make_input is not None else _linear_input(model, example)
    _checks.function("make_input", make)
    x = make(2)
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] != 2:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"make_input(2) must return one tensor of batch 2, got {got}; {example}")
    try:  # bytes per sample: what a call moves beyond its weights (activations, read and written)
        case = _batch_case(model, 2, lambda _batch: x, x.device)
    except Exception as exc:  # the learner's model or input: say which argument to fix
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        raise ValueError(f"make_input must build the input this model takes ({why})") from exc
    return make, max(1, (case.bytes_moved - case.weight_bytes) // 2)


def _batch_case(model: nn.Module, batch: int, make_input: Callable, device: torch.device) -> Case:
    """What one batch point runs: a forward pass, no grad, counted by :func:`brrrlib.count`."""
    x = make_input(batch)
    with torch.no_grad():
        n = counting.count(model, x)
    weights = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    kw = {"no_grad": True, "size": batch, "weight_bytes": weights, "ops": int(n.ops)}
    fn, label = functools.partial(model, x), f"batch {batch}"
    return Case(fn, int(n.flops), int(n.bytes_moved), device, label, **kw)


class BatchExplorer(_Explorer):
    """The batch-size slider of chapter 03: does doubling the batch double the time?"""

    _css_class = "brrr-batch-explorer"
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
        _checks.kind("model", model, (nn.Module, type(None)), "a torch.nn.Module")
        on = next((p.device for p in model.parameters()), None) if model is not None else None
        self.device = machine.resolve(device if device is not None else on)
        self.ceilings = ceilings if ceilings is not None else measure_ceilings(self.device)
        self.model = model if model is not None else _default_mlp(self.ceilings, self.device)
        if any(p.device.type != self.device.type for p in self.model.parameters()):
            raise ValueError(f"model is not on device={str(self.device)!r}: model.to(device) first")
        make, self._sample_bytes = _input_maker(self.model, make_input)
        self._setup = setup or functools.partial(_batch_case, self.model, make_input=make)
        dtype = next((p.dtype for p in self.model.parameters() if p.is_floating_point()), None)
        self.precision = _precision(dtype or torch.float32, self.device)
        #: The compute roof and its precision (fp32's where the model's was not measured).
        self.peak_flops_per_s, self.peak_precision = _explorer.peak(self.ceilings, self.precision)
        self.sweep = Sweep("batch", "batch size (samples per call)", ())
        if max_batch is None:  # 4096 on a CPU, 65536 on a GPU, less if memory is short
            max_batch = 4096 if self.device.type == "cpu" else 65536
            room = machine.MEMORY_HEADROOM * machine.available_memory_bytes(self.device) / 4
            while max_batch > 1 and max_batch * self._sample_bytes > room:
                max_batch //= 2
        self.batch_options = _explorer.up_to("max_batch", max_batch)
        self._build([self._control("batch", self.batch_options, batch)])

    # -- state ----------------------------------------------------------------------
    batch = control_value("batch")

    @property
    def points(self) -> tuple[Point, ...]:
        """Every measured point, by batch."""
        return tuple(p for p in self.sweep.line("batch") if p.measured)

    def set(self, *, batch: int) -> Point | None:
        """Move the slider from code and measure if needed; returns the current point."""
        return self._set({"batch": batch})

    # -- measuring ------------------------------------------------------------------
    def _point(self) -> Point | None:
        return self.sweep.point(self.batch, "batch")

    def _forget(self) -> None:
        self.sweep = self.sweep.without([(self.batch, "batch")])  # and its pairing with half

    def _needs_measuring(self) -> bool:
        b = self.batch
        return self.current is None or (b > 1 and self._doubled(b) is None)

    def _measure(self) -> None:
        """The batch into the sweep, and half of it with it, in alternating rounds."""
        b, nbytes = self.batch, self._sample_bytes
        pairs = [((b // 2, "batch"), (b, "batch"))] if b > 1 else []
        kw = {"pairs": pairs, "memory": lambda x, _: x * nbytes, "device": self.device}

        def setup(x: int, _line: str) -> Case:
            return self._setup(batch=x, device=self.device)

        self.sweep = sweeps.sweep("batch", [b], ["batch"], setup, into=self.sweep, **kw)

    def _show(self, p: Point) -> None:
        knee, measured, d = self.model_knee, self.measured_knee, self.doubling(p.x)
        cells = {
            "batch": str(p.x),
            "time": _fmt.seconds(p.median_s),
            "time/sample": _fmt.seconds(p.per_x_s),
            "FLOP/s": _fmt.si(p.achieved_flops_per_s, "FLOP/s"),
            "ops": str(p.ops),
            "weights": _fmt.binary_bytes(p.weight_bytes),
            "fixed share (2 - ratio)": "-" if d is None else _fmt.percent(d.fixed_share[0], 1),
            "reading": "-" if d is None else d.reading,
            KNEE: f"{knee:.3g}" if math.isfinite(knee) else "none",
            "knee (measured)": f"{measured[0]}-{measured[1]}" if measured else "-",
            "note": note(p),
        }
        cmp = self._doubled(p.x)
        self._table(cells, "" if cmp is None else f"batch {p.x // 2} → {p.x}: {cmp.says()}")

    # -- the model --------------------------------------------------------------------
    def _model_lines(self) -> tuple[dict[str, tuple[Callable, str]], float]:
        """Per-batch costs ``{label: (seconds(batch), colour)}`` from the roofline model, scaled
        from the largest measured point (none before), and the knee."""
        if not self.points:
            return {}, math.inf
        ref, c, peak_ = self.points[-1], self.ceilings, self.peak_flops_per_s
        bw = c.mem_bandwidth_bytes_per_s
        flops_per_sample = ref.flops / ref.x
        act_per_sample = max(0, ref.bytes_moved - ref.weight_bytes) / ref.x
        overhead_s, weights_s = ref.ops * c.op_overhead_s, ref.weight_bytes / bw
        per_sample_s = max(flops_per_sample / peak_, act_per_sample / bw)
        compute = f"{_explorer.COMPUTE_FLOOR} ({self.peak_precision})"
        lines = {  # named as the readings name the fixed costs
            "overhead": (lambda b: overhead_s, "tab:red"),
            "weights": (lambda b: weights_s, "tab:purple"),
            compute: (lambda b: b * flops_per_sample / peak_, "tab:orange"),
            _explorer.MEMORY_FLOOR: (lambda b: weights_s + b * act_per_sample / bw, "tab:blue"),
        }
        return lines, max(overhead_s, weights_s) / per_sample_s if per_sample_s > 0 else math.inf

    @property
    def model_knee(self) -> float:
        """The batch where the model's per-sample work overtakes its fixed cost (inf if none)."""
        return self._model_lines()[1]

    def doubling(self, batch: int | None = None) -> Doubling | None:
        """The reading of ``batch // 2 -> batch`` (default: the slider's), or None if not measured."""
        b = self.batch if batch is None else batch
        cmp, half = self._doubled(b), self.sweep.point(b // 2, "batch")
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

    # -- picture --------------------------------------------------------------------
    def _draw(self, fig) -> None:
        bs, (lines, knee) = self.batch_options, self._model_lines()
        panels = [  # time, then time per sample
            {
                label: ([cost(b) / b**per for b in bs], colour)
                for label, (cost, colour) in lines.items()
            }
            for per in (0, 1)
        ]
        axes = _explorer.model_panels(fig, bs, panels, knee)
        for ax, y in zip(axes, ("time", "per_x"), strict=True):
            self.sweep.plot(ax, y=y, colours=COLOURS, legend=False)
        axes[1].set_ylabel("time per sample (s)")
        legend_below(fig, *axes)

    def _rings(self, p: Point) -> list:
        return [(p.x, p.median_s), (p.x, p.per_x_s)]


batch_explorer = BatchExplorer
