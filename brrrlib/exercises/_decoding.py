"""Questions on language-model inference: decode's floor, prefill, the KV cache, tensor parallelism.

Chapter 06's exercises. Each solver computes from the spec tables: devices
(``bl.spec``) and links (``bl.hardware.link``). Typed-in numbers are the ones
a prompt states: the model's size and shape (a Llama-2-7B-like model), a
prompt's length, and the latency assumed for one all-reduce.
"""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.distributed._comm_model import ring_factor
from brrrlib.exercises._bank import (
    Context,
    Exercise,
    Question,
    Worked,
    bandwidth,
    given_bandwidth,
    given_peak,
    peak,
)

__all__ = ["EXERCISES"]

# The model every question is about: 7 billion parameters, 32 layers of width 4,096 (Llama 2 7B's
# shape, every head with its own key and value), weights and activations in bf16.
_PARAMS, _LAYERS, _WIDTH, _BF16 = 7e9, 32, 4096, 2
# 06.tp8_tokens_per_s: GPUs, and the fixed cost assumed for one small all-reduce over NVLink.
_GPUS, _ALPHA_S = 8, 10e-6


def _decode_floor_tokens(ctx: Context) -> Worked:
    nbytes = _PARAMS * _BF16
    return Worked(
        bandwidth(ctx, "H100") / nbytes,
        (
            f"weights: {_fmt.si(_PARAMS)} parameters x 2 bytes (bf16) = {_fmt.si(nbytes, 'B')}, "
            "all read once per token",
            given_bandwidth(ctx, "H100"),
            "tokens/s = bandwidth / weight bytes",
        ),
    )


def _prefill_over_decode(ctx: Context) -> Worked:
    flops_per_token = 2 * _PARAMS
    prefill = peak(ctx, "H100", "bf16") / flops_per_token
    decode = bandwidth(ctx, "H100") / (_PARAMS * _BF16)
    return Worked(
        prefill / decode,
        (
            given_peak(ctx, "H100", "bf16"),
            f"prefill: peak / (2 x {_fmt.si(_PARAMS)} FLOPs per token) = {prefill:,.0f} tokens/s",
            given_bandwidth(ctx, "H100"),
            f"decode: bandwidth / {_fmt.si(_PARAMS * _BF16, 'B')} per token = {decode:,.0f} tokens/s",
            "the ratio is peak / bandwidth x (2 bytes / 2 FLOPs): the bf16 ridge point",
        ),
    )


def _kv_context(ctx: Context) -> Worked:
    per_token = 2 * _LAYERS * _WIDTH * _BF16
    weights = _PARAMS * _BF16
    return Worked(
        weights / per_token,
        (
            f"KV cache per token: a key and a value (2) x {_LAYERS} layers x {_WIDTH:,} numbers x "
            f"2 bytes = {_fmt.si(per_token, 'B')}",
            f"weights: {_fmt.si(_PARAMS)} x 2 bytes = {_fmt.si(weights, 'B')}",
            "context = weight bytes / KV bytes per token",
        ),
    )


def _tp_step_s(ctx: Context, n: int, *, allreduces: int = 2) -> float:
    from brrrlib.hardware import link

    weights_s = _PARAMS * _BF16 / n / bandwidth(ctx, "H100")
    message = _WIDTH * _BF16  # one token's activations
    one = _ALPHA_S + ring_factor(n) * message / link("NVLink 4").bandwidth_bytes_per_s
    return weights_s + allreduces * _LAYERS * one


def _tp8_tokens_per_s(ctx: Context) -> Worked:
    from brrrlib.hardware import link

    nvlink = link("NVLink 4")
    step = _tp_step_s(ctx, _GPUS)
    return Worked(
        1 / step,
        (
            given_bandwidth(ctx, "H100"),
            f"weights per GPU: {_fmt.si(_PARAMS * _BF16, 'B')} / {_GPUS}, read in "
            f"{_fmt.seconds(_PARAMS * _BF16 / _GPUS / bandwidth(ctx, 'H100'))}",
            f"{nvlink.name}: {_fmt.si(nvlink.bandwidth_bytes_per_s, 'B/s')} each way; one all-reduce of "
            f"{_WIDTH * _BF16:,} bytes: alpha {_fmt.seconds(_ALPHA_S)} + 2(n-1)/n x bytes / bandwidth",
            f"2 all-reduces x {_LAYERS} layers per token",
            f"time per token {_fmt.seconds(step)}; tokens/s = 1 / time",
        ),
    )


def _tp_mistakes(ctx: Context) -> dict[float, str]:
    right = _tp_step_s(ctx, _GPUS)
    no_comm = _PARAMS * _BF16 / _GPUS / bandwidth(ctx, "H100")
    return {
        right / no_comm: "That is the weights alone: each layer also pays two all-reduces, and at "
        "this message size their fixed cost alpha is what counts.",
        right / _tp_step_s(ctx, _GPUS, allreduces=1): "Two all-reduces per layer (after the "
        "attention and after the MLP), not one.",
        right
        / (
            right - no_comm + _PARAMS * _BF16 / bandwidth(ctx, "H100")
        ): "Each GPU reads only its eighth of the weights: divide the weight bytes by 8.",
    }


# fmt: off
EXERCISES = (
    Exercise(Question(
        "06.decode_floor_tokens",
        unit="tokens/s",
        hints=("At batch 1 every token reads every weight once, and does only 2 FLOPs with each: "
               "the bytes, not the FLOPs, set the pace.",
               "tokens/s = bl.spec('H100').mem_bandwidth_bytes_per_s / (7e9 x 2 bytes)."),
        explain="gpt-fast's 'bandwidth achieved' is this floor read backwards: weight bytes x "
                "tokens/s, set beside the bandwidth.",
    ), _decode_floor_tokens, {
        0.5: "bf16 stores a weight in 2 bytes, not 4.",
        2.0: "bf16 stores a weight in 2 bytes: count 2 per parameter.",
    }),
    Exercise(Question(
        "06.prefill_over_decode",
        unit="x",
        hints=("Prefill's tokens/s is the bf16 peak over 2 FLOPs per parameter per token; decode's "
               "is the bandwidth over 2 bytes per parameter per token.",
               "The parameter count cancels: the ratio is peak / bandwidth (FLOPs per byte)."),
        explain="The ratio is the ridge point: a prompt token costs the H100 hundreds of times "
                "less than a generated one.",
    ), _prefill_over_decode, {
        2.0: "Decode reads 2 bytes per parameter (bf16), not 4.",
        0.5: "Decode reads 2 bytes per parameter (bf16), not 1.",
    }),
    Exercise(Question(
        "06.kv_context",
        unit="tokens",
        hints=("Per token of context, every layer keeps a key and a value: two vectors of the "
               "model's width.",
               "context = (7e9 x 2 bytes) / (2 x 32 x 4096 x 2 bytes)."),
        explain="Past this context the cache, not the weights, is most of what decode reads: "
                "grouped-query attention shrinks it for that reason.",
    ), _kv_context, {
        2.0: "Each position keeps a key AND a value: count 2 vectors per layer.",
        _LAYERS: "Every one of the 32 layers keeps its own keys and values.",
        0.5: "A key and a value are 4,096 numbers each, per layer: count the 2 once.",
    }),
    Exercise(Question(
        "06.tp8_tokens_per_s",
        unit="tokens/s",
        hints=("Time per token = the time to read 1/8 of the weights + 2 x 32 all-reduces, "
               "each alpha + 2(n-1)/n x 8,192 bytes / NVLink bandwidth.",
               "Weights: 14e9 / 8 / bl.spec('H100').mem_bandwidth_bytes_per_s; the all-reduces "
               "are about 64 x 10 µs (the bytes add under 1%)."),
        explain="Eight times the bandwidth did not give eight times the tokens: at batch 1 each "
                "all-reduce moves a few kilobytes and costs its latency.",
    ), _tp8_tokens_per_s, _tp_mistakes),
)
# fmt: on
