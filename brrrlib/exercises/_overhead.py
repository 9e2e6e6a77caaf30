"""Questions on overhead: Python's speed, the break-even size, the batch test (chapter 03's exercises)."""

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


# a + b on fp32 reads two numbers and writes one: 3 x 4 bytes per element.
_ADD_BYTES_PER_ELEMENT = 3 * FP32_BYTES
# 03.overhead_fraction: doubling the batch makes the step this much longer.
_DOUBLED_BATCH_TIME = 1.1
_LINEAR = 4096  # Linear(_LINEAR, _LINEAR) for 03.weight_read_us


def _python_vs_h100(ctx: Context) -> Worked:
    # The essay's figure for how many additions per second a Python loop does
    # (https://horace.io/brrr_intro.html, section "Overhead"); chapter 03 measures it here.
    from brrrlib.hardware import ESSAY_PYTHON_ADDS_PER_S

    return Worked(
        peak(ctx, "H100", "bf16") / ESSAY_PYTHON_ADDS_PER_S,
        (
            given_peak(ctx, "H100", "bf16"),
            f"Python, in the essay: {_fmt.si(ESSAY_PYTHON_ADDS_PER_S)} additions per second",
            "FLOPs per Python addition = FLOP/s / (additions per second)",
        ),
    )


def _break_even_numel(ctx: Context) -> Worked:
    (overhead, o_step), (bw, bw_step) = (
        measured(ctx, "op_overhead_s"),
        measured(ctx, "mem_bandwidth_bytes_per_s"),
    )
    return Worked(
        overhead * bw / _ADD_BYTES_PER_ELEMENT,
        (
            o_step,
            bw_step,
            "bytes per element: 2 reads + 1 write, 4 bytes each = 12",
            "n x 12 / bandwidth = overhead, so n = overhead x bandwidth / 12",
        ),
    )


def _overhead_fraction(ctx: Context) -> Worked:
    # T(b) = O + W and T(2b) = O + 2W = 1.1 T(b)  =>  W = 0.1 T(b)  =>  O / T(b) = 0.9
    work = _DOUBLED_BATCH_TIME - 1.0
    return Worked(
        1.0 - work,
        (
            "T(b) = O + W and T(2b) = O + 2W: doubling the batch adds one more W",
            f"T(2b) = {_DOUBLED_BATCH_TIME} T(b), so W = {_fmt.percent(work, 1)} of T(b)",
            "O = T(b) - W, so the overhead's share is 1 - W / T(b)",
        ),
    )


def _weight_read_us(ctx: Context) -> Worked:
    nbytes = _LINEAR * _LINEAR * FP32_BYTES
    return Worked(
        nbytes / bandwidth(ctx, "A100") * 1e6,
        (
            f"weight bytes = {_LINEAR} x {_LINEAR} x 4 = {_fmt.binary_bytes(nbytes)}",
            given_bandwidth(ctx, "A100"),
            "time = bytes / bandwidth, in seconds; x 1e6 for µs",
        ),
    )


# fmt: off
EXERCISES = (
    Exercise(Question(
        "03.python_vs_h100",
        unit="FLOPs (a plain count)",
        hints=("FLOPs per Python addition = (FLOPs per second) / (additions per second).",
               "bl.spec('H100').peak_flops_per_s['bf16'] / 32e6"),
        explain="Millions of FLOPs per line of Python: a GPU is only busy when each op is big.",
    ), _python_vs_h100, lambda ctx: {
        peak(ctx, "H100", "fp32") / peak(ctx, "H100", "bf16"): (
            "You used the fp32 peak; the question asks for bf16 on the tensor cores."),
        peak(ctx, "A100", "bf16") / peak(ctx, "H100", "bf16"): (
            "That is the A100's number (the essay's); the question asks for the H100."),
    }),
    Exercise(Question(
        "03.break_even_numel",
        unit="elements",
        hints=("Set n x (bytes per element) / bandwidth equal to the overhead and solve for n.",
               "n = c.op_overhead_s * c.mem_bandwidth_bytes_per_s / 12, with c = "
               "bl.measure_ceilings(): 12 = (2 reads + 1 write) x 4 bytes."),
        explain="An op smaller than this costs about the same whatever its size: that is overhead.",
    ), _break_even_numel, {
        _ADD_BYTES_PER_ELEMENT: "That is a number of bytes; the question asks for elements.",
        1.5: "You counted the two reads but not the write of the result.",
        3.0: "You counted 4 bytes per element; the op reads two numbers and writes one.",
    }),
    Exercise(Question(
        "03.overhead_fraction",
        unit="fraction of the step",
        hints=("Write T(b) = O + W and T(2b) = O + 2W. Doubling the batch added exactly one more W.",
               "The extra 10% is one W, so W is 10% of T(b); the rest of T(b) is O."),
        explain="Mostly overhead: a bigger batch is nearly free until the work catches up.",
    ), _overhead_fraction, {
        1.0 / 9.0: "That is the work's share; the question asks for the overhead's share.",
        1.0 / 0.9: "A fraction of the step cannot exceed 1; divide the overhead by the whole step.",
    }),
    Exercise(Question(
        "03.weight_read_us",
        unit="µs",
        hints=("Bytes of the weight matrix = rows x columns x bytes per fp32 number. "
               "Time = bytes / bandwidth.",
               "4096 * 4096 * 4 / bl.spec('A100').mem_bandwidth_bytes_per_s, then convert "
               "seconds to µs."),
        explain="Tens of µs: more than the launch overhead of an op. A small batch against big "
        "weights is bandwidth-bound, even though doubling the batch barely changes its time.",
    ), _weight_read_us, {
        0.25: "You counted elements, not bytes: each fp32 weight is 4 bytes.",
        0.5: "That is bf16 (2 bytes per weight); the layer here is fp32.",
    }),
)
# fmt: on
