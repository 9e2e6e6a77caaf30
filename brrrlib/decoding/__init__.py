"""One language model through every regime: a decoder, counted, decoded and measured (chapter 06)."""

from __future__ import annotations

from types import MappingProxyType

from brrrlib.decoding._model import (
    Decoder,
    DecoderShape,
    KVCache,
    build,
    decode_flops,
    generate,
    int8_kernel,
    kv_cache_bytes,
    new_cache,
    parameters,
    prefill_flops,
    quantize_int8,
    weight_bytes,
)

# What the decode explorer (brrrlib.widgets) measures with, and the ladder of sizes: importable
# here, not the chapter's.
from brrrlib.decoding._steps import (  # noqa: F401
    LADDER,
    SMALL,
    TARGET_STEP_S,
    BatchSweep,
    DecodeStep,
    DoesNotFit,
    StepTiming,
    batch_sweep,
    decode_step,
    half_precision,
    measure_step,
    precision_of,
    shapes,
)

#: What chapter 06 measured on the NVIDIA H100 80GB HBM3 of ``brrrlib/recordings/h100-2026-11-26``
#: (torch 2.11.0+cu130), its large model in fp32, batch 1, a 256-token prompt or 256 cached
#: positions: ``bl.benchmark`` medians in seconds. The compiled step is ``torch.compile(mode=
#: "reduce-overhead")``'s, from its bandwidth achieved (5,203.5 MB read at 1,288 GB/s).
H100_RECORDED = MappingProxyType(
    {
        "shape": LADDER[-1],  # 24 layers x 2048, 32 heads, vocab 32768, 2048 positions
        "prefill, 256 tokens": 18.7e-3,
        "decode, eager": 11.5e-3,
        "decode, compiled": 5203.5e6 / 1288e9,
    }
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
