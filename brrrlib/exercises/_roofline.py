"""Solvers of chapter 00's questions: the machine's three numbers and the ridge point."""

from brrrlib.exercises._bank import FP32_BYTES, Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank


@solves("00.ridge_a100")
def _ridge_a100(ctx: Context) -> Worked:
    peak = ctx.peak("A100", "fp32")
    return Worked(
        peak / ctx.bandwidth("A100"), slips={"bf16_peak": ctx.spec("A100").peak("bf16") / peak}
    )


@solves("00.ridge_here")
def _ridge_here(ctx: Context) -> Worked:
    flops, _ = ctx.measured("matmul_flops_per_s")
    return Worked(flops / ctx.measured("mem_bandwidth_bytes_per_s")[0])


@solves("00.growth")
def _growth(ctx: Context) -> Worked:
    flops = ctx.note("FLOP/s grew", ctx.peak("H100", "fp16") / ctx.peak("V100", "fp16"), "x")
    bandwidth = ctx.note("bandwidth grew", ctx.bandwidth("H100") / ctx.bandwidth("V100"), "x")
    return Worked(flops / bandwidth)


@solves("00.regime_tiny")
def _regime_tiny(ctx: Context) -> Worked:
    flops, nbytes = 10, 10 * 2 * FP32_BYTES  # read 10 floats, write 10
    ctx.note(f"an A100 does {flops} FLOPs in", flops / ctx.peak("A100", "fp32"), "s")
    ctx.note(f"and moves {nbytes} bytes in", nbytes / ctx.bandwidth("A100"), "s")
    return Worked("overhead", ("one op's fixed cost is microseconds (chapter 03 measures it)",))
