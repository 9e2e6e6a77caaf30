"""Questions on diagnosis: the mystery workloads, the block's floors, a decode step (chapter 04's exercises)."""

from __future__ import annotations

import functools

from brrrlib import _fmt
from brrrlib.exercises._bank import (
    REGIMES,
    Context,
    Exercise,
    Question,
    Worked,
    bandwidth,
    given_bandwidth,
    measured,
    peak,
)

__all__ = ["EXERCISES"]


_MYSTERY_NUDGES = {
    "compute": "If it were compute-bound, FLOPs / matmul FLOP/s would come close to its "
    "measured time. Count its FLOPs: are there that many?",
    "memory": "If it were memory-bound, bytes moved / bandwidth would come close to its "
    "measured time. Count its bytes: are there that many?",
    "overhead": "If it were overhead-bound, (number of ops) x (overhead per op) would come "
    "close to its measured time. Are there that many ops, each that small?",
}
_MYSTERY_METHOD = (
    "estimate three times: FLOPs / matmul FLOP/s, bytes / bandwidth, ops x overhead per op "
    "(bl.count gives FLOPs, bytes and ops; bl.measure_ceilings the three rates)",
    "the largest of the three is the regime",
)


def _mystery(letter: str, regime: str, why: str) -> Exercise:
    question = Question(
        f"04.mystery_{letter}",
        choices=REGIMES,
        hints=(
            "Estimate three times: FLOPs / matmul FLOP/s, bytes / bandwidth, ops x overhead per "
            "op (bl.measure_ceilings() has all three rates). The largest wins.",
            "bl.count(fn, *args) gives FLOPs, bytes and the number of ops; divide by the rates.",
        ),
        explain=why,
    )
    nudges = {k: v for k, v in _MYSTERY_NUDGES.items() if k != regime}
    return Exercise(question, lambda ctx: Worked(regime, (*_MYSTERY_METHOD, why)), nudges)


@functools.cache
def _block_counts(batch: int):
    """bl.count of workloads.transformer_block(batch) on the course device (counted once)."""
    from brrrlib.counting import count
    from brrrlib.workloads import transformer_block

    block, args = transformer_block(batch=batch)
    return count(block, *args)


def _block_floors_s(ctx: Context, batch: int) -> tuple[float, float, float]:
    """(compute, memory, overhead) floors in seconds of the block on this machine, as
    ``bl.diagnosis.floors`` sets them: matmul FLOPs at the matmul roof of their precision,
    the rest at the vector (and special-function) rates; bytes at the bandwidth; ops that do
    work at the cheapest op's cost."""
    from brrrlib.diagnosis import floors

    fl = floors(_block_counts(batch), ctx.ceilings)
    return fl.compute_s, fl.memory_s, fl.overhead_s


def _block_lower_bound_us(ctx: Context) -> Worked:
    from brrrlib.diagnosis import floors

    counts = _block_counts(16)
    fl = floors(counts, ctx.ceilings)
    split = ", ".join(f"{k} {_fmt.seconds(v)}" for k, v in fl.compute_by_precision_s.items())
    special = ", ".join(f"{k} {_fmt.seconds(v)}" for k, v in fl.special_s.items())
    (_bw, bw_step), (_o, o_step) = (
        measured(ctx, "mem_bandwidth_bytes_per_s"),
        measured(ctx, "op_overhead_s"),
    )
    ops = getattr(counts, "work_ops", counts.ops)
    return Worked(
        max(fl.compute_s, fl.memory_s, fl.overhead_s) * 1e6,
        (
            f"bl.count: {_fmt.si(counts.flops, 'FLOP')}, {_fmt.si(counts.bytes_moved, 'B')} moved, "
            f"{ops} ops that do work",
            f"compute floor = matmul FLOPs / matmul FLOP/s + the rest / vector FLOP/s"
            f"{' (+ special functions at their rates)' if special else ''}: {split}"
            f"{'; ' + special if special else ''}; in all {_fmt.seconds(fl.compute_s)}",
            bw_step,
            f"memory floor = bytes / bandwidth = {_fmt.seconds(fl.memory_s)}",
            o_step,
            f"overhead floor = ops x op overhead = {_fmt.seconds(fl.overhead_s)}",
            "if computing, moving and dispatching all overlapped, the slowest alone would set the "
            "time: the largest floor, in µs",
        ),
    )


def _block_mistakes(ctx: Context) -> dict[float, str]:
    floors_s = _block_floors_s(ctx, 16)
    lower_s = max(floors_s)
    out = {
        sum(floors_s) / lower_s: "You added the floors: that is the serial model's upper "
        "bound. The lower bound takes the largest."
    }
    smallest = min(floors_s) / lower_s
    if smallest < 0.8:  # only a distinct slip when the floors differ
        out[smallest] = "You took the smallest floor; the slowest resource sets the bound."
    return out


_DECODER_PARAMS = 8e9  # parameters of 04.decode_token_ms's decoder (a Llama-3-8B-sized model)


def _decode_token_ms(ctx: Context) -> Worked:
    nbytes = _DECODER_PARAMS * 2  # bf16
    return Worked(
        nbytes / bandwidth(ctx, "H100") * 1e3,
        (
            f"weights: {_DECODER_PARAMS / 1e9:.0f}e9 parameters x 2 bytes (bf16) = "
            f"{_fmt.si(nbytes, 'B')}, all read once per token",
            given_bandwidth(ctx, "H100"),
            f"compute needs only 2 x {_DECODER_PARAMS / 1e9:.0f}e9 FLOPs = "
            f"{_fmt.seconds(2 * _DECODER_PARAMS / peak(ctx, 'H100', 'bf16'))} at the bf16 peak: "
            "memory sets the time",
            "time = bytes / bandwidth, in seconds; x 1e3 for ms",
        ),
    )


# fmt: off
EXERCISES = (
    _mystery("a", "memory",
             "Five pointwise ops over tens of megabytes: about one FLOP per 8 bytes, far below "
             "the ridge point. The trucks set the pace; fusing the ops (torch.compile) is the "
             "remedy."),
    _mystery("b", "overhead",
             "Two tiny in-place ops per parameter, over a hundred parameters: each op moves a few "
             "KB and pays the full dispatch cost. torch._foreach_* or a fused optimizer is the "
             "remedy."),
    _mystery("c", "compute",
             "A matmul of thousands of tokens by a square weight does hundreds of FLOPs per byte: "
             "far above the ridge point. Only faster math helps: tensor cores, lower precision."),
    Exercise(Question(
        "04.decode_token_ms",
        unit="ms",
        hints=("At batch 1 each weight is used for one multiply-add per token: 2 FLOPs per 2 "
               "bytes, far below the ridge point. Which floor sets the time?",
               "time >= weight bytes / bandwidth; bytes = parameters x 2 (bf16); seconds x 1e3 "
               "for ms."),
        explain="Memory-bound: a few hundred tokens per second at best. Serving B sequences at "
        "once reads each weight once for B tokens, which is why servers batch requests.",
    ), _decode_token_ms, lambda ctx: {
        2.0: "Each bf16 parameter is 2 bytes, not 4: that would be fp32.",
        0.5: "Count bytes, not parameters: each bf16 parameter is 2 bytes.",
        (2 * _DECODER_PARAMS / peak(ctx, "H100", "bf16"))
        / (2 * _DECODER_PARAMS / bandwidth(ctx, "H100")): (
            "That is the compute floor. At batch 1 the bytes take far longer than the FLOPs."),
    }),
    Exercise(Question(
        "04.block_lower_bound_us",
        unit="µs", rel_tol=0.15,
        hints=("Three floors: the FLOPs over the rates that run them (matmuls at the matmul "
               "FLOP/s, the rest at the vector FLOP/s), the bytes over the bandwidth, the ops "
               "times the cheapest op's cost. The call cannot finish before the slowest is done.",
               "fl = bl.diagnosis.floors(counts, c) gives fl.compute_s, fl.memory_s and "
               "fl.overhead_s; the lower bound is the largest, in µs."),
        explain="Compare it with the measured time: the gap is what overhead and imperfect "
        "kernels cost.",
    ), _block_lower_bound_us, _block_mistakes),
)
# fmt: on
