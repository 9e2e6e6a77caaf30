"""Solvers of chapter 03's questions: Python's speed, the break-even size, the batch test."""

from brrrlib.exercises._bank import FP32_BYTES, Context, Worked, solves
from brrrlib.hardware import ESSAY_PYTHON_ADDS_PER_S

__all__: list[str] = []  # the solvers register themselves with the bank


@solves("03.python_vs_h100")
def _python_vs_h100(ctx: Context) -> Worked:
    peak = ctx.peak("H100", "bf16")
    adds = ctx.note("a Python loop's additions per second, in the essay", ESSAY_PYTHON_ADDS_PER_S)
    fp32, a100 = ctx.spec("H100").peak("fp32"), ctx.spec("A100").peak("bf16")
    return Worked(peak / adds, slips={"fp32_peak": fp32 / peak, "a100_peak": a100 / peak})


@solves("03.break_even_numel")
def _break_even_numel(ctx: Context) -> Worked:
    overhead, _ = ctx.measured("op_overhead_s")
    bandwidth, _ = ctx.measured("mem_bandwidth_bytes_per_s")
    per_element = 3 * FP32_BYTES  # a + b: two reads and one write
    step = "n x 12 bytes / bandwidth = overhead"
    return Worked(overhead * bandwidth / per_element, (step,), {"bytes": per_element})


@solves("03.sync_per_op_us")
def _sync_per_op_us(ctx: Context) -> Worked:
    host, kernel = 15.0, 15.0  # µs: the host's time to launch one op, the kernel's on the GPU
    steps = (f"running ahead: max(host, kernel) = {max(host, kernel):g} µs per op",)
    return Worked(host + kernel, steps, {"no_sync": max(host, kernel) / (host + kernel)})


@solves("03.overhead_fraction")
def _overhead_fraction(ctx: Context) -> Worked:
    work = ctx.note("T(b) = O + W, T(2b) = O + 2W = 1.1 T(b): W / T(b)", 1.1 - 1.0)
    slips = {"work_share": work / (1 - work), "above_one": 1 / (1 - work)}
    return Worked(1 - work, ("O / T(b) = 1 - W / T(b)",), slips)


@solves("03.weight_read_us")
def _weight_read_us(ctx: Context) -> Worked:
    nbytes = ctx.note("weight bytes = 4096 x 4096 x 4", 4096 * 4096 * FP32_BYTES, "B")
    return Worked(nbytes / ctx.bandwidth("A100") * 1e6, ("x 1e6 for µs",))
