"""The question bank, chapters 03 (overhead) and 04 (diagnose): data, as in :mod:`brrrlib.exercises._questions`.

Each :class:`~brrrlib.exercises._questions.Exercise` pairs what the learner reads with
a solver that computes the expected answer and its working from the spec
table and this machine's ceilings.
"""

from __future__ import annotations

import functools

from brrrlib import _fmt
from brrrlib.exercises._questions import (
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

__all__ = ["CHAPTERS_03_04"]


# ------------------------------------------------------------------ chapter 03

# a + b on fp32 reads two numbers and writes one: 3 x 4 bytes per element.
_ADD_BYTES_PER_ELEMENT = 3 * FP32_BYTES
# 03.overhead_fraction: doubling the batch makes the step this much longer.
_DOUBLED_BATCH_TIME = 1.1
_LINEAR = 4096  # Linear(_LINEAR, _LINEAR) for 03.weight_read_us
_CRITICAL_D = 8192  # Linear(_CRITICAL_D, _CRITICAL_D) in bf16 for 03.critical_batch


def _python_vs_h100(ctx: Context) -> Worked:
    # The essay's figure for how many additions per second a Python loop does
    # (https://horace.io/brrr_intro.html, section "Overhead"); chapter 03 measures it here.
    from brrrlib.hardware import ESSAY_PYTHON_ADDS_PER_S

    return Worked(
        peak(ctx, "H100", "bf16") / ESSAY_PYTHON_ADDS_PER_S,
        (given_peak(ctx, "H100", "bf16"),
         f"Python, in the essay: {_fmt.si(ESSAY_PYTHON_ADDS_PER_S)} additions per second",
         "FLOPs per Python addition = FLOP/s / (additions per second)"),
    )  # fmt: skip


def _break_even_numel(ctx: Context) -> Worked:
    (overhead, o_step), (bw, bw_step) = (measured(ctx, "op_overhead_s"),
                                         measured(ctx, "mem_bandwidth_bytes_per_s"))  # fmt: skip
    return Worked(
        overhead * bw / _ADD_BYTES_PER_ELEMENT,
        (o_step, bw_step,
         "bytes per element: 2 reads + 1 write, 4 bytes each = 12",
         "n x 12 / bandwidth = overhead, so n = overhead x bandwidth / 12"),
    )  # fmt: skip


def _overhead_fraction(ctx: Context) -> Worked:
    # T(b) = O + W and T(2b) = O + 2W = 1.1 T(b)  =>  W = 0.1 T(b)  =>  O / T(b) = 0.9
    work = _DOUBLED_BATCH_TIME - 1.0
    return Worked(
        1.0 - work,
        ("T(b) = O + W and T(2b) = O + 2W: doubling the batch adds one more W",
         f"T(2b) = {_DOUBLED_BATCH_TIME} T(b), so W = {_fmt.percent(work, 1)} of T(b)",
         "O = T(b) - W, so the overhead's share is 1 - W / T(b)"),
    )  # fmt: skip


def _critical_batch(ctx: Context) -> Worked:
    # Intensity of [B, D] x [D, D] in bf16: 2BD^2 / (2(BD + D^2 + BD)) ~ B when B << D.
    ridge = peak(ctx, "H100", "bf16") / bandwidth(ctx, "H100")
    return Worked(
        ridge,
        (f"FLOPs = 2 B D^2; bytes = 2 (B D + D^2 + B D), nearly all the {_CRITICAL_D}^2 weights "
         "while B << D: intensity ~ 2 B D^2 / (2 D^2) = B FLOP/byte",
         given_peak(ctx, "H100", "bf16"), given_bandwidth(ctx, "H100"),
         f"compute-bound once B >= the bf16 ridge point = peak / bandwidth = {ridge:.0f} "
         "(the exact formula, B = R D / (D - 2R), gives a few percent more)"),
    )  # fmt: skip


def _weight_read_us(ctx: Context) -> Worked:
    nbytes = _LINEAR * _LINEAR * FP32_BYTES
    return Worked(
        nbytes / bandwidth(ctx, "A100") * 1e6,
        (f"weight bytes = {_LINEAR} x {_LINEAR} x 4 = {_fmt.binary_bytes(nbytes)}",
         given_bandwidth(ctx, "A100"),
         "time = bytes / bandwidth, in seconds; x 1e6 for µs"),
    )  # fmt: skip


# fmt: off
CHAPTER_03 = (
    Exercise(Question(
        "03.python_vs_h100",
        "The essay measures Python at about 32 million additions per second. How many bf16 "
        "FLOPs can an H100 (dense tensor-core peak, from bl.spec) do in the time Python does "
        "one addition?",
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
        "a + b on n fp32 elements reads 2n numbers and writes n. For which n does moving those "
        "bytes at this machine's measured bandwidth take exactly as long as one op's fixed "
        "overhead (both from bl.measure_ceilings())? Below it, a + b is mostly overhead.",
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
        "Doubling the batch makes a training step take only 10% longer. Model the step as a "
        "fixed overhead plus work proportional to the batch. What fraction of the original "
        "step's time was the fixed overhead? (a number between 0 and 1)",
        unit="fraction of the step",
        hints=("Write T(b) = O + W and T(2b) = O + 2W. Doubling the batch added exactly one more W.",
               "The extra 10% is one W, so W is 10% of T(b); the rest of T(b) is O."),
        explain="Mostly overhead: a bigger batch is nearly free until the work catches up.",
    ), _overhead_fraction, {
        1.0 / 9.0: "That is the work's share; the question asks for the overhead's share.",
        1.0 / 0.9: "A fraction of the step cannot exceed 1; divide the overhead by the whole step.",
    }),
    Exercise(Question(
        "03.critical_batch",
        f"An H100 runs Linear({_CRITICAL_D}, {_CRITICAL_D}) in bf16 on a batch of B rows. With "
        "its intensity about B FLOP/byte (the weights are most of the bytes while B is much "
        "smaller than the width), from which batch size B on is the layer compute-bound "
        "(dense bf16 peak and bandwidth from bl.spec)?",
        unit="rows (a batch size)",
        hints=("Compute-bound means the intensity is at least the ridge point, peak FLOP/s over "
               "bytes per second, for the precision that runs.",
               "bl.spec('H100').ridge_point_flops_per_byte('bf16'), and intensity ~ B."),
        explain="Hundreds of rows: a batch of a few sequences decoding one token each sits far "
        "below it, reading all the weights for very little arithmetic.",
    ), _critical_batch, lambda ctx: {
        (peak(ctx, "H100", "fp32") / bandwidth(ctx, "H100"))
        / (peak(ctx, "H100", "bf16") / bandwidth(ctx, "H100")): (
            "That is the fp32 ridge point (no tensor cores); the layer runs in bf16."),
        2.0: "In fp32 (4 bytes a number) the intensity is B/2; in bf16 (2 bytes) it is about B.",
    }),
    Exercise(Question(
        "03.weight_read_us",
        "At batch size 1, a Linear(4096, 4096) layer in fp32 must read its whole weight matrix "
        "once per call (ignore the bias and the activations). How long does that take at an "
        "A100's memory bandwidth (bl.spec)?",
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


# ------------------------------------------------------------------ chapter 04

_MYSTERY_NUDGES = {
    "compute": "If it were compute-bound, FLOPs / matmul FLOP/s would come close to its "
    "measured time. Count its FLOPs: are there that many?",
    "memory": "If it were memory-bound, bytes moved / bandwidth would come close to its "
    "measured time. Count its bytes: are there that many?",
    "overhead": "If it were overhead-bound, (number of ops) x (overhead per op) would come "
    "close to its measured time. Are there that many ops, each that small?",
}
_MYSTERY_METHOD = (
    "estimate three times: FLOPs / matmul FLOP/s, bytes / bandwidth, ops x overhead per op "
    "(bl.count gives FLOPs, bytes and ops; bl.measure_ceilings the three rates)",
    "the largest of the three is the regime",
)


def _mystery(letter: str, regime: str, why: str) -> Exercise:
    question = Question(
        f"04.mystery_{letter}",
        f"Read the code of workloads.mystery_{letter} (inspect.getsource) and its sizes. "
        "Which regime is it in?",
        choices=REGIMES,
        hints=(
            "Estimate three times: FLOPs / matmul FLOP/s, bytes / bandwidth, ops x overhead per "
            "op (bl.measure_ceilings() has all three rates). The largest wins.",
            "bl.count(fn, *args) gives FLOPs, bytes and the number of ops; divide by the rates.",
        ),
        explain=why,
    )
    nudges = {k: v for k, v in _MYSTERY_NUDGES.items() if k != regime}
    return Exercise(question, lambda ctx: Worked(regime, (*_MYSTERY_METHOD, why)), nudges)


@functools.cache
def _block_counts(batch: int):
    """bl.count of workloads.transformer_block(batch) on the course device (counted once)."""
    from brrrlib.counting import count
    from brrrlib.workloads import transformer_block

    block, args = transformer_block(batch=batch)
    return count(block, *args)


def _block_floors_s(ctx: Context, batch: int) -> tuple[float, float]:
    """(compute floor, memory floor) in seconds of the block on this machine."""
    counts, c = _block_counts(batch), ctx.ceilings
    return counts.flops / c.matmul_flops_per_s, counts.bytes_moved / c.mem_bandwidth_bytes_per_s


def _block_lower_bound_us(ctx: Context) -> Worked:
    counts = _block_counts(16)
    (mm, mm_step), (bw, bw_step) = (measured(ctx, "matmul_flops_per_s"),
                                    measured(ctx, "mem_bandwidth_bytes_per_s"))  # fmt: skip
    compute_s, memory_s = counts.flops / mm, counts.bytes_moved / bw
    return Worked(
        max(compute_s, memory_s) * 1e6,
        (f"bl.count: {_fmt.si(counts.flops, 'FLOP')}, {_fmt.si(counts.bytes_moved, 'B')} moved",
         mm_step, bw_step,
         f"compute floor = FLOPs / matmul FLOP/s = {_fmt.seconds(compute_s)}",
         f"memory floor = bytes / bandwidth = {_fmt.seconds(memory_s)}",
         "the work cannot finish before the slower resource: the larger floor, in µs"),
    )  # fmt: skip


def _block_mistakes(ctx: Context) -> dict[float, str]:
    compute_s, memory_s = _block_floors_s(ctx, 16)
    floor_s = max(compute_s, memory_s)
    out = {
        (compute_s + memory_s) / floor_s: "You added the two times; the roofline takes the larger."
    }
    smaller = min(compute_s, memory_s) / floor_s
    if smaller < 0.8:  # only a distinct slip when the two floors differ
        out[smaller] = "You took the smaller of the two times; the slower resource sets the floor."
    return out


_DECODER_PARAMS = 8e9  # parameters of 04.decode_token_ms's decoder (a Llama-3-8B-sized model)


def _decode_token_ms(ctx: Context) -> Worked:
    nbytes = _DECODER_PARAMS * 2  # bf16
    return Worked(
        nbytes / bandwidth(ctx, "H100") * 1e3,
        (f"weights: {_DECODER_PARAMS / 1e9:.0f}e9 parameters x 2 bytes (bf16) = "
         f"{_fmt.si(nbytes, 'B')}, all read once per token",
         given_bandwidth(ctx, "H100"),
         f"compute needs only 2 x {_DECODER_PARAMS / 1e9:.0f}e9 FLOPs = "
         f"{_fmt.seconds(2 * _DECODER_PARAMS / peak(ctx, 'H100', 'bf16'))} at the bf16 peak: "
         "memory sets the time",
         "time = bytes / bandwidth, in seconds; x 1e3 for ms"),
    )  # fmt: skip


# fmt: off
CHAPTER_04 = (
    _mystery("a", "memory",
             "Five pointwise ops over tens of megabytes: about one FLOP per 8 bytes, far below "
             "the ridge point. The trucks set the pace; fusing the ops (torch.compile) is the "
             "remedy."),
    _mystery("b", "overhead",
             "Two tiny in-place ops per parameter, over a hundred parameters: each op moves a few "
             "KB and pays the full dispatch cost. torch._foreach_* or a fused optimizer is the "
             "remedy."),
    _mystery("c", "compute",
             "A matmul of thousands of tokens by a square weight does hundreds of FLOPs per byte: "
             "far above the ridge point. Only faster math helps: tensor cores, lower precision."),
    Exercise(Question(
        "04.block_lower_bound_us",
        "workloads.transformer_block(batch=16): from bl.count's FLOPs and bytes and this "
        "machine's ceilings (matmul FLOP/s, bandwidth), what is the roofline's lower bound on "
        "its time? No real run can beat it.",
        unit="µs", rel_tol=0.15,
        hints=("Two floors: FLOPs / matmul FLOP/s and bytes / bandwidth. The work cannot finish "
               "before the slower of the two resources is done.",
               "bl.roofline.lower_bound_s(counts.flops, counts.bytes_moved, c.matmul_flops_per_s, "
               "c.mem_bandwidth_bytes_per_s), in µs."),
        explain="Compare it with the measured time: the gap is what overhead and imperfect "
        "kernels cost.",
    ), _block_lower_bound_us, _block_mistakes),
    Exercise(Question(
        "04.decode_token_ms",
        f"A decoder with {_DECODER_PARAMS / 1e9:.0f} billion parameters generates text on an "
        "H100 in bf16, one sequence at a time (batch 1). Each new token's forward pass reads "
        "every weight once; ignore the KV cache and the activations. What is the least time "
        "per token that the H100's memory bandwidth (bl.spec) allows?",
        unit="ms",
        hints=("At batch 1 each weight is used for one multiply-add per token: 2 FLOPs per 2 "
               "bytes, far below the ridge point. Which floor sets the time?",
               "time >= weight bytes / bandwidth; bytes = parameters x 2 (bf16); seconds x 1e3 "
               "for ms."),
        explain="Memory-bound: a few hundred tokens per second at best. Serving B sequences at "
        "once reads each weight once for B tokens, which is why servers batch requests.",
    ), _decode_token_ms, lambda ctx: {
        2.0: "Each bf16 parameter is 2 bytes, not 4: that would be fp32.",
        0.5: "Count bytes, not parameters: each bf16 parameter is 2 bytes.",
        (2 * _DECODER_PARAMS / peak(ctx, "H100", "bf16"))
        / (2 * _DECODER_PARAMS / bandwidth(ctx, "H100")): (
            "That is the compute floor. At batch 1 the bytes take far longer than the FLOPs."),
    }),
)
# fmt: on

CHAPTERS_03_04 = CHAPTER_03 + CHAPTER_04
