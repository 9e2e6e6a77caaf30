"""Solvers of the questions on memory bandwidth: ops per element, fusion, bytes moved (chapter 02)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import FP32_BYTES, Context, Worked, solves

__all__: list[str] = []  # the solvers register themselves with the bank

_UNARY_BYTES_PER_ELEMENT = 2 * FP32_BYTES  # read one fp32, write one fp32
_UNARY_HERE_N = 2**24  # elements for 02.unary_time_here
_FUSION_OPS = 3  # y = x.sin().cos().exp() for 02.fusion_speedup
_LN_SHAPE = (4096, 1024)  # (rows, width) of the activation in 02.layernorm_bytes
# FLOPs per element of gelu's default (erf) form, F.gelu(x) = 0.5*x*(1 + erf(x/sqrt(2))),
# counted by hand (an FMA counts 2, as on a spec sheet): 4 for the outer arithmetic; erf by the
# usual polynomial method (Abramowitz & Stegun 7.1.26, as ATen's vectorized CPU kernel does it):
# a division, a degree-5 polynomial in 4 FMAs, 2 more FMAs and 2 multiplies, about 15, plus
# one exp, about 15 more. A GPU's erff is of the same order.
_GELU_FLOPS_PER_ELEMENT = 35


def _ops_per_element(ctx: Context, device: str) -> float:
    """FLOPs the vector units can do while one fp32 element is read and written."""
    return ctx.peak(device, "fp32") * _UNARY_BYTES_PER_ELEMENT / ctx.bandwidth(device)


@solves("02.ridge")
def _ridge_per_element(ctx: Context) -> Worked:
    return Worked(
        _ops_per_element(ctx, "A100"),
        (
            ctx.peak_step("A100", "fp32"),
            ctx.bandwidth_step("A100"),
            "bytes per element = 4 read + 4 written = 8",
            "FLOPs per element = peak x 8 / bandwidth",
        ),
        {"bf16_peak": ctx.peak("A100", "bf16") / ctx.peak("A100", "fp32")},
    )


@solves("02.fusion_speedup")
def _fusion_speedup(ctx: Context) -> Worked:
    eager, fused = _FUSION_OPS * _UNARY_BYTES_PER_ELEMENT, _UNARY_BYTES_PER_ELEMENT
    # the slip: each temporary counted once (written, not read back), as x and y are
    temporaries_once = (_FUSION_OPS + 1) * FP32_BYTES
    return Worked(
        eager / fused,
        (
            f"eager: {_FUSION_OPS} kernels, each reads 4 and writes 4 bytes per element = {eager}",
            f"fused: read x once, write y once = {fused} bytes per element",
            "memory-bound: time is proportional to bytes, so speedup = eager bytes / fused bytes",
        ),
        {"temporaries_once": temporaries_once / eager},
    )


@solves("02.unary_time_here")
def _unary_time_here(ctx: Context) -> Worked:
    nbytes = _UNARY_HERE_N * _UNARY_BYTES_PER_ELEMENT
    bw, step = ctx.measured("mem_bandwidth_bytes_per_s")
    return Worked(
        nbytes / bw,
        (
            f"bytes = {_fmt.elements(_UNARY_HERE_N)} elements x (4 read + 4 written) = "
            f"{_fmt.binary_bytes(nbytes)}",
            step,
            "time >= bytes / (bytes/s), in seconds",
        ),
    )


@solves("02.gelu_vs_relu")
def _gelu_vs_relu(ctx: Context) -> Worked:
    budget = _ops_per_element(ctx, "A100")
    gelu, same = _GELU_FLOPS_PER_ELEMENT, _GELU_FLOPS_PER_ELEMENT < budget
    return Worked(
        "same" if same else "relu",
        (
            f"gelu = 0.5 x (1 + erf(x / sqrt(2))): about {gelu} FLOPs per element "
            "(erf: a division, a polynomial and an exp), relu 1",
            f"an A100 can do {_fmt.si(budget)} fp32 FLOPs per element in the time it moves it "
            "(02.ridge)",
            f"{gelu} < {_fmt.si(budget)}: both memory-bound, same bytes, same time"
            if same
            else f"{gelu} > {_fmt.si(budget)}: gelu is compute-bound, slower",
        ),
    )


@solves("02.layernorm_bytes")
def _layernorm_bytes(ctx: Context) -> Worked:
    rows, width = _LN_SHAPE
    activations = 2 * FP32_BYTES * rows * width  # read x, write y
    params = 2 * FP32_BYTES * width  # weight and bias, read once
    return Worked(
        (activations + params) / (rows * width),
        (
            f"x and y: {rows} x {width} elements, 4 bytes read + 4 written each = "
            f"{_fmt.binary_bytes(activations)}",
            f"weight and bias: 2 x {width} x 4 bytes = {_fmt.binary_bytes(params)}, read once",
            f"per element of x: ({activations} + {params}) / {rows * width}",
        ),
    )
