"""Solvers of chapter 04's questions: the mystery workloads, a decode step, the block's floors."""

from __future__ import annotations

import functools

from brrrlib.diagnosis import REGIMES, floors
from brrrlib.exercises._bank import Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

_DECODER_PARAMS = 8e9  # parameters of 04.decode_token_ms's decoder (a Llama-3-8B-sized model)


# Each mystery workload (workloads.mystery_*) is built to be bound by one regime.
for _letter, _regime in (("a", "memory"), ("b", "overhead"), ("c", "compute")):
    solves(f"04.mystery_{_letter}")(lambda ctx, r=_regime: Worked(ctx.note("largest_floor", r)))


@solves("04.decode_token_ms")
def _decode_token_ms(ctx: Context) -> Worked:
    nbytes = ctx.note("weight_bytes", _DECODER_PARAMS * 2, "B")  # bf16
    memory_s = ctx.note("memory_s", nbytes / ctx.bandwidth("H100"), "s")
    compute_s = ctx.note("compute_s", 2 * _DECODER_PARAMS / ctx.peak("H100", "bf16"), "s")
    return Worked(memory_s * 1e3, slips={"compute_floor": compute_s / memory_s})


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
    ctx.measured("mem_bandwidth_bytes_per_s")
    ctx.measured("op_overhead_s")
    fl = floors(_block_counts(16), ctx.ceilings)
    floors_s = [ctx.note(f"fl.{r}_s", getattr(fl, f"{r}_s"), "s") for r in REGIMES]
    lower_s = max(floors_s)
    slips = {"sum_of_floors": sum(floors_s) / lower_s}
    if min(floors_s) / lower_s < 0.8:  # only a distinct slip when the floors differ
        slips["smallest_floor"] = min(floors_s) / lower_s
    return Worked(lower_s * 1e6, slips=slips)
