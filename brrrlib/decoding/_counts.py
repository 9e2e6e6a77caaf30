"""A decoder counted by hand: parameters, bytes a step reads, FLOPs a step does (chapter 06)."""

from __future__ import annotations

from brrrlib.decoding._model import DecoderShape

__all__ = [
    "BYTES_PER_WEIGHT",
    "decode_flops",
    "kv_cache_bytes",
    "matmul_weights",
    "parameters",
    "prefill_flops",
    "weight_bytes",
]

#: Bytes per weight of each precision the chapter stores weights in.
BYTES_PER_WEIGHT = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1}


def parameters(shape: DecoderShape) -> int:
    """``V*C + max_context*C + L*(12*C^2 + 13*C) + 2*C``."""
    L, C = shape.layers, shape.d_model
    return shape.vocab * C + shape.max_context * C + L * (12 * C**2 + 13 * C) + 2 * C


def matmul_weights(shape: DecoderShape) -> int:
    """Weights that take part in a matmul: ``L*12*C^2`` in the blocks, ``V*C`` in the head."""
    return shape.layers * 12 * shape.d_model**2 + shape.vocab * shape.d_model


def weight_bytes(shape: DecoderShape, precision: str = "fp32") -> int:
    """Bytes of weights one decode step reads: every parameter but the position table."""
    if precision not in BYTES_PER_WEIGHT:
        raise ValueError(
            f"precision must be one of {', '.join(BYTES_PER_WEIGHT)}, got {precision!r}"
        )
    read = parameters(shape) - shape.max_context * shape.d_model
    if precision != "int8":
        return read * BYTES_PER_WEIGHT[precision]
    matmuls = matmul_weights(shape)
    scales = shape.layers * 9 * shape.d_model + shape.vocab
    return matmuls + 2 * (read - matmuls + scales)


def decode_flops(shape: DecoderShape, batch: int = 1, context: int = 1) -> int:
    """One decode step, one new token per sequence: ``B*(2*matmul_weights + 4*L*S*C)``."""
    L, C = shape.layers, shape.d_model
    return batch * (2 * matmul_weights(shape) + 4 * L * context * C)


def prefill_flops(shape: DecoderShape, batch: int = 1, tokens: int = 1) -> int:
    """A prompt of T tokens: ``B*(2*L*12*C^2*T + 2*L*C*T*(T+1) + 2*V*C)``."""
    L, C, T = shape.layers, shape.d_model, tokens
    return batch * (2 * L * 12 * C**2 * T + 2 * L * C * T * (T + 1) + 2 * shape.vocab * C)


def kv_cache_bytes(shape: DecoderShape, batch: int, context: int, bytes_per_number: int = 4) -> int:
    """``2 * L * B * S * C * bytes``: a key and a value per layer, position and sequence."""
    return 2 * shape.layers * batch * context * shape.d_model * bytes_per_number
