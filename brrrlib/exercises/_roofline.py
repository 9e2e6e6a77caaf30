"""Solvers of the questions on the machine's three numbers and the ridge point (chapter 00)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import FP32_BYTES, Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank


@solves("00.ridge_a100")
def _ridge_a100(ctx: Context) -> Worked:
    return Worked(
        ctx.peak("A100", "fp32") / ctx.bandwidth("A100"),
        (
            ctx.peak_step("A100", "fp32"),
            ctx.bandwidth_step("A100"),
            "ridge point = peak FLOP/s / bandwidth in bytes/s (the seconds cancel)",
        ),
        {"bf16_peak": ctx.peak("A100", "bf16") / ctx.peak("A100", "fp32")},
    )


@solves("00.ridge_here")
def _ridge_here(ctx: Context) -> Worked:
    mm, mm_step = ctx.measured("matmul_flops_per_s")
    bw, bw_step = ctx.measured("mem_bandwidth_bytes_per_s")
    return Worked(mm / bw, (mm_step, bw_step, "ridge point = matmul FLOP/s / bandwidth"))


@solves("00.growth")
def _growth(ctx: Context) -> Worked:
    flops = ctx.peak("H100", "fp16") / ctx.peak("V100", "fp16")
    bytes_per_s = ctx.bandwidth("H100") / ctx.bandwidth("V100")
    return Worked(
        flops / bytes_per_s,
        (
            ctx.peak_step("H100", "fp16"),
            ctx.peak_step("V100", "fp16"),
            f"FLOP/s grew {_fmt.si(flops)}x",
            ctx.bandwidth_step("H100"),
            ctx.bandwidth_step("V100"),
            f"bandwidth grew {_fmt.si(bytes_per_s)}x",
            "FLOPs per byte needed grew by their quotient",
        ),
    )


@solves("00.regime_tiny")
def _regime_tiny(ctx: Context) -> Worked:
    flops, nbytes = 10, 10 * 2 * FP32_BYTES  # read 10 floats, write 10
    return Worked(
        "overhead",
        (
            f"one call: {flops} FLOPs and {nbytes} bytes (40 read, 40 written)",
            f"an A100 does the FLOPs in {_fmt.seconds(flops / ctx.peak('A100', 'fp32'))} and "
            f"moves the bytes in {_fmt.seconds(nbytes / ctx.bandwidth('A100'))}",
            "one op's fixed cost (Python, dispatcher, launch) is microseconds: chapter 03 "
            "measures it; it dwarfs both",
        ),
    )
