"""Questions on the machine's three numbers and the ridge point (chapter 00's exercises)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import (
    FP32_BYTES,
    REGIMES,
    Context,
    Exercise,
    Question,
    Worked,
    bandwidth,
    given_bandwidth,
    given_peak,
    measured,
    peak,
)

__all__ = ["EXERCISES"]


def _ridge_a100(ctx: Context) -> Worked:
    return Worked(
        peak(ctx, "A100", "fp32") / bandwidth(ctx, "A100"),
        (
            given_peak(ctx, "A100", "fp32"),
            given_bandwidth(ctx, "A100"),
            "ridge point = peak FLOP/s / bandwidth in bytes/s (the seconds cancel)",
        ),
    )


def _ridge_here(ctx: Context) -> Worked:
    (mm, mm_step), (bw, bw_step) = (
        measured(ctx, "matmul_flops_per_s"),
        measured(ctx, "mem_bandwidth_bytes_per_s"),
    )
    return Worked(mm / bw, (mm_step, bw_step, "ridge point = matmul FLOP/s / bandwidth"))


def _growth(ctx: Context) -> Worked:
    flops = peak(ctx, "H100", "fp16") / peak(ctx, "V100", "fp16")
    bytes_per_s = bandwidth(ctx, "H100") / bandwidth(ctx, "V100")
    return Worked(
        flops / bytes_per_s,
        (
            given_peak(ctx, "H100", "fp16"),
            given_peak(ctx, "V100", "fp16"),
            f"FLOP/s grew {_fmt.si(flops)}x",
            given_bandwidth(ctx, "H100"),
            given_bandwidth(ctx, "V100"),
            f"bandwidth grew {_fmt.si(bytes_per_s)}x",
            "FLOPs per byte needed grew by their quotient",
        ),
    )


def _regime_tiny(ctx: Context) -> Worked:
    flops, nbytes = 10, 10 * 2 * FP32_BYTES  # read 10 floats, write 10
    return Worked(
        "overhead",
        (
            f"one call: {flops} FLOPs and {nbytes} bytes (40 read, 40 written)",
            f"an A100 does the FLOPs in {_fmt.seconds(flops / peak(ctx, 'A100', 'fp32'))} and "
            f"moves the bytes in {_fmt.seconds(nbytes / bandwidth(ctx, 'A100'))}",
            "one op's fixed cost (Python, dispatcher, launch) is microseconds: chapter 03 "
            "measures it; it dwarfs both",
        ),
    )


# fmt: off
EXERCISES = (
    Exercise(Question(
        "00.ridge_a100",
        unit="FLOP/byte",
        hints=("The ridge point is peak FLOP/s divided by bytes/s; the seconds cancel.",
               "bl.spec('A100').peak_flops_per_s['fp32'] / bl.spec('A100').mem_bandwidth_bytes_per_s"),
        explain="Below this many FLOPs per byte, an A100 kernel waits on the trucks, not the factory.",
    ), _ridge_a100, lambda ctx: {
        4.0: "That is per fp32 element (4 bytes); the question asks per byte.",
        peak(ctx, "A100", "bf16") / peak(ctx, "A100", "fp32"): (
            "You used the tensor-core (bf16) peak; the question asks for fp32 without tensor cores."),
    }),
    Exercise(Question(
        "00.ridge_here",
        unit="FLOP/byte",
        hints=("Run c = bl.measure_ceilings() and look at its fields; units are FLOP/s and bytes/s.",
               "c.matmul_flops_per_s / c.mem_bandwidth_bytes_per_s"),
        explain="An op doing fewer FLOPs per byte than this is memory-bound on this machine.",
    ), _ridge_here, {4.0: "That is per fp32 element (4 bytes); the question asks per byte."}),
    Exercise(Question(
        "00.growth",
        unit="times (a ratio)",
        hints=("Growth of X = X on H100 / X on V100. Do it for FLOP/s and for bandwidth, then divide.",
               "It equals H100's fp16 ridge point divided by V100's fp16 ridge point."),
        explain="Compute outgrew bandwidth: each generation, more kernels end up memory-bound.",
    ), _growth),
    Exercise(Question(
        "00.regime_tiny",
        choices=REGIMES,
        hints=("Ten floats are 40 bytes and ten FLOPs. How long would the factory or the trucks need?",
               "Every call goes through Python, the dispatcher and a kernel launch, whatever its size."),
        explain="Tiny ops spend their time on the instructions (Python, dispatch, launch), not the work.",
    ), _regime_tiny, {
        "compute": "Ten additions take the factory nanoseconds; the time goes elsewhere.",
        "memory": "40 bytes take the trucks nanoseconds; the time goes elsewhere.",
    }),
)
# fmt: on
