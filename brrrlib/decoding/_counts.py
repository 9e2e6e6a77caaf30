"""A decoder counted by hand: parameters, bytes a step reads, FLOPs a step does (chapter 06).

Pure arithmetic on a :class:`~brrrlib.decoding.DecoderShape` (L layers, width
C = ``d_model``, vocabulary V, ``max_context`` positions), the counts that set
a language model's floors:

* **parameters**: ``V*C`` token embeddings (also the output head: GPT-2 ties
  them), ``max_context*C`` positions, and per block ``12*C^2 + 13*C``: the
  fused q, k, v projection ``3C^2 + 3C``, the output projection ``C^2 + C``,
  the MLP ``4C^2 + 4C`` and ``4C^2 + C``, two LayerNorms ``4C``; then the
  final LayerNorm ``2C``.
* **weight bytes per step**: a step reads every weight once, except the two
  embedding tables: of those it reads one row per token, but the tied head
  reads the token table whole. So: every parameter but the position table.
  Weight-only int8 stores the matmuls' weights in one byte each, plus one
  scale per output row; biases and norms stay 2 bytes.
* **FLOPs**: a matmul does 2 FLOPs (a multiply and an add) per weight per
  token; attention does ``4*C`` per layer per position attended (``q . k``
  and ``p . v``, ``2*C`` each). The LayerNorms, GELU and residual adds do a
  few FLOPs per activation, under 1% of the total: they are left out.
* **KV cache**: a key and a value of ``C`` numbers per layer per position.
"""

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
    """Bytes of weights one decode step reads: every parameter but the position table.

    ``precision`` is ``"fp32"``, ``"bf16"``, ``"fp16"`` or ``"int8"``
    (weight-only: the matmuls' weights in 1 byte and one 2-byte scale per
    output row, ``9*C`` per block and ``V`` for the head; the rest in 2 bytes).
    """
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
    """One decode step, one new token per sequence: ``B*(2*matmul_weights + 4*L*S*C)``.

    ``context`` (S) is the number of positions each new token attends to:
    with the static cache of :mod:`~brrrlib.decoding`, its whole length.
    """
    L, C = shape.layers, shape.d_model
    return batch * (2 * matmul_weights(shape) + 4 * L * context * C)


def prefill_flops(shape: DecoderShape, batch: int = 1, tokens: int = 1) -> int:
    """A prompt of T tokens: ``B*(2*L*12*C^2*T + 2*L*C*T*(T+1) + 2*V*C)``.

    Every block's matmuls run on all T tokens; causal attention pairs token
    ``i`` with ``i + 1`` positions, ``T*(T+1)/2`` pairs of ``4*C`` FLOPs per
    layer; the head runs on the last position only.
    """
    L, C, T = shape.layers, shape.d_model, tokens
    return batch * (2 * L * 12 * C**2 * T + 2 * L * C * T * (T + 1) + 2 * shape.vocab * C)


def kv_cache_bytes(shape: DecoderShape, batch: int, context: int, bytes_per_number: int = 4) -> int:
    """``2 * L * B * S * C * bytes``: a key and a value per layer, position and sequence."""
    return 2 * shape.layers * batch * context * shape.d_model * bytes_per_number
