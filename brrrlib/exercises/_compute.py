"""Solvers of chapter 01's questions: matmul FLOPs, tensor cores, the critical batch, the essay's
BERT table."""

from brrrlib.exercises._bank import Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

#: The essay's BERT table (% of FLOPs, % of runtime) per operator class, from Ivanov et al.,
#: "Data Movement Is All You Need" (https://arxiv.org/abs/2007.00072), as quoted in
#: https://horace.io/brrr_intro.html ("Compute" section); measured on V100s (fp16 tensor cores).
_ESSAY_BERT = {"tensor contraction": (99.80, 61.0), "statistical normalization": (0.17, 25.5)}


@solves("01.matmul_flops")
def _matmul_flops(ctx: Context) -> Worked:
    m, k, n = 512, 1024, 256
    steps = (f"M, K, N = {m}, {k}, {n}", "each of M x N outputs: K multiplies and K adds")
    return Worked(2 * m * k * n, steps)


@solves("01.tensor_core_ratio")
def _tensor_core_ratio(ctx: Context) -> Worked:
    fast = ctx.note("bl.spec('T4').fast_precision", ctx.spec("T4").fast_precision)  # fp16 only
    ratio = ctx.peak("T4", fast) / ctx.peak("T4", "fp32")
    a100 = ctx.spec("A100").peak("bf16") / ctx.spec("A100").peak("fp32")
    return Worked(ratio, slips={"a100_ratio": a100 / ratio})


@solves("01.matmul_time_here")
def _matmul_time_here(ctx: Context) -> Worked:
    flops = ctx.note("FLOPs = 2 x 2048^3", 2 * 2048**3, "FLOP")
    return Worked(flops / ctx.measured("matmul_flops_per_s")[0])


@solves("01.critical_batch")
def _critical_batch(ctx: Context) -> Worked:
    # [B, D] x [D, D] in bf16: 2BD^2 FLOPs over 2(2BD + D^2) bytes, about B per byte while B << D
    ridge = ctx.peak("H100", "bf16") / ctx.bandwidth("H100")
    step = "intensity ~ B FLOP/byte (D = 8192): compute-bound from B = the bf16 ridge point"
    h100 = ctx.spec("H100")
    return Worked(ridge, (step,), {"fp32_ridge": h100.peak("fp32") / h100.peak("bf16")})


@solves("01.bert_gap")
def _bert_gap(ctx: Context) -> Worked:
    (mm_flops, mm_time), (norm_flops, norm_time) = _ESSAY_BERT.values()
    mm = ctx.note("matmuls' rate: 99.80% of FLOPs / 61.0% of time", mm_flops / mm_time)
    norm = ctx.note("normalization's: 0.17% / 25.5%", norm_flops / norm_time)
    units = (
        f"{s.peak(s.fast_precision) / s.peak('fp32'):.0f}x ({s.name})"
        for s in map(ctx.spec, ("V100", "A100"))
    )
    ctx.note("slower units alone would explain", " or ".join(units))
    return Worked(mm / norm, slips={"flops_only": mm_flops / norm_flops / (mm / norm)})
