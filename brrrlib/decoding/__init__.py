"""One language model through every regime: a decoder, counted, decoded and measured (chapter 06).

A GPT-2-style decoder in plain PyTorch with a static KV cache, the counts
that set its floors, and the measurements chapter 06 sets beside them::

    from brrrlib import decoding

    small, large = decoding.shapes(bl.measure_ceilings())   # two sizes for this device
    model = decoding.build(large, device=bl.device())       # random weights (speed ignores values)
    decoding.parameters(large), decoding.weight_bytes(large, "bf16")
    step = decoding.decode_step(model, batch=1, context=256)
    bl.benchmark(step)                                      # one token per sequence per step
    decoding.batch_sweep(model, [1, 2, 4, 8, 16])           # tokens/s against the batch

The decoder and its cache live in ``_model``, the hand counts in ``_counts``,
weight-only int8 in ``_int8``, timed steps and the memory check in ``_steps``,
the chapter's sizes and 16-bit precision in ``_sizes``. The slider of
chapter 06 is :func:`brrrlib.widgets.decode_explorer`.
"""

from __future__ import annotations

from brrrlib.decoding._counts import (
    decode_flops,
    kv_cache_bytes,
    parameters,
    prefill_flops,
    weight_bytes,
)
from brrrlib.decoding._int8 import int8_kernel, quantize_int8
from brrrlib.decoding._model import Decoder, DecoderShape, KVCache, build, generate, new_cache
from brrrlib.decoding._sizes import half_precision, shapes

# What the decode explorer (brrrlib.widgets) measures with: importable here, not the chapter's.
from brrrlib.decoding._steps import (  # noqa: F401
    BatchSweep,
    DecodeStep,
    DoesNotFit,
    batch_sweep,
    decode_step,
    measure_step,
    precision_of,
)

__all__ = [
    "BatchSweep",
    "DecodeStep",
    "Decoder",
    "DecoderShape",
    "KVCache",
    "batch_sweep",
    "build",
    "decode_flops",
    "decode_step",
    "generate",
    "half_precision",
    "int8_kernel",
    "kv_cache_bytes",
    "new_cache",
    "parameters",
    "prefill_flops",
    "quantize_int8",
    "shapes",
    "weight_bytes",
]
