"""Solvers of chapter 06's questions: decode's floor, prefill, KV cache, drafts, tensor parallel."""

from brrrlib.distributed._comm_model import ring_factor
from brrrlib.exercises._bank import Context, Worked, solves
from brrrlib.exercises._distributed import NVLINK, weight_bytes
from brrrlib.hardware import link

__all__: list[str] = []  # the solvers register themselves with the bank

# The model: 7e9 parameters, 32 layers of width 4,096 (Llama 2 7B's shape), bf16 (2 bytes).
_PARAMS, _LAYERS, _WIDTH, _BF16 = 7e9, 32, 4096, 2
# 06.tp8_tokens_per_s: GPUs, and the fixed cost assumed for one small all-reduce over NVLink.
_GPUS, _ALPHA_S = 8, 10e-6


@solves("06.decode_floor_tokens")
def _decode_floor_tokens(ctx: Context) -> Worked:
    return Worked(ctx.bandwidth("H100") / weight_bytes(ctx))


@solves("06.prefill_over_decode")
def _prefill_over_decode(ctx: Context) -> Worked:
    prefill = ctx.note("prefill_tokens_per_s", ctx.peak("H100", "bf16") / (2 * _PARAMS))
    decode = ctx.note("decode_tokens_per_s", ctx.bandwidth("H100") / weight_bytes(ctx))
    return Worked(prefill / decode)


@solves("06.kv_context")
def _kv_context(ctx: Context) -> Worked:
    per_token = ctx.note("kv_bytes_per_token", 2 * _LAYERS * _WIDTH * _BF16, "B")
    return Worked(weight_bytes(ctx) / per_token, slips={"one_layer": _LAYERS})


@solves("06.spec_tokens_per_check")
def _spec_tokens_per_check(ctx: Context) -> Worked:
    n, p = 5, 0.7  # drafted tokens, and the chance each is accepted
    kept = [p**i for i in range(n + 1)]  # the check's own token, then drafted token i
    tokens = sum(kept)
    steps = (" + ".join(f"{k:.3g}" for k in kept),)
    slips = {"all_accepted": n + 1, "independent": 1 + n * p, "drafts_only": tokens - 1}
    return Worked(tokens, steps, {k: v / tokens for k, v in slips.items()})


def _tp_token_s(bandwidth: float, allreduces: int = 2, shard: int = _GPUS) -> float:
    """A token's time on 8 GPUs: 1 / ``shard`` of the weights each, ``allreduces`` a layer."""
    one = _ALPHA_S + ring_factor(_GPUS) * _WIDTH * _BF16 / link(NVLINK).bandwidth_bytes_per_s
    return _PARAMS * _BF16 / shard / bandwidth + allreduces * _LAYERS * one


@solves("06.tp8_tokens_per_s")
def _tp8_tokens_per_s(ctx: Context) -> Worked:
    bw = ctx.bandwidth("H100")
    token_s = ctx.note("token_s", _tp_token_s(bw), "s")
    wrong = {"weights_alone": _tp_token_s(bw, 0), "one_allreduce": _tp_token_s(bw, 1)}
    wrong["all_weights"] = _tp_token_s(bw, shard=1)
    return Worked(1 / token_s, slips={k: token_s / v for k, v in wrong.items()})
