"""The batch-size explorer of chapter 03: does doubling the batch double the time?

:func:`batch_explorer` and its :class:`BatchExplorer`; each point comes from
:func:`brrrlib.widgets.measure_batch`. Re-exported by :mod:`brrrlib.widgets`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from brrrlib import _explorer, devices
from brrrlib._explorer import _COLOURS, _PREDICTED_STYLE, _eng_log_axis, _Explorer, _fmt_bytes
from brrrlib._fmt import seconds as _fmt_s
from brrrlib._points import (
    BatchPoint,
    _input_maker,
    _model_device,
    _positive_int,
    _weight_bytes,
    measure_batch,
)
from brrrlib.ceilings import measure_ceilings
from brrrlib.counting import _si as _fmt

__all__ = ["BatchExplorer", "batch_explorer"]

# Doubling the batch and the time grows by less than this factor: the cost
# is (mostly) fixed per call, the overhead signature. More than _LINEAR: the
# cost grows with the work, compute- or bandwidth-bound.
_FLAT = 1.3
_LINEAR = 1.7
# Below this, twice the work took clearly less time: the machine was busy.
_NOISE = 0.8


def _default_mlp(ceilings: Any, device: torch.device) -> nn.Module:
    """A 4-layer MLP (Linear, ReLU, ...) sized to this device.

    The width ``w`` puts the predicted knee near batch 32: one call costs
    about ``8 ops x op_overhead_s`` fixed, plus ``2 x 4 x w**2`` FLOPs per
    sample at the matmul peak; they are equal at batch
    ``op_overhead_s x matmul_flops_per_s / w**2``. Clamped to 128..4096 and
    rounded to a power of two. Built under a forked RNG with seed 0, so it is
    the same every time and the learner's random state is untouched.
    """
    w = math.sqrt(ceilings.op_overhead_s * ceilings.matmul_flops_per_s / 32)
    w = min(4096, max(128, 2 ** round(math.log2(max(w, 1)))))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layers: list[nn.Module] = []
        for i in range(4):
            layers += [nn.Linear(w, w)] + ([nn.ReLU()] if i < 3 else [])
        model = nn.Sequential(*layers)
    return model.to(device).eval()


def _bytes_per_sample(model: nn.Module, x: torch.Tensor) -> int:
    """Upper bound on activation memory per sample: every leaf module's output, kept."""
    total = [x.numel() * x.element_size()]

    def hook(_module, _inputs, output) -> None:
        if isinstance(output, torch.Tensor):
            total[0] += output.numel() * output.element_size()

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return max(1, total[0] // max(1, x.shape[0]))


class BatchExplorer(_Explorer):
    """The batch-size experiment of chapter 03, as a slider and a live plot.

    Time one forward pass of a small model as the batch doubles. While a call
    is dominated by a fixed cost, doubling the batch adds only a little time
    (the "double the batch, +10% time" signature) and the time per sample
    halves: more samples per call are nearly free. Once the work per sample
    dominates, the time per batch doubles with the batch and the time per
    sample stops falling: the knee. The fixed cost is *overhead* (Python,
    dispatch, kernel launches: ``ops x op_overhead_s``) or, for a model with
    large weights, *bandwidth on the weights* (every call reads them all:
    ``weight_bytes / mem_bandwidth_bytes_per_s``). Both look flat on the
    plot; the readout tells them apart with :func:`brrrlib.count`'s bytes.

    The plot shows time per batch and time per sample against the batch (log
    axes), measured dots and the model's dashed lines: the overhead floor,
    the weight-reading time, the compute time (FLOPs / matmul peak) and the
    memory time (bytes / bandwidth). The predicted knee is where the
    per-sample work overtakes the larger fixed cost::

        batch* = max(ops x op_overhead_s, weight_bytes / B)
                 / max(flops_per_sample / F_matmul, activation_bytes_per_sample / B)

    Each move measures the new batch and, for the doubling ratio, half of it
    (if not measured yet); nothing is measured twice.

    Attributes: ``widget`` (VBox, CSS class ``brrr-batch-explorer``),
    ``points`` (:class:`BatchPoint`, sorted), ``current``, ``error``,
    ``exception``, ``model``, ``ceilings``. ``measure`` replaces :func:`measure_batch`
    (called as ``measure(batch=..., device=...)``), for tests.
    """

    _css_class = "brrr-batch-explorer"
    _name = "batch explorer"

    def __init__(
        self,
        *,
        model: nn.Module | None = None,
        max_batch: int | None = None,
        device: str | torch.device | None = None,
        batch: int = 1,
        make_input: Callable[[int], torch.Tensor] | None = None,
        ceilings: Any = None,
        measure: Callable[..., BatchPoint] | None = None,
    ) -> None:
        import ipywidgets as W

        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if max_batch is not None:
            max_batch = _positive_int("max_batch", max_batch)
        batch = _positive_int("batch", batch)
        if device is None:
            self.device = _model_device(model) if model is not None else devices.device()
        else:
            self.device = devices.resolve(device)
        self.ceilings = (
            ceilings if ceilings is not None else measure_ceilings(self.device, progress=False)
        )
        if model is None:
            model = _default_mlp(self.ceilings, self.device)
        elif _model_device(model).type != self.device.type:
            raise ValueError(
                f"model is on {_model_device(model)} but device={str(self.device)!r}; "
                f"move it first: model.to({str(self.device)!r})"
            )
        self.model = model
        self._make_input = _input_maker(model, make_input)
        self.weight_bytes = _weight_bytes(model)
        self._sample_bytes = _bytes_per_sample(model, self._make_input(1))
        if measure is None:

            def measure(*, batch: int, device: torch.device) -> BatchPoint:
                return measure_batch(self.model, batch, device, make_input=self._make_input)

        self._measure = measure
        self._cache: dict[tuple[int, str], BatchPoint] = {}

        if max_batch is None:
            max_batch = 4096 if self.device.type == "cpu" else 65536
            # Read on _explorer at call time, so a test can replace them there.
            free = _explorer._available_memory_bytes(self.device)
            while (
                max_batch > 1
                and self._bytes_needed(max_batch) > _explorer.MEMORY_HEADROOM * free / 4
            ):
                max_batch //= 2
        top = 2 ** math.ceil(math.log2(max_batch))
        self.batch_options = tuple(
            b for b in (2**k for k in range(int(math.log2(top)) + 1)) if b <= max_batch
        ) + (() if max_batch & (max_batch - 1) == 0 else (max_batch,))
        if batch not in self.batch_options:
            raise ValueError(f"batch={batch} is not on the slider; use one of {self.batch_options}")
        self._batch_w = W.SelectionSlider(
            options=[(str(b), b) for b in self.batch_options],
            value=batch,
            description="batch",
            continuous_update=False,
        )
        self._build([self._batch_w])
        self._suspended = False
        self._batch_w.observe(self._on_change, names="value")
        self._update()

    # -- state ----------------------------------------------------------------------
    @property
    def batch(self) -> int:
        """The batch size under the slider."""
        return self._batch_w.value

    @property
    def points(self) -> tuple[BatchPoint, ...]:
        """Every measured point, sorted by batch."""
        return tuple(sorted(self._cache.values(), key=lambda p: p.batch))

    @property
    def current(self) -> BatchPoint | None:
        """The measured point under the slider, or None (refused or failed)."""
        return self._cache.get((self.batch, str(self.device)))

    def set(self, *, batch: int) -> BatchPoint | None:
        """Move the slider from code and measure if needed; returns the current point."""
        if batch not in self.batch_options:
            raise ValueError(
                f"batch={batch!r} is not on the slider; use one of {self.batch_options}"
            )
        self._suspended = True
        try:
            self._batch_w.value = batch
        finally:
            self._suspended = False
        return self._update()

    def remeasure(self) -> BatchPoint | None:
        """Forget the current batch (and half of it) and measure again (a busy machine)."""
        for b in (self.batch, self.batch // 2):
            self._cache.pop((b, str(self.device)), None)
        return self._update()

    def _bytes_needed(self, batch: int) -> int:
        # Weights are already allocated; the call needs room for its activations.
        return batch * self._sample_bytes

    def _on_change(self, _change: dict) -> None:
        if not self._suspended:
            self._update()

    def _get(self, batch: int) -> BatchPoint | None:
        key = (batch, str(self.device))
        point = self._cache.get(key)
        if point is not None:
            return point
        what = f"batch {batch}"
        if not self._fits(self.device, self._bytes_needed(batch), what):
            return None
        self._say(f"batch {self.batch} · measuring…", busy=True)
        point = self._measure_safely(
            self.device, what, lambda: self._measure(batch=batch, device=self.device)
        )
        if point is not None:
            self._cache[key] = point
        return point

    def _update(self) -> BatchPoint | None:
        point = self._get(self.batch)
        if point is None:
            self._redraw()
            return None
        half = self._get(self.batch // 2) if self.batch > 1 else None
        if self.batch > 1 and half is None:
            self._redraw()
            return point
        self._clear_error()
        self._say(self._describe(point, half))
        self._redraw()
        return point

    # -- the model --------------------------------------------------------------------
    def _model_lines(self) -> dict[str, Any] | None:
        """Per-batch costs from the roofline model, scaled from a measured point."""
        pts = self.points
        if not pts:
            return None
        ref = pts[-1]  # the largest batch: per-sample terms are least diluted
        c = self.ceilings
        bw = c.mem_bandwidth_bytes_per_s
        flops_per_sample = ref.flops / ref.batch
        act_per_sample = max(0, ref.bytes_moved - ref.weight_bytes) / ref.batch
        overhead_s = ref.ops * c.op_overhead_s
        weights_s = ref.weight_bytes / bw
        per_sample_s = max(flops_per_sample / c.matmul_flops_per_s, act_per_sample / bw)
        fixed_s = max(overhead_s, weights_s)
        return {
            "overhead_s": overhead_s,
            "weights_s": weights_s,
            "compute_s": lambda b: b * flops_per_sample / c.matmul_flops_per_s,
            "memory_s": lambda b: ref.weight_bytes / bw + b * act_per_sample / bw,
            "knee": fixed_s / per_sample_s if per_sample_s > 0 else math.inf,
            "ops": ref.ops,
        }

    def _describe(self, p: BatchPoint, half: BatchPoint | None) -> str:
        c = self.ceilings
        bw = c.mem_bandwidth_bytes_per_s
        head = (
            f"<b>batch {p.batch} · {_fmt_s(p.median_s)} per batch · "
            f"{_fmt_s(p.per_sample_s)} per sample · {_fmt(p.flops_per_s, 'FLOP/s')}</b>"
            f" · {html.escape(getattr(c, 'device_name', p.device))}"
        )
        weights_s = p.weight_bytes / bw
        overhead_s = p.ops * c.op_overhead_s
        weights_text = (
            f"bl.count: the weights are {_fmt_bytes(p.weight_bytes)}, {p.weight_share:.0%} of the "
            f"{_fmt_bytes(p.bytes_moved)} moved; reading them takes ≥ {_fmt_s(weights_s)} at "
            f"{_fmt(bw, 'B/s')}"
        )
        if half is None:
            verdict = (
                "Move the slider right: the readout compares each batch with half of it. "
                + weights_text
                + f"; {p.ops} ops × {_fmt_s(c.op_overhead_s)} op overhead ≈ "
                f"{_fmt_s(overhead_s)}."
            )
        else:
            ratio = p.median_s / half.median_s
            verdict = f"Doubling the batch {half.batch} → {p.batch} cost ×{ratio:.2f} time: "
            if _NOISE <= ratio < _FLAT:
                if weights_s >= 0.5 * p.median_s:
                    verdict += (
                        "a fixed cost per call, and here it is bandwidth on the weights, not "
                        f"overhead: {weights_text}, {weights_s / p.median_s:.0%} of the call. "
                        "A bigger batch reuses each weight read for more samples."
                    )
                else:
                    verdict += (
                        "the overhead signature. The call costs about the same whatever the "
                        f"batch: Python, dispatch and launches ({p.ops} ops; ≥ {_fmt_s(overhead_s)}"
                        f" at the measured {_fmt_s(c.op_overhead_s)} per tiny op), not the work. "
                        f"{weights_text} ({weights_s / p.median_s:.0%} of the call), so not "
                        "bandwidth-bound either. More samples per call are nearly free."
                    )
            elif ratio > _LINEAR:
                compute_s = p.flops / c.matmul_flops_per_s
                memory_s = p.bytes_moved / bw
                kind = (
                    f"compute-bound ({p.flops_per_s / c.matmul_flops_per_s:.0%} of the matmul peak)"
                    if compute_s >= memory_s
                    else f"bandwidth-bound ({p.bytes_per_s / bw:.0%} of the memory bandwidth)"
                )
                verdict += (
                    f"the time grows with the work: past the knee, {kind}. The time per sample "
                    "no longer falls; a bigger batch buys nothing more."
                )
                lines = self._model_lines()
                if lines is not None and p.batch < lines["knee"] / 4:
                    verdict += (
                        f" But the model expects a flat curve this far below its knee (batch ≈ "
                        f"{lines['knee']:.3g}): if .remeasure() gives the same, the per-sample "
                        "cost is higher than the ceilings suggest; if not, it was noise."
                    )
            elif ratio < _NOISE:
                verdict += (
                    "less time for more work. That is noise: something else ran during the "
                    "smaller batch's measurement. Run .remeasure() or close other programs."
                )
            else:
                verdict += "in the knee: the fixed cost and the per-sample work are comparable."
        lines = self._model_lines()
        if lines is not None and math.isfinite(lines["knee"]):
            verdict += f" Knee predicted from the ceilings at batch ≈ {lines['knee']:.3g}."
        if getattr(p.timing, "noisy", False):
            verdict += " (The timing is noisy: the machine is busy.)"
        return f"{head}<br><small>{html.escape(verdict)}</small>"

    # -- picture --------------------------------------------------------------------
    def _draw(self, fig) -> None:
        from matplotlib.ticker import FuncFormatter, NullLocator

        fig.set_size_inches(10, 4.2)
        ax_b, ax_s = fig.subplots(1, 2)
        fig.subplots_adjust(left=0.09, right=0.98, bottom=0.25, top=0.92, wspace=0.28)
        bs = self.batch_options
        pts = self.points
        lines = self._model_lines()
        if lines is not None:
            model = {
                f"overhead floor ({lines['ops']} ops × op overhead)": [lines["overhead_s"]]
                * len(bs),
                "reading the weights (weights ÷ bandwidth)": [lines["weights_s"]] * len(bs),
                "compute (FLOPs ÷ matmul peak)": [lines["compute_s"](b) for b in bs],
                "memory (bytes ÷ bandwidth)": [lines["memory_s"](b) for b in bs],
            }
            for (label, ys), colour in zip(
                model.items(), ("tab:red", "tab:purple", "tab:orange", "tab:blue"), strict=True
            ):
                ax_b.plot(bs, ys, color=colour, label=label, **_PREDICTED_STYLE)
                ax_s.plot(
                    bs,
                    [y / b for y, b in zip(ys, bs, strict=True)],
                    color=colour,
                    **_PREDICTED_STYLE,
                )
            if math.isfinite(lines["knee"]) and bs[0] <= lines["knee"] <= bs[-1]:
                for ax in (ax_b, ax_s):
                    ax.axvline(lines["knee"], color="black", linestyle=":", linewidth=1)
                ax_b.annotate(
                    f" predicted knee ≈ {lines['knee']:.3g}",
                    (lines["knee"], 0.02),
                    xycoords=("data", "axes fraction"),
                    fontsize=8,
                )
        kw = {"color": _COLOURS["batch"], "marker": "o", "linewidth": 1.5}
        if pts:
            ax_b.plot([p.batch for p in pts], [p.median_s for p in pts], label="measured", **kw)
            ax_s.plot([p.batch for p in pts], [p.per_sample_s for p in pts], **kw)
        cur = self.current
        ring = {
            "marker": "o",
            "markersize": 14,
            "markerfacecolor": "none",
            "markeredgecolor": "black",
            "markeredgewidth": 2,
        }
        if cur is not None:
            ax_b.plot([cur.batch], [cur.median_s], **ring)
            ax_s.plot([cur.batch], [cur.per_sample_s], **ring)
        for ax in (ax_b, ax_s):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.set_yscale("log")
            ax.set_xlabel("batch size")
            ax.grid(True, alpha=0.25)
            ax.xaxis.set_minor_locator(NullLocator())
        for ax in (ax_b, ax_s):
            _eng_log_axis(ax.yaxis, "s")
        ax_b.set_ylabel("seconds per batch")
        ax_b.set_title("time per batch", fontsize=10)
        ax_s.set_ylabel("seconds per sample")
        ax_s.set_title("time per sample", fontsize=10)
        fig.legend(fontsize=7, loc="lower center", ncols=3)


def batch_explorer(
    *,
    model: nn.Module | None = None,
    max_batch: int | None = None,
    device: str | torch.device | None = None,
    batch: int = 1,
    make_input: Callable[[int], torch.Tensor] | None = None,
) -> BatchExplorer:
    """The batch-size slider of chapter 03: does doubling the batch double the time?

    ``model`` defaults to a 4-layer MLP sized so its knee falls near batch
    32 on this device (see :class:`BatchExplorer` for the formula); pass
    your own ``nn.Module`` (and ``make_input=lambda batch: ...`` if its first
    layer is not an ``nn.Linear``). The slider doubles the batch from 1 to
    ``max_batch`` (default 4096 on a CPU, 65536 on a GPU, less if memory is
    short). Each batch is measured once (:func:`brrrlib.benchmark`, no grad)
    and counted (:func:`brrrlib.count`). The readout states the doubling
    ratio and what it means: overhead, bandwidth on the weights, or past
    the knee, compute- or bandwidth-bound. Returns a :class:`BatchExplorer`;
    as the last expression of a cell it shows itself.
    """
    return BatchExplorer(
        model=model, max_batch=max_batch, device=device, batch=batch, make_input=make_input
    )
