"""Solvers of chapter 02's questions: ops per element, fusion, bytes moved."""

from brrrlib.exercises._bank import FP32_BYTES, Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

# FLOPs per element of gelu's default (erf) form, F.gelu(x) = 0.5*x*(1 + erf(x/sqrt(2))),
# counted by hand (an FMA counts 2, as on a spec sheet): 4 for the outer arithmetic; erf by the
# usual polynomial method (Abramowitz & Stegun 7.1.26, as ATen's vectorized CPU kernel does it):
# a division, a degree-5 polynomial in 4 FMAs, 2 more FMAs and 2 multiplies, about 15, plus
# one exp, about 15 more. A GPU's erff is of the same order.
_GELU_FLOPS_PER_ELEMENT = 35


def _flops_per_element(ctx: Context) -> float:
    """FLOPs an A100's vector units do while one fp32 element is read and written (8 bytes)."""
    return ctx.peak("A100", "fp32") * 2 * FP32_BYTES / ctx.bandwidth("A100")


@solves("02.ridge")
def _ridge(ctx: Context) -> Worked:
    a100 = ctx.spec("A100")
    steps = ("bytes per element: 4 read + 4 written = 8",)
    return Worked(
        _flops_per_element(ctx), steps, {"bf16_peak": a100.peak("bf16") / a100.peak("fp32")}
    )


@solves("02.fusion_speedup")
def _fusion_speedup(ctx: Context) -> Worked:
    ops, per_op = 3, 2 * FP32_BYTES  # y = x.sin().cos().exp(): each kernel reads 4, writes 4 bytes
    steps = (f"eager: {ops} kernels x {per_op} bytes per element", f"fused: {per_op} bytes")
    return Worked(ops * per_op / per_op, steps, {"temporaries_once": (ops + 1) / (2 * ops)})


@solves("02.unary_time_here")
def _unary_time_here(ctx: Context) -> Worked:
    nbytes = ctx.note("bytes = 2^24 elements x (4 read + 4 written)", 2**24 * 2 * FP32_BYTES, "B")
    return Worked(nbytes / ctx.measured("mem_bandwidth_bytes_per_s")[0])


@solves("02.gelu_vs_relu")
def _gelu_vs_relu(ctx: Context) -> Worked:
    budget = ctx.note("A100 fp32 FLOPs per element moved (02.ridge)", _flops_per_element(ctx))
    gelu = ctx.note("gelu's FLOPs per element (relu's: 1)", _GELU_FLOPS_PER_ELEMENT)
    return Worked("same" if gelu < budget else "relu")


@solves("02.layernorm_bytes")
def _layernorm_bytes(ctx: Context) -> Worked:
    rows, width = 4096, 1024
    x_and_y = ctx.note(f"x and y, {rows} x {width} fp32 each", 2 * FP32_BYTES * rows * width, "B")
    params = ctx.note(f"weight and bias, {width} fp32 each, read once", 2 * FP32_BYTES * width, "B")
    return Worked((x_and_y + params) / (rows * width), ("bytes / elements of x",))
