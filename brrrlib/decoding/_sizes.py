"""The chapter's two model sizes for this device, and its 16-bit precision (chapter 06)."""

from __future__ import annotations

from typing import Any

import torch

from brrrlib import machine
from brrrlib.decoding import _counts
from brrrlib.decoding._model import DecoderShape

__all__ = ["LADDER", "SMALL", "TARGET_STEP_S", "half_precision", "shapes"]

SMALL = DecoderShape("small", layers=4, d_model=64, heads=4, vocab=2048, max_context=1024)
#: Candidate large models, smallest first.
LADDER = (
    DecoderShape("large", layers=4, d_model=256, heads=4, vocab=8192, max_context=1024),
    DecoderShape("large", layers=6, d_model=512, heads=8, vocab=8192, max_context=1024),
    DecoderShape("large", layers=8, d_model=768, heads=12, vocab=8192, max_context=1024),
    DecoderShape("large", layers=12, d_model=1024, heads=16, vocab=32768, max_context=2048),
    DecoderShape("large", layers=16, d_model=1536, heads=24, vocab=32768, max_context=2048),
    DecoderShape("large", layers=24, d_model=2048, heads=32, vocab=32768, max_context=2048),
)
#: How long reading the large model's fp32 weights should take at the measured bandwidth.
TARGET_STEP_S = 0.025
#: fp16 is chosen over bf16 only when its matmul ceiling is this many times higher.
_CLEARLY_FASTER = 1.25
#: The largest rung a CPU gets: a chapter on a laptop stays quick.
_CPU_RUNGS = 3


def shapes(
    ceilings: Any, device: str | torch.device | None = None
) -> tuple[DecoderShape, DecoderShape]:
    """``(small, large)`` for this device, from its measured bandwidth and free memory."""
    dev = machine.resolve(device) if device is not None else torch.device(ceilings.device)
    budget = min(
        TARGET_STEP_S * ceilings.mem_bandwidth_bytes_per_s,
        machine.available_memory_bytes(dev) / 8,
    )
    rungs = LADDER[:_CPU_RUNGS] if dev.type == "cpu" else LADDER
    fitting = [s for s in rungs if _counts.weight_bytes(s, "fp32") <= budget]
    return SMALL, (fitting[-1] if fitting else rungs[0])


def half_precision(ceilings: Any) -> str:
    """The 16-bit precision this device multiplies fastest, as measured: ``"bf16"`` or ``"fp16"``."""
    measured = ceilings.matmul_flops_per_s_by_dtype
    bf16, fp16 = measured.get("bf16", 0.0), measured.get("fp16", 0.0)
    return "fp16" if fp16 > _CLEARLY_FASTER * bf16 else "bf16"
