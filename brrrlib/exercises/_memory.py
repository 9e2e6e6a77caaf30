"""Questions on memory bandwidth: ops per element, fusion, bytes moved (chapter 02's exercises)."""

from __future__ import annotations

from brrrlib import _fmt
from brrrlib.exercises._bank import (
    FP32_BYTES,
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
    return peak(ctx, device, "fp32") * _UNARY_BYTES_PER_ELEMENT / bandwidth(ctx, device)


def _ridge_per_element(ctx: Context) -> Worked:
    return Worked(
        _ops_per_element(ctx, "A100"),
        (
            given_peak(ctx, "A100", "fp32"),
            given_bandwidth(ctx, "A100"),
            "bytes per element = 4 read + 4 written = 8",
            "FLOPs per element = peak x 8 / bandwidth",
        ),
    )


def _fusion_speedup(ctx: Context) -> Worked:
    eager, fused = _FUSION_OPS * _UNARY_BYTES_PER_ELEMENT, _UNARY_BYTES_PER_ELEMENT
    return Worked(
        eager / fused,
        (
            f"eager: {_FUSION_OPS} kernels, each reads 4 and writes 4 bytes per element = {eager}",
            f"fused: read x once, write y once = {fused} bytes per element",
            "memory-bound: time is proportional to bytes, so speedup = eager bytes / fused bytes",
        ),
    )


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


def _unary_time_here(ctx: Context) -> Worked:
    nbytes = _UNARY_HERE_N * _UNARY_BYTES_PER_ELEMENT
    bw, step = measured(ctx, "mem_bandwidth_bytes_per_s")
    return Worked(
        nbytes / bw,
        (
            f"bytes = {_fmt.elements(_UNARY_HERE_N)} elements x (4 read + 4 written) = "
            f"{_fmt.binary_bytes(nbytes)}",
            step,
            "time >= bytes / (bytes/s), in seconds",
        ),
    )


def _gelu_vs_relu(ctx: Context) -> Worked:
    budget = _ops_per_element(ctx, "A100")
    same = _GELU_FLOPS_PER_ELEMENT < budget
    return Worked(
        "same" if same else "relu",
        (
            f"gelu = 0.5 x (1 + erf(x / sqrt(2))): about {_GELU_FLOPS_PER_ELEMENT} FLOPs per element "
            "(erf: a division, a polynomial and an exp), relu 1",
            f"an A100 can do {_fmt.si(budget)} fp32 FLOPs per element in the time it moves it (02.ridge)",
            f"{_GELU_FLOPS_PER_ELEMENT} < {_fmt.si(budget)}: both memory-bound, same bytes, same time"
            if same
            else f"{_GELU_FLOPS_PER_ELEMENT} > {_fmt.si(budget)}: gelu is compute-bound, slower",
        ),
    )


# fmt: off
EXERCISES = (
    Exercise(Question(
        "02.ridge",
        unit="FLOPs per element",
        hints=("How many elements per second can the trucks carry in and out? Compare with FLOP/s.",
               "Bytes per element moved = 4 (read) + 4 (write). FLOPs per element = peak * 8 / "
               "bandwidth."),
        explain="Until an elementwise op does this much arithmetic, its cost is just moving bytes.",
    ), _ridge_per_element, lambda ctx: {
        0.5: "Remember the op also writes its output: 8 bytes move per element, not 4.",
        0.125: "That is per byte; the question asks per element (read + write = 8 bytes).",
        peak(ctx, "A100", "bf16") / peak(ctx, "A100", "fp32"): (
            "Elementwise ops cannot use the tensor cores: use the fp32 peak."),
    }),
    Exercise(Question(
        "02.fusion_speedup",
        unit="times (a ratio)",
        hints=("When memory-bound, time is proportional to bytes moved. Count reads and writes.",
               "Eager: three kernels of one read and one write each. Fused: one read, one write."),
        explain="Fusion removes the round trips to the warehouse; the extra arithmetic is nearly "
        "free.",
    ), _fusion_speedup, {
        2 / 3: "Count every temporary twice in eager: it is written once and read back once.",
    }),
    Exercise(Question(
        "02.unary_time_here",
        unit="seconds",
        hints=("time >= bytes moved / (bytes/s). Count the bytes first.",
               "Bytes = elements * (4 read + 4 written); bandwidth is "
               "bl.measure_ceilings().mem_bandwidth_bytes_per_s."),
        explain="Compare with bl.benchmark(torch.relu, x): the gap is what a real kernel loses.",
    ), _unary_time_here, {
        0.5: "Remember the op also writes its output: 8 bytes move per element, not 4.",
        0.25: "Each fp32 element is 4 bytes: convert elements to bytes.",
        0.125: "Bytes, not elements: each element is 4 bytes read plus 4 bytes written.",
    }),
    Exercise(Question(
        "02.gelu_vs_relu",
        choices=("gelu", "relu", "same"),
        hints=("Are these two ops compute-bound or memory-bound? Compare their FLOPs per element "
               "with 02.ridge.",
               "Both read one element and write one element."),
        explain="Both are memory-bound on an A100: same bytes, same time; the erf is free. On "
        "another device, compare gelu's measured rate with bandwidth / 8 bytes, as the chapter does.",
    ), _gelu_vs_relu, {
        "relu": "More FLOPs only costs time once compute is the limit. Is it, for gelu?",
        "gelu": "gelu never does *less* work than relu; think about what sets their time.",
    }),
    Exercise(Question(
        "02.layernorm_bytes",
        unit="bytes per element", rel_tol=0.02,
        hints=("Count the bytes of x, of y, and of the weight and bias; then divide by x's elements.",
               "x and y are 4 bytes per element each; the weights are read once for the whole "
               "activation."),
        explain="The weights hardly count: about 8 bytes per element for a handful of FLOPs (mean, "
        "variance, normalize, scale, shift), about 1 FLOP per byte: far left of every ridge point, "
        "so a layer norm is memory-bound.",
    ), _layernorm_bytes, {
        0.5: "Remember the op also writes its output, as many bytes as it reads of x.",
    }),
)
# fmt: on
