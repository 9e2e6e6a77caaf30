"""The decode explorer of chapter 06: tokens/s against the batch, at a context you choose."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from brrrlib import _checks, _fmt, decoding
from brrrlib.ceilings import measure_ceilings
from brrrlib.widgets import _explorer
from brrrlib.widgets._explorer import COLOURS, COMPUTE_FLOOR, KNEE, MEMORY_FLOOR, _Explorer, up_to

__all__ = ["DecodeExplorer", "decode_explorer"]


class DecodeExplorer(_Explorer):
    """The decode sliders of chapter 06: a decode step's time and tokens/s against its floors."""

    _css_class = "brrr-decode-explorer"
    _figsize = (10, 4.2)
    _redraw_on = ("context",)

    def __init__(
        self,
        model: decoding.Decoder,
        *,
        batch: int = 1,
        context: int = 64,
        max_batch: int | None = None,
        prediction: float | None = None,
        ceilings: Any = None,
        measure: Callable[..., Any] | None = None,
    ) -> None:
        self.model = _checks.kind("model", model, decoding.Decoder, "decoding.build(...)")
        self.device = model.wte.weight.device
        if ceilings is None:
            ceilings = measure_ceilings(self.device, progress=False)
        if prediction is not None:
            prediction = _checks.number("prediction", prediction, positive=True)
        self.ceilings, self.prediction = ceilings, prediction
        self._step = measure or (lambda m, b, s: decoding.measure_step(m, b, s, budget_s=0.1))
        precision = decoding.precision_of(model)  # int8 weights: the matmuls run in 16 bits
        self._precision = decoding.half_precision(ceilings) if precision == "int8" else precision
        self._peak = _explorer.peak(ceilings, self._precision)[0]
        self.points: dict[tuple[int, int], Any] = {}
        top = max_batch if max_batch is not None else (256 if self.device.type == "cpu" else 1024)
        self.batch_options = up_to("max_batch", top)
        self.context_options = tuple(2**k for k in range(4, model.shape.max_context.bit_length()))
        self._build(
            [
                self._control("batch", self.batch_options, batch),
                self._control("context", self.context_options, context),
            ]
        )

    # -- state ----------------------------------------------------------------------
    batch = _explorer.control_value("batch")
    context = _explorer.control_value("context")

    @property
    def current(self) -> Any:
        """The measured step under the sliders (a ``StepTiming``), or None (refused or failed)."""
        return self.points.get(self._key())

    def set(self, *, batch: int | None = None, context: int | None = None) -> Any:
        """Move the sliders from code and measure if needed; returns the current step or None."""
        return self._set({"batch": batch, "context": context})

    # -- measuring ------------------------------------------------------------------
    def _point(self) -> None:
        return None  # a step that does not fit raises DoesNotFit, kept in ``refused``

    def _forget(self) -> None:
        self.points.pop(self._key(), None)

    def _measure(self) -> None:
        self.points[self._key()] = self._step(self.model, *self._key())

    # -- the model --------------------------------------------------------------------
    def floors(self, batch: float, context: int) -> tuple[float, float]:
        """``(memory floor, compute floor)`` in seconds for a step, from the hand counts."""
        shape, precision = self.model.shape, decoding.precision_of(self.model)
        itemsize = self.model.wte.weight.element_size()
        kv_bytes = decoding.kv_cache_bytes(shape, 1, context, itemsize) * batch
        nbytes = decoding.weight_bytes(shape, precision) + kv_bytes
        flops = decoding.decode_flops(shape, 1, context) * batch
        # a step reads its weights and cache and writes little: the read roof
        return nbytes / self.ceilings.bandwidth_for("read"), flops / self._peak

    def knee(self, context: int) -> float:
        """The batch where the compute floor meets the memory floor (``inf``: never)."""
        weights_s = self.floors(0, context)[0]
        memory_1, compute_1 = self.floors(1, context)
        per_sequence = compute_1 - (memory_1 - weights_s)
        return weights_s / per_sequence if per_sequence > 0 else math.inf

    def _show(self, p: Any) -> None:
        memory_s, compute_s = self.floors(p.batch, p.context)
        floor_s, knee = max(memory_s, compute_s), self.knee(p.context)
        cells = {
            "batch": str(p.batch),
            "context": str(p.context),
            "time": _fmt.seconds(p.seconds),
            "tokens/s": f"{p.tokens_per_s:,.0f}",
            MEMORY_FLOOR: _fmt.seconds(memory_s),
            COMPUTE_FLOOR: _fmt.seconds(compute_s),
            "measured/floor": _fmt.times(p.seconds / floor_s),  # < 1x: a cache, or a stale roof
            "bound": "memory" if memory_s >= compute_s else "compute",
            "KV cache/weights": _fmt.percent(p.kv_bytes, p.weight_bytes),
            KNEE: f"{knee:.3g}" if math.isfinite(knee) else "none",
            "note": _explorer.NOISY if p.timing.noisy else "-",
        }
        self._table(cells)

    # -- picture --------------------------------------------------------------------
    def _draw(self, fig) -> None:
        bs, s = self.batch_options, self.context
        grid = [2 ** (k / 4) for k in range(4 * int(math.log2(bs[-1])) + 1)]
        measured = sorted((b, p) for (b, ctx), p in self.points.items() if ctx == s)
        # left: ms per step against its two floors; right: tokens/s under the roof they make
        memory, compute = zip(*([1e3 * t for t in self.floors(b, s)] for b in grid), strict=True)
        roof = [1e3 * b / max(m, c) for b, m, c in zip(grid, memory, compute, strict=True)]
        compute_label = f"{COMPUTE_FLOOR} ({self._precision})"
        floors = {MEMORY_FLOOR: (memory, "tab:blue"), compute_label: (compute, "tab:orange")}
        prediction = {"your prediction": (self.prediction, "tab:purple", "-.")}
        panels = [floors, {"batch ÷ the larger floor": (roof, "gray")}]
        ax_t, ax_r = _explorer.model_panels(fig, grid, panels, self.knee(s), prediction)
        if measured:
            batches, ms = [b for b, _p in measured], [p.seconds * 1e3 for _b, p in measured]
            ax_t.plot(batches, ms, "o-", color=COLOURS["batch"], label="measured")
            ax_r.plot(batches, [p.tokens_per_s for _b, p in measured], "o-", color=COLOURS["batch"])
        for ax in (ax_t, ax_r):  # the slider's batches as ticks
            ax.set(xscale="log", yscale="log", xlabel="batch (sequences per step)")
            ax.set_title(f"context {s}", fontsize=10)
            ax.set_xticks(bs, [str(b) for b in bs], fontsize=7)
            ax.minorticks_off()
        ax_t.set_ylabel("time per step (ms)")
        ax_r.set_ylabel("tokens/s")
        _explorer.legend_below(fig, ax_t, ax_r)

    def _rings(self, p: Any) -> list:
        return [(p.batch, p.seconds * 1e3), (p.batch, p.tokens_per_s)]


decode_explorer = DecodeExplorer
