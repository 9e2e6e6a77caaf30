"""Solvers of the questions on compute: matmul FLOPs, tensor cores, the critical batch, the
essay's BERT table (chapter 01)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

_MM_SHAPE = (512, 1024, 256)  # (M, K, N) for 01.matmul_flops
#: The essay's BERT table (% of FLOPs, % of runtime) per operator class, from Ivanov et al.,
#: "Data Movement Is All You Need" (https://arxiv.org/abs/2007.00072), as quoted in
#: https://horace.io/brrr_intro.html ("Compute" section). Measured on V100 SXM2 GPUs with
#: fp16 tensor cores (the paper's code, https://github.com/spcl/substation, README).
#: Chapter 01 shows it.
_ESSAY_BERT = {
    "tensor contraction": (99.80, 61.0),
    "statistical normalization": (0.17, 25.5),
    "element-wise": (0.03, 13.5),
}
#: The GPU the essay's BERT table was measured on, and the one the essay quotes beside it.
_BERT_MEASURED_ON, _ESSAY_GPU = "V100", "A100"
_MM_HERE_N = 2048  # square size for 01.matmul_time_here
_CRITICAL_D = 8192  # Linear(_CRITICAL_D, _CRITICAL_D) in bf16 for 01.critical_batch


@solves("01.matmul_flops")
def _matmul_flops(ctx: Context) -> Worked:
    m, k, n = _MM_SHAPE
    return Worked(
        2 * m * k * n,
        (
            f"M x N = {m} x {n} outputs, each a dot product of length K = {k}",
            "a dot product of length K is K multiplies and K adds: 2K FLOPs",
            f"FLOPs = 2 x M x K x N = 2 x {m} x {k} x {n}",
        ),
    )


@solves("01.tensor_core_ratio")
def _tensor_core_ratio(ctx: Context) -> Worked:
    fast = ctx.spec("T4").fast_precision  # fp16: the T4 has no bf16 or TF32 tensor cores
    ratio = ctx.peak("T4", fast) / ctx.peak("T4", "fp32")
    return Worked(
        ratio,
        (
            f"bl.spec('T4').fast_precision: {fast}",
            ctx.peak_step("T4", fast),
            ctx.peak_step("T4", "fp32"),
            f"ratio = {fast} peak / fp32 peak",
        ),
        {"a100_ratio": ctx.peak("A100", "bf16") / ctx.peak("A100", "fp32") / ratio},
    )


@solves("01.matmul_time_here")
def _matmul_time_here(ctx: Context) -> Worked:
    n = _MM_HERE_N
    peak, step = ctx.measured("matmul_flops_per_s")
    return Worked(
        2 * n**3 / peak,
        (
            f"FLOPs = 2 x n^3 = 2 x {n}^3 = {_fmt.si(2 * n**3, 'FLOP')}",
            step,
            "time >= FLOPs / (FLOP/s), in seconds",
        ),
    )


@solves("01.critical_batch")
def _critical_batch(ctx: Context) -> Worked:
    # Intensity of [B, D] x [D, D] in bf16: 2BD^2 / (2(BD + D^2 + BD)) ~ B when B << D.
    ridge = ctx.peak("H100", "bf16") / ctx.bandwidth("H100")
    return Worked(
        ridge,
        (
            f"FLOPs = 2 B D^2; bytes = 2 (B D + D^2 + B D), nearly all the {_CRITICAL_D}^2 weights "
            "while B << D: intensity ~ 2 B D^2 / (2 D^2) = B FLOP/byte",
            ctx.peak_step("H100", "bf16"),
            ctx.bandwidth_step("H100"),
            f"compute-bound once B >= the bf16 ridge point = peak / bandwidth = {ridge:.0f} "
            "(the exact formula, B = R D / (D - 2R), gives a few percent more)",
        ),
        {"fp32_ridge": ctx.peak("H100", "fp32") / ctx.peak("H100", "bf16")},
    )


def _rate(op_class: str) -> float:
    """An operator class's FLOP/s in units of the whole model's: its FLOP share over its time share."""
    flops, time = _ESSAY_BERT[op_class]
    return flops / time


@solves("01.bert_gap")
def _bert_gap(ctx: Context) -> Worked:
    mm, norm = _rate("tensor contraction"), _rate("statistical normalization")
    measured_on, essay = ctx.spec(_BERT_MEASURED_ON), ctx.spec(_ESSAY_GPU)
    units = {s.name: s.peak(s.fast_precision) / s.peak("fp32") for s in (measured_on, essay)}
    flops_only = _ESSAY_BERT["tensor contraction"][0] / _ESSAY_BERT["statistical normalization"][0]
    return Worked(
        mm / norm,
        (
            "FLOP/s = FLOPs / time, so each class's rate is its % of FLOPs over its % of time",
            f"matmuls: 99.80 / 61.0 = {mm:.3g}; normalization: 0.17 / 25.5 = {norm:.3g} (units: "
            "the model's average FLOP/s)",
            f"ratio = {mm:.3g} / {norm:.3g}; slower units alone would explain "
            + " or ".join(f"{r:.0f}x ({name})" for name, r in units.items()),
        ),
        {"flops_only": flops_only / (mm / norm)},
    )
