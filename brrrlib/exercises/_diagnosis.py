"""Solvers of the questions on diagnosis: the mystery workloads, the block's floors, a decode
step (chapter 04)."""

from __future__ import annotations

import functools

from brrrlib import _fmt
from brrrlib.exercises._bank import Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

_MYSTERY_METHOD = (
    "estimate three times: FLOPs / matmul FLOP/s, bytes / bandwidth, ops x overhead per op "
    "(bl.count gives FLOPs, bytes and ops; bl.measure_ceilings the three rates)",
    "the largest of the three is the regime",
)
_DECODER_PARAMS = 8e9  # parameters of 04.decode_token_ms's decoder (a Llama-3-8B-sized model)


def _mystery(regime: str, ctx: Context) -> Worked:
    """A mystery workload (workloads.mystery_*) is built to be ``regime``-bound."""
    return Worked(regime, _MYSTERY_METHOD)


for _letter, _regime in (("a", "memory"), ("b", "overhead"), ("c", "compute")):
    solves(f"04.mystery_{_letter}")(functools.partial(_mystery, _regime))


@solves("04.decode_token_ms")
def _decode_token_ms(ctx: Context) -> Worked:
    nbytes = _DECODER_PARAMS * 2  # bf16
    compute_s = 2 * _DECODER_PARAMS / ctx.peak("H100", "bf16")
    return Worked(
        nbytes / ctx.bandwidth("H100") * 1e3,
        (
            f"weights: {_DECODER_PARAMS / 1e9:.0f}e9 parameters x 2 bytes (bf16) = "
            f"{_fmt.si(nbytes, 'B')}, all read once per token",
            ctx.bandwidth_step("H100"),
            f"compute needs only 2 x {_DECODER_PARAMS / 1e9:.0f}e9 FLOPs = "
            f"{_fmt.seconds(compute_s)} at the bf16 peak: memory sets the time",
            "time = bytes / bandwidth, in seconds; x 1e3 for ms",
        ),
        {"compute_floor": compute_s / (nbytes / ctx.bandwidth("H100"))},
    )


@functools.cache
def _block_counts(batch: int):
    """bl.count of workloads.transformer_block(batch) on the course device (counted once)."""
    from brrrlib.counting import count
    from brrrlib.workloads import transformer_block

    block, args = transformer_block(batch=batch)
    return count(block, *args)


@solves("04.block_lower_bound_us")
def _block_lower_bound_us(ctx: Context) -> Worked:
    """The block's floors as ``bl.diagnosis.floors`` sets them; the largest is the lower bound."""
    from brrrlib.diagnosis import floors

    counts = _block_counts(16)
    fl = floors(counts, ctx.ceilings)
    floors_s = (fl.compute_s, fl.memory_s, fl.overhead_s)
    lower_s = max(floors_s)
    split = ", ".join(f"{k} {_fmt.seconds(v)}" for k, v in fl.compute_by_precision_s.items())
    special = ", ".join(f"{k} {_fmt.seconds(v)}" for k, v in fl.special_s.items())
    _, bw_step = ctx.measured("mem_bandwidth_bytes_per_s")
    _, o_step = ctx.measured("op_overhead_s")
    slips = {"sum_of_floors": sum(floors_s) / lower_s}
    if min(floors_s) / lower_s < 0.8:  # only a distinct slip when the floors differ
        slips["smallest_floor"] = min(floors_s) / lower_s
    return Worked(
        lower_s * 1e6,
        (
            f"bl.count: {_fmt.si(counts.flops, 'FLOP')}, {_fmt.si(counts.bytes_moved, 'B')} moved, "
            f"{getattr(counts, 'work_ops', counts.ops)} ops that do work",
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
        slips,
    )
