"""Questions on compute: matmul FLOPs, tensor cores, the critical batch, the essay's BERT table
(chapter 01's exercises)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import (
    Context,
    Exercise,
    Question,
    Worked,
    bandwidth,
    given_bandwidth,
    given_peak,
    measured,
    peak,
    peak_ratio,
)

__all__ = ["EXERCISES"]


_MM_SHAPE = (512, 1024, 256)  # (M, K, N) for 01.matmul_flops
#: The essay's BERT table (% of FLOPs, % of runtime) per operator class, from Ivanov et al.,
#: "Data Movement Is All You Need" (https://arxiv.org/abs/2007.00072), as quoted in
#: https://horace.io/brrr_intro.html ("Compute" section). Measured on V100 SXM2 GPUs with
#: fp16 tensor cores (the paper's code, https://github.com/spcl/substation, README).
#: Chapter 01 shows it.
ESSAY_BERT = {
    "tensor contraction": (99.80, 61.0),
    "statistical normalization": (0.17, 25.5),
    "element-wise": (0.03, 13.5),
}
#: The GPU the essay's BERT table was measured on, and the one the essay quotes beside it.
BERT_MEASURED_ON, ESSAY_GPU = "V100", "A100"
_MM_HERE_N = 2048  # square size for 01.matmul_time_here
_CRITICAL_D = 8192  # Linear(_CRITICAL_D, _CRITICAL_D) in bf16 for 01.critical_batch


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


def _tensor_core_ratio(ctx: Context) -> Worked:
    fast = ctx.spec("T4").fast_precision  # fp16: the T4 has no bf16 or TF32 tensor cores
    worked = peak_ratio(ctx, "T4", fast, "fp32")
    return Worked(worked.value, (f"bl.spec('T4').fast_precision: {fast}", *worked.steps))


def _matmul_time_here(ctx: Context) -> Worked:
    n = _MM_HERE_N
    peak, step = measured(ctx, "matmul_flops_per_s")
    return Worked(
        2 * n**3 / peak,
        (
            f"FLOPs = 2 x n^3 = 2 x {n}^3 = {_fmt.si(2 * n**3, 'FLOP')}",
            step,
            "time >= FLOPs / (FLOP/s), in seconds",
        ),
    )


def _critical_batch(ctx: Context) -> Worked:
    # Intensity of [B, D] x [D, D] in bf16: 2BD^2 / (2(BD + D^2 + BD)) ~ B when B << D.
    ridge = peak(ctx, "H100", "bf16") / bandwidth(ctx, "H100")
    return Worked(
        ridge,
        (
            f"FLOPs = 2 B D^2; bytes = 2 (B D + D^2 + B D), nearly all the {_CRITICAL_D}^2 weights "
            "while B << D: intensity ~ 2 B D^2 / (2 D^2) = B FLOP/byte",
            given_peak(ctx, "H100", "bf16"),
            given_bandwidth(ctx, "H100"),
            f"compute-bound once B >= the bf16 ridge point = peak / bandwidth = {ridge:.0f} "
            "(the exact formula, B = R D / (D - 2R), gives a few percent more)",
        ),
    )


def _rate(op_class: str) -> float:
    """An operator class's FLOP/s in units of the whole model's: its FLOP share over its time share."""
    flops, time = ESSAY_BERT[op_class]
    return flops / time


def _bert_gap(ctx: Context) -> Worked:
    mm, norm = _rate("tensor contraction"), _rate("statistical normalization")
    measured_on, essay = ctx.spec(BERT_MEASURED_ON), ctx.spec(ESSAY_GPU)
    units = {s.name: s.peak(s.fast_precision) / s.peak("fp32") for s in (measured_on, essay)}
    return Worked(
        mm / norm,
        (
            "FLOP/s = FLOPs / time, so each class's rate is its % of FLOPs over its % of time",
            f"matmuls: 99.80 / 61.0 = {mm:.3g}; normalization: 0.17 / 25.5 = {norm:.3g} (units: "
            "the model's average FLOP/s)",
            f"ratio = {mm:.3g} / {norm:.3g}; slower units alone would explain "
            + " or ".join(f"{r:.0f}x ({name})" for name, r in units.items()),
        ),
    )


# fmt: off
EXERCISES = (
    Exercise(Question(
        "01.matmul_flops",
        unit="FLOPs", rel_tol=0.01,
        hints=("Each of the M*N outputs is a dot product of length K.",
               "A dot product of length K is K multiplies and K adds."),
        explain="2*M*K*N: the formula every matmul FLOP count (and bl.count) uses.",
    ), _matmul_flops, {0.5: "A multiply-add counts as two FLOPs: one multiply and one add."}),
    Exercise(Question(
        "01.tensor_core_ratio",
        unit="times (a ratio)",
        hints=("bl.spec('T4').fast_precision names the precision its tensor cores take; "
               "peak_flops_per_s is a dict keyed by precision.",
               "Divide bl.spec('T4').peak(bl.spec('T4').fast_precision) by its 'fp32' peak."),
        explain="A T4's tensor cores take fp16 only: in bf16 or TF32 its matmuls get no faster "
        "units, so on a T4 the fast precision is fp16.",
    ), _tensor_core_ratio, lambda ctx: {
        (peak(ctx, "A100", "bf16") / peak(ctx, "A100", "fp32"))
        / (peak(ctx, "T4", "fp16") / peak(ctx, "T4", "fp32")): (
            "That is the A100's ratio (the essay's); the question asks for the T4."),
    }),
    Exercise(Question(
        "01.matmul_time_here",
        unit="seconds",
        hints=("time >= FLOPs / (FLOP/s). Count the FLOPs first.",
               "FLOPs = 2*n**3; divide by bl.measure_ceilings().matmul_flops_per_s."),
        explain="Compare with bl.benchmark(torch.mm, a, b): how close does this machine get?",
    ), _matmul_time_here, {0.5: "A multiply-add counts as two FLOPs: one multiply and one add."}),
    Exercise(Question(
        "01.critical_batch",
        unit="rows (a batch size)",
        hints=("Compute-bound means the intensity is at least the ridge point, peak FLOP/s over "
               "bytes per second, for the precision that runs.",
               "bl.spec('H100').ridge_point_flops_per_byte('bf16'), and intensity ~ B."),
        explain="Hundreds of rows: a batch of a few sequences decoding one token each sits far "
        "below it, reading all the weights for very little arithmetic.",
    ), _critical_batch, lambda ctx: {
        (peak(ctx, "H100", "fp32") / bandwidth(ctx, "H100"))
        / (peak(ctx, "H100", "bf16") / bandwidth(ctx, "H100")): (
            "That is the fp32 ridge point (no tensor cores); the layer runs in bf16."),
        2.0: "In fp32 (4 bytes a number) the intensity is B/2; in bf16 (2 bytes) it is about B.",
    }),
    Exercise(Question(
        "01.bert_gap",
        unit="times (a ratio)",
        hints=("FLOP/s is FLOPs divided by time; the shares stand in for both (the totals cancel).",
               "Rate of a class = its % of FLOPs / its % of time. Divide the matmuls' rate by "
               "normalization's."),
        explain="Far more than slower units explain: normalization does a few FLOPs per byte it "
        "moves, so it waits on memory. The same arithmetic gives element-wise ops ~700x.",
    ), _bert_gap, {
        (99.80 / 0.17) / ((99.80 / 61.0) / (0.17 / 25.5)): (
            "That compares FLOPs only; the question is about FLOPs per second: divide each "
            "class's FLOP share by its time share first."),
    }),
)
# fmt: on
