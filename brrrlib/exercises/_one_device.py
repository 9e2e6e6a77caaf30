"""Solvers of chapters 00 to 03's questions: the ridge point, compute, bandwidth, overhead."""

from brrrlib.exercises._bank import Context, Worked, solves
from brrrlib.hardware import ESSAY_PYTHON_ADDS_PER_S

__all__: list[str] = []  # the solvers register themselves with the bank

FP32_BYTES = 4

#: The essay's BERT table (% of FLOPs, % of runtime) per operator class, from Ivanov et al.,
#: "Data Movement Is All You Need" (https://arxiv.org/abs/2007.00072), as quoted in
#: https://horace.io/brrr_intro.html ("Compute" section); measured on V100s (fp16 tensor cores).
_ESSAY_BERT = {"matmul": (99.80, 61.0), "normalization": (0.17, 25.5)}
# FLOPs per element of gelu's default (erf) form, F.gelu(x) = 0.5*x*(1 + erf(x/sqrt(2))),
# counted by hand (an FMA counts 2, as on a spec sheet): 4 for the outer arithmetic; erf by the
# usual polynomial method (Abramowitz & Stegun 7.1.26, as ATen's vectorized CPU kernel does it):
# a division, a degree-5 polynomial in 4 FMAs, 2 more FMAs and 2 multiplies, about 15, plus
# one exp, about 15 more. A GPU's erff is of the same order.
_GELU_FLOPS_PER_ELEMENT = 35


def _ratio(ctx: Context, device: str, dtype: str, other: str = "fp32") -> float:
    """``device``'s peak in ``dtype`` over its peak in ``other`` (not a step of the working)."""
    return ctx.spec(device).peak(dtype) / ctx.spec(device).peak(other)


@solves("00.ridge_a100")
def _ridge_a100(ctx: Context) -> Worked:
    ridge = ctx.peak("A100", "fp32") / ctx.bandwidth("A100")
    return Worked(ridge, slips={"bf16_peak": _ratio(ctx, "A100", "bf16")})


@solves("00.ridge_here")
def _ridge_here(ctx: Context) -> Worked:
    return Worked(ctx.measured("matmul_flops_per_s") / ctx.measured("mem_bandwidth_bytes_per_s"))


@solves("00.growth")
def _growth(ctx: Context) -> Worked:
    flops = ctx.note("flops_growth", ctx.peak("H100", "fp16") / ctx.peak("V100", "fp16"), "x")
    bandwidth = ctx.note("bandwidth_growth", ctx.bandwidth("H100") / ctx.bandwidth("V100"), "x")
    return Worked(flops / bandwidth)


@solves("00.regime_tiny")
def _regime_tiny(ctx: Context) -> Worked:
    flops = ctx.note("flops", 10)  # read 10 floats, write 10
    nbytes = ctx.note("bytes", 10 * 2 * FP32_BYTES, "B")
    ctx.note("compute_s", flops / ctx.peak("A100", "fp32"), "s")
    ctx.note("memory_s", nbytes / ctx.bandwidth("A100"), "s")
    return Worked("overhead")


@solves("01.matmul_flops")
def _matmul_flops(ctx: Context) -> Worked:
    m, k, n = 512, 1024, 256
    return Worked(2 * m * k * n, (f"2 x M x K x N = 2 x {m} x {k} x {n}",))


@solves("01.tensor_core_ratio")
def _tensor_core_ratio(ctx: Context) -> Worked:
    fast = ctx.note("bl.spec('T4').fast_precision", ctx.spec("T4").fast_precision)  # fp16 only
    ratio = ctx.peak("T4", fast) / ctx.peak("T4", "fp32")
    return Worked(ratio, slips={"a100_ratio": _ratio(ctx, "A100", "bf16") / ratio})


@solves("01.matmul_time_here")
def _matmul_time_here(ctx: Context) -> Worked:
    flops = ctx.note("flops", 2 * 2048**3, "FLOP")
    return Worked(flops / ctx.measured("matmul_flops_per_s"))


@solves("01.critical_batch")
def _critical_batch(ctx: Context) -> Worked:
    # [B, D] x [D, D] in bf16: 2BD^2 FLOPs over 2(2BD + D^2) bytes, about B per byte while B << D
    ridge = ctx.peak("H100", "bf16") / ctx.bandwidth("H100")
    return Worked(ridge, slips={"fp32_ridge": _ratio(ctx, "H100", "fp32", "bf16")})


@solves("01.bert_gap")
def _bert_gap(ctx: Context) -> Worked:
    (mm_flops, mm_time), (norm_flops, norm_time) = _ESSAY_BERT.values()
    for name, (flops, time) in _ESSAY_BERT.items():
        ctx.note(f"{name}_rate", f"{flops / time:.3g}")  # % of FLOPs / % of time
    for s in ("V100", "A100"):  # what slower units alone would explain
        fast = ctx.spec(s).fast_precision
        ctx.note(f"{s} {fast}/fp32", _ratio(ctx, s, fast), "x")
    gap = (mm_flops / mm_time) / (norm_flops / norm_time)
    return Worked(gap, slips={"flops_only": mm_flops / norm_flops / gap})


def _flops_per_element(ctx: Context) -> float:
    """FLOPs an A100's vector units do while one fp32 element is read and written (8 bytes)."""
    return ctx.peak("A100", "fp32") * 2 * FP32_BYTES / ctx.bandwidth("A100")


@solves("02.ridge")
def _ridge(ctx: Context) -> Worked:
    return Worked(_flops_per_element(ctx), slips={"bf16_peak": _ratio(ctx, "A100", "bf16")})


@solves("02.fusion_speedup")
def _fusion_speedup(ctx: Context) -> Worked:
    ops, per_op = 3, 2 * FP32_BYTES  # y = x.sin().cos().exp(): each kernel reads 4, writes 4 bytes
    eager, fused = ctx.note("eager_bytes", ops * per_op, "B"), ctx.note("fused_bytes", per_op, "B")
    return Worked(eager / fused, slips={"temporaries_once": (ops + 1) / (2 * ops)})


@solves("02.unary_time_here")
def _unary_time_here(ctx: Context) -> Worked:
    nbytes = ctx.note("bytes", 2**24 * 2 * FP32_BYTES, "B")
    return Worked(nbytes / ctx.measured("mem_bandwidth_bytes_per_s"))


@solves("02.gelu_vs_relu")
def _gelu_vs_relu(ctx: Context) -> Worked:
    budget = ctx.note("02.ridge", _flops_per_element(ctx))
    gelu = ctx.note("gelu_flops_per_element", _GELU_FLOPS_PER_ELEMENT)
    return Worked("same" if gelu < budget else "relu")


@solves("02.layernorm_bytes")
def _layernorm_bytes(ctx: Context) -> Worked:
    n, width = 4096 * 1024, 1024  # elements of x, (4096, 1024)
    xy = ctx.note("xy_bytes", 2 * FP32_BYTES * n, "B")
    params = ctx.note("weight_bias_bytes", 2 * FP32_BYTES * width, "B")
    return Worked((xy + params) / n)


@solves("03.python_vs_h100")
def _python_vs_h100(ctx: Context) -> Worked:
    peak = ctx.peak("H100", "bf16")
    adds = ctx.note("bl.hardware.ESSAY_PYTHON_ADDS_PER_S", ESSAY_PYTHON_ADDS_PER_S)
    fp32, a100 = _ratio(ctx, "H100", "fp32", "bf16"), ctx.spec("A100").peak("bf16") / peak
    return Worked(peak / adds, slips={"fp32_peak": fp32, "a100_peak": a100})


@solves("03.break_even_numel")
def _break_even_numel(ctx: Context) -> Worked:
    overhead = ctx.measured("op_overhead_s")
    per_element = 3 * FP32_BYTES  # a + b: two reads and one write
    n = overhead * ctx.measured("mem_bandwidth_bytes_per_s") / per_element
    return Worked(n, slips={"bytes": per_element})


@solves("03.sync_per_op_us")
def _sync_per_op_us(ctx: Context) -> Worked:
    # µs: the host's time to launch one op, the kernel's on the GPU
    host, kernel = ctx.note("host_us", 15.0), ctx.note("kernel_us", 15.0)
    return Worked(host + kernel, slips={"no_sync": max(host, kernel) / (host + kernel)})


@solves("03.overhead_fraction")
def _overhead_fraction(ctx: Context) -> Worked:
    work = 1.1 - 1.0  # T(b) = O + W and T(2b) = O + 2W = 1.1 T(b), so W = 0.1 T(b)
    ctx.note("work_share", f"{work:.0%}")  # W / T(b); O / T(b) is the rest
    return Worked(1 - work, slips={"work_share": work / (1 - work), "above_one": 1 / (1 - work)})


@solves("03.weight_read_us")
def _weight_read_us(ctx: Context) -> Worked:
    nbytes = ctx.note("bytes", 4096 * 4096 * FP32_BYTES, "B")
    return Worked(nbytes / ctx.bandwidth("A100") * 1e6)
