"""Questions on compute: matmul FLOPs, tensor cores, the essay's BERT table (chapter 01's exercises)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import (
    REGIMES,
    Context,
    Exercise,
    Question,
    Worked,
    bandwidth,
    measured,
    peak,
    peak_ratio,
)

__all__ = ["EXERCISES"]


_MM_SHAPE = (512, 1024, 256)  # (M, K, N) for 01.matmul_flops
#: The essay's BERT table (% of FLOPs, % of runtime) per operator class, from Ivanov et al.,
#: "Data Movement Is All You Need" (https://arxiv.org/abs/2007.00072), as quoted in
#: https://horace.io/brrr_intro.html ("Compute" section). Chapter 01 shows it.
ESSAY_BERT = {
    "tensor contraction": (99.80, 61.0),
    "statistical normalization": (0.17, 25.5),
    "element-wise": (0.03, 13.5),
}
_MM_HERE_N = 2048  # square size for 01.matmul_time_here


def _matmul_flops(ctx: Context) -> Worked:
    m, k, n = _MM_SHAPE
    return Worked(
        2 * m * k * n,
        (f"M x N = {m} x {n} outputs, each a dot product of length K = {k}",
         "a dot product of length K is K multiplies and K adds: 2K FLOPs",
         f"FLOPs = 2 x M x K x N = 2 x {m} x {k} x {n}"),
    )  # fmt: skip


def _matmul_time_here(ctx: Context) -> Worked:
    n = _MM_HERE_N
    peak, step = measured(ctx, "matmul_flops_per_s")
    return Worked(
        2 * n**3 / peak,
        (f"FLOPs = 2 x n^3 = 2 x {n}^3 = {_fmt.si(2 * n**3, 'FLOP')}", step,
         "time >= FLOPs / (FLOP/s), in seconds"),
    )  # fmt: skip


def _bert_norm(ctx: Context) -> Worked:
    return Worked(
        "memory",
        ("the essay: normalization does 0.17% of the FLOPs in 25.5% of the time, so it runs "
         f"at {_fmt.si(25.5 / 0.17)}x fewer FLOP/s than the model's average",
         "it reads and writes every activation for a few FLOPs per element: far below the "
         f"ridge point (A100 fp32: {_fmt.si(peak(ctx, 'A100', 'fp32') / bandwidth(ctx, 'A100'))} "
         "FLOP/byte)",
         "so the bytes, not the FLOPs, set its time"),
    )  # fmt: skip


def _rate(op_class: str) -> float:
    """An operator class's FLOP/s in units of the whole model's: its FLOP share over its time share."""
    flops, time = ESSAY_BERT[op_class]
    return flops / time


def _bert_gap(ctx: Context) -> Worked:
    mm, norm = _rate("tensor contraction"), _rate("statistical normalization")
    return Worked(
        mm / norm,
        ("FLOP/s = FLOPs / time, so each class's rate is its % of FLOPs over its % of time",
         f"matmuls: 99.80 / 61.0 = {mm:.3g}; normalization: 0.17 / 25.5 = {norm:.3g} (units: "
         "the model's average FLOP/s)",
         f"ratio = {mm:.3g} / {norm:.3g}; units alone would explain "
         f"{peak(ctx, 'A100', 'bf16') / peak(ctx, 'A100', 'fp32'):.0f}x (A100 bf16 / fp32)"),
    )  # fmt: skip


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
        hints=("bl.spec('A100').peak_flops_per_s is a dict keyed by dtype.",
               "Divide the 'bf16' entry by the 'fp32' entry."),
        explain="Anything that is not a matmul runs on the slow units: that is the real price of "
        "'everything else'.",
    ), lambda ctx: peak_ratio(ctx, "A100", "bf16", "fp32")),
    Exercise(Question(
        "01.matmul_time_here",
        unit="seconds",
        hints=("time >= FLOPs / (FLOP/s). Count the FLOPs first.",
               "FLOPs = 2*n**3; divide by bl.measure_ceilings().matmul_flops_per_s."),
        explain="Compare with bl.benchmark(torch.mm, a, b): how close does this machine get?",
    ), _matmul_time_here, {0.5: "A multiply-add counts as two FLOPs: one multiply and one add."}),
    Exercise(Question(
        "01.bert_norm",
        choices=REGIMES,
        hints=("It does almost no arithmetic, yet it reads and writes whole activations.",
               "Count bytes per FLOP: a layer norm moves each element a few times for a few FLOPs."),
        explain="Normalization is memory-bound: the trucks, not the factory, set its time.",
    ), _bert_norm, {
        "compute": "0.17% of the FLOPs cannot fill 25.5% of the time on the factory floor.",
        "overhead": "BERT's activations are large, so each call does real work; think bytes.",
    }),
    Exercise(Question(
        "01.bert_gap",
        unit="times (a ratio)",
        hints=("FLOP/s is FLOPs divided by time; the shares stand in for both (the totals cancel).",
               "Rate of a class = its % of FLOPs / its % of time. Divide the matmuls' rate by "
               "normalization's."),
        explain="Far more than the 16x slower units explain: normalization does a few FLOPs per "
        "byte it moves, so it waits on memory. The same arithmetic gives element-wise ops ~700x.",
    ), _bert_gap, {
        (99.80 / 0.17) / ((99.80 / 61.0) / (0.17 / 25.5)): (
            "That compares FLOPs only; the question is about FLOPs per second: divide each "
            "class's FLOP share by its time share first."),
    }),
)
# fmt: on
