"""Solvers of the questions on overhead: Python's speed, the break-even size, the batch test
(chapter 03)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import FP32_BYTES, Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

# a + b on fp32 reads two numbers and writes one: 3 x 4 bytes per element.
_ADD_BYTES_PER_ELEMENT = 3 * FP32_BYTES
# 03.overhead_fraction: doubling the batch makes the step this much longer.
_DOUBLED_BATCH_TIME = 1.1
_LINEAR = 4096  # Linear(_LINEAR, _LINEAR) for 03.weight_read_us
# 03.sync_per_op_us: the host's time to launch one op, and one kernel's time on the GPU.
_SYNC_HOST_US, _SYNC_KERNEL_US = 15.0, 15.0


@solves("03.python_vs_h100")
def _python_vs_h100(ctx: Context) -> Worked:
    # The essay's figure for how many additions per second a Python loop does
    # (https://horace.io/brrr_intro.html, section "Overhead"); chapter 03 measures it here.
    from brrrlib.hardware import ESSAY_PYTHON_ADDS_PER_S

    peak = ctx.peak("H100", "bf16")
    return Worked(
        peak / ESSAY_PYTHON_ADDS_PER_S,
        (
            ctx.peak_step("H100", "bf16"),
            f"Python, in the essay: {_fmt.si(ESSAY_PYTHON_ADDS_PER_S)} additions per second",
            "FLOPs per Python addition = FLOP/s / (additions per second)",
        ),
        {
            "fp32_peak": ctx.peak("H100", "fp32") / peak,
            "a100_peak": ctx.peak("A100", "bf16") / peak,
        },
    )


@solves("03.break_even_numel")
def _break_even_numel(ctx: Context) -> Worked:
    overhead, o_step = ctx.measured("op_overhead_s")
    bw, bw_step = ctx.measured("mem_bandwidth_bytes_per_s")
    return Worked(
        overhead * bw / _ADD_BYTES_PER_ELEMENT,
        (
            o_step,
            bw_step,
            "bytes per element: 2 reads + 1 write, 4 bytes each = 12",
            "n x 12 / bandwidth = overhead, so n = overhead x bandwidth / 12",
        ),
        {"bytes": _ADD_BYTES_PER_ELEMENT},
    )


@solves("03.sync_per_op_us")
def _sync_per_op_us(ctx: Context) -> Worked:
    ahead = max(_SYNC_HOST_US, _SYNC_KERNEL_US)
    synced = _SYNC_HOST_US + _SYNC_KERNEL_US
    return Worked(
        synced,
        (
            f"running ahead: per op, the slower of host and kernel = {ahead:g} µs",
            "a sync empties the queue: the host launches the next op only after the kernel ends",
            f"per op: host + kernel = {_SYNC_HOST_US:g} + {_SYNC_KERNEL_US:g} µs",
        ),
        {"no_sync": ahead / synced},
    )


@solves("03.overhead_fraction")
def _overhead_fraction(ctx: Context) -> Worked:
    # T(b) = O + W and T(2b) = O + 2W = 1.1 T(b)  =>  W = 0.1 T(b)  =>  O / T(b) = 0.9
    work = _DOUBLED_BATCH_TIME - 1.0
    overhead = 1.0 - work
    return Worked(
        overhead,
        (
            "T(b) = O + W and T(2b) = O + 2W: doubling the batch adds one more W",
            f"T(2b) = {_DOUBLED_BATCH_TIME} T(b), so W = {_fmt.percent(work, 1)} of T(b)",
            "O = T(b) - W, so the overhead's share is 1 - W / T(b)",
        ),
        {"work_share": work / overhead, "above_one": 1.0 / overhead},
    )


@solves("03.weight_read_us")
def _weight_read_us(ctx: Context) -> Worked:
    nbytes = _LINEAR * _LINEAR * FP32_BYTES
    return Worked(
        nbytes / ctx.bandwidth("A100") * 1e6,
        (
            f"weight bytes = {_LINEAR} x {_LINEAR} x 4 = {_fmt.binary_bytes(nbytes)}",
            ctx.bandwidth_step("A100"),
            "time = bytes / bandwidth, in seconds; x 1e6 for µs",
        ),
    )
