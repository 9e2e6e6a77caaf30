"""Solvers of the questions on language-model inference: decode's floor, prefill, the KV cache,
tensor parallelism (chapter 06).
"""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.distributed._comm_model import ring_factor
from brrrlib.exercises._bank import Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

# The model every question is about: 7 billion parameters, 32 layers of width 4,096 (Llama 2 7B's
# shape, every head with its own key and value), weights and activations in bf16.
_PARAMS, _LAYERS, _WIDTH, _BF16 = 7e9, 32, 4096, 2
_WEIGHT_BYTES = _PARAMS * _BF16
# 06.tp8_tokens_per_s: GPUs, and the fixed cost assumed for one small all-reduce over NVLink.
_GPUS, _ALPHA_S = 8, 10e-6


@solves("06.decode_floor_tokens")
def _decode_floor_tokens(ctx: Context) -> Worked:
    return Worked(
        ctx.bandwidth("H100") / _WEIGHT_BYTES,
        (
            f"weights: {_fmt.si(_PARAMS)} parameters x 2 bytes (bf16) = "
            f"{_fmt.si(_WEIGHT_BYTES, 'B')}, all read once per token",
            ctx.bandwidth_step("H100"),
            "tokens/s = bandwidth / weight bytes",
        ),
    )


@solves("06.prefill_over_decode")
def _prefill_over_decode(ctx: Context) -> Worked:
    prefill = ctx.peak("H100", "bf16") / (2 * _PARAMS)  # 2 FLOPs per parameter per token
    decode = ctx.bandwidth("H100") / _WEIGHT_BYTES
    return Worked(
        prefill / decode,
        (
            ctx.peak_step("H100", "bf16"),
            f"prefill: peak / (2 x {_fmt.si(_PARAMS)} FLOPs per token) = {prefill:,.0f} tokens/s",
            ctx.bandwidth_step("H100"),
            f"decode: bandwidth / {_fmt.si(_WEIGHT_BYTES, 'B')} per token = {decode:,.0f} tokens/s",
            "the ratio is peak / bandwidth x (2 bytes / 2 FLOPs): the bf16 ridge point",
        ),
    )


@solves("06.kv_context")
def _kv_context(ctx: Context) -> Worked:
    per_token = 2 * _LAYERS * _WIDTH * _BF16
    return Worked(
        _WEIGHT_BYTES / per_token,
        (
            f"KV cache per token: a key and a value (2) x {_LAYERS} layers x {_WIDTH:,} numbers x "
            f"2 bytes = {_fmt.si(per_token, 'B')}",
            f"weights: {_fmt.si(_PARAMS)} x 2 bytes = {_fmt.si(_WEIGHT_BYTES, 'B')}",
            "context = weight bytes / KV bytes per token",
        ),
        {"one_layer": _LAYERS},
    )


# 06.spec_tokens_per_check: tokens a draft proposes per check, the chance each is accepted.
_DRAFTED, _ACCEPT = 5, 0.7


@solves("06.spec_tokens_per_check")
def _spec_tokens_per_check(ctx: Context) -> Worked:
    kept = [_ACCEPT**i for i in range(_DRAFTED + 1)]  # its own token, then drafted token i
    tokens = sum(kept)
    return Worked(
        tokens,
        (
            "one token of the large model's own, always",
            f"drafted token i is kept if it and all before it are accepted: {_ACCEPT}^i",
            f"1 + {' + '.join(f'{k:.3g}' for k in kept[1:])} = {tokens:.2f} tokens per check",
        ),
        {
            "all_accepted": (_DRAFTED + 1) / tokens,
            "independent": (1 + _DRAFTED * _ACCEPT) / tokens,
            "drafts_only": (tokens - 1) / tokens,
        },
    )


def _tp_step_s(ctx: Context, n: int, *, allreduces: int = 2, shard: int = 0) -> float:
    """A token's time over ``n`` GPUs: each reads its 1 / ``shard`` of the weights (``shard`` defaults
    to ``n``), then ``allreduces`` all-reduces a layer of one token's activations.
    """
    from brrrlib.hardware import link

    weights_s = _WEIGHT_BYTES / (shard or n) / ctx.bandwidth("H100")
    message = _WIDTH * _BF16  # one token's activations
    one = _ALPHA_S + ring_factor(n) * message / link("NVLink 4").bandwidth_bytes_per_s
    return weights_s + allreduces * _LAYERS * one


@solves("06.tp8_tokens_per_s")
def _tp8_tokens_per_s(ctx: Context) -> Worked:
    from brrrlib.hardware import link

    nvlink = link("NVLink 4")
    step = _tp_step_s(ctx, _GPUS)
    return Worked(
        1 / step,
        (
            ctx.bandwidth_step("H100"),
            f"weights per GPU: {_fmt.si(_WEIGHT_BYTES, 'B')} / {_GPUS}, read in "
            f"{_fmt.seconds(_WEIGHT_BYTES / _GPUS / ctx.bandwidth('H100'))}",
            f"{nvlink.name}: {_fmt.si(nvlink.bandwidth_bytes_per_s, 'B/s')} each way; one "
            f"all-reduce of {_WIDTH * _BF16:,} bytes: alpha {_fmt.seconds(_ALPHA_S)} + 2(n-1)/n x "
            "bytes / bandwidth",
            f"2 all-reduces x {_LAYERS} layers per token",
            f"time per token {_fmt.seconds(step)}; tokens/s = 1 / time",
        ),
        {
            "weights_alone": step / _tp_step_s(ctx, _GPUS, allreduces=0),
            "one_allreduce": step / _tp_step_s(ctx, _GPUS, allreduces=1),
            "all_weights": step / _tp_step_s(ctx, _GPUS, shard=1),
        },
    )
