"""The course's question bank, as data: prompts, hints, typical slips and worked answers.

Each exercise is a :class:`Question` (what the learner reads: id, prompt,
unit, hints) and a *solver*: a function of a :class:`Context` that returns a
:class:`Worked` answer, the expected value with the steps that produce it.
The solver computes from ``ctx.spec(name)`` (the spec-sheet table) and
``ctx.ceilings`` (this machine's measured ceilings), never from a typed-in
number, so the checker, the worked solution and the instructor's answer key
all follow the table and the machine. ``mistakes`` maps a typical slip (the
ratio *learner's answer / right answer* it produces, or a wrong option) to
its nudge; nudges and hints never contain the expected value.

This module holds the shape of an exercise and chapters 00-02; chapters 03
and 04 are in :mod:`brrrlib.exercises._questions_03_04`. The checking itself lives in
:mod:`brrrlib.exercises`. A chapter adds an exercise by adding an
:class:`Exercise` to its tuple.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brrrlib import _fmt

__all__ = [
    "CHAPTERS_00_02",
    "DEFAULT_REL_TOL",
    "ESSAY_BERT",
    "FP32_BYTES",
    "REGIMES",
    "Context",
    "Exercise",
    "Question",
    "Worked",
    "bandwidth",
    "given_bandwidth",
    "given_peak",
    "index",
    "measured",
    "peak",
    "peak_ratio",
]

DEFAULT_REL_TOL = 0.1
"""Relative tolerance for numeric answers unless a question sets its own: the inputs
are spec-sheet numbers that people round (1.5 vs 1.555 TB/s)."""


# ------------------------------------------------------------------ the shape of an exercise


@dataclass(frozen=True)
class Question:
    """One exercise as the learner sees it: id, prompt, unit or options, hints.

    ``kind`` is ``"number"`` (compared within ``rel_tol``) or ``"choice"``
    (one of ``choices``). ``explain`` is shown once the answer is right. The
    solver and the typical mistakes are kept out of this record, so listing
    questions reveals nothing.
    """

    id: str
    prompt: str
    unit: str = ""
    choices: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    rel_tol: float = DEFAULT_REL_TOL
    explain: str = ""

    def __post_init__(self) -> None:
        if not self.hints:
            raise ValueError(f"question {self.id!r} needs at least one hint")

    @property
    def kind(self) -> str:
        """``"choice"`` when the question has options, else ``"number"``."""
        return "choice" if self.choices else "number"

    @property
    def chapter(self) -> str:
        """The two-digit chapter the question belongs to (``"02"`` for ``"02.ridge"``)."""
        return self.id.split(".", 1)[0]

    def __repr__(self) -> str:
        unit = f" [{self.unit}]" if self.unit else ""
        options = f" (one of: {', '.join(self.choices)})" if self.choices else ""
        return f"{self.id}: {self.prompt}{unit}{options}"


@dataclass(frozen=True)
class Worked:
    """An expected answer with its working: the steps, in words and numbers, that give it."""

    value: Any
    steps: tuple[str, ...] = ()


class Context:
    """What a solver may look at: the spec table and this machine's ceilings.

    ``ceilings`` is measured (or read from the on-disk cache) only when a
    question needs it, so spec-sheet questions never start a measurement;
    ``used_ceilings`` records whether one did (the answer key marks those
    answers as this machine's) and ``known_ceilings`` holds them once known,
    so the next question can reuse them. Tests pass hand-made ceilings.
    """

    def __init__(self, ceilings: Any = None) -> None:
        self.known_ceilings = ceilings
        self.used_ceilings = False

    @staticmethod
    def spec(name: str) -> Any:
        """The spec-sheet row ``bl.spec(name)``."""
        from brrrlib.hardware import spec

        return spec(name)

    @property
    def ceilings(self) -> Any:
        """This machine's ceilings (``bl.measure_ceilings()``, cached on disk)."""
        self.used_ceilings = True
        if self.known_ceilings is None:
            from brrrlib.ceilings import measure_ceilings

            self.known_ceilings = measure_ceilings()  # shows progress if it has to measure
        return self.known_ceilings


Mistakes = Mapping[Any, str] | Callable[[Context], Mapping[Any, str]]


@dataclass(frozen=True)
class Exercise:
    """A question, its solver, and the nudges for its typical slips."""

    question: Question
    solve: Callable[[Context], Worked]
    mistakes: Mistakes = field(default_factory=dict)

    def mistakes_for(self, ctx: Context) -> Mapping[Any, str]:
        """The slips and their nudges (some depend on the spec table)."""
        return self.mistakes(ctx) if callable(self.mistakes) else self.mistakes


def index(exercises: tuple[Exercise, ...]) -> dict[str, Exercise]:
    """The exercises by id, in course order; an id given twice is refused."""
    out: dict[str, Exercise] = {}
    for ex in exercises:
        if ex.question.id in out:
            raise ValueError(f"question id {ex.question.id!r} is registered twice")
        out[ex.question.id] = ex
    return out


# ------------------------------------------------------------------ numbers the solvers share

FP32_BYTES = 4
REGIMES = ("compute", "memory", "overhead")


def peak(ctx: Context, device: str, dtype: str) -> float:
    """The spec sheet's peak FLOP/s of ``device`` in ``dtype``."""
    return float(ctx.spec(device).peak_flops_per_s[dtype])


def bandwidth(ctx: Context, device: str) -> float:
    """The spec sheet's memory bandwidth of ``device``, bytes/s."""
    return float(ctx.spec(device).mem_bandwidth_bytes_per_s)


def given_peak(ctx: Context, device: str, dtype: str) -> str:
    """The working step that quotes a spec-sheet peak."""
    return (
        f"{device} {dtype} peak, bl.spec('{device}'): {_fmt.si(peak(ctx, device, dtype), 'FLOP/s')}"
    )


def given_bandwidth(ctx: Context, device: str) -> str:
    """The working step that quotes a spec-sheet bandwidth."""
    return (
        f"{device} memory bandwidth, bl.spec('{device}'): {_fmt.si(bandwidth(ctx, device), 'B/s')}"
    )


def peak_ratio(ctx: Context, device: str, top: str, bottom: str) -> Worked:
    """The worked ratio of two of ``device``'s spec-sheet peaks."""
    return Worked(
        peak(ctx, device, top) / peak(ctx, device, bottom),
        (given_peak(ctx, device, top), given_peak(ctx, device, bottom),
         f"ratio = {top} peak / {bottom} peak"),
    )  # fmt: skip


def measured(ctx: Context, what: str) -> tuple[float, str]:
    """A measured ceiling and the step that quotes it."""
    c = ctx.ceilings
    value = getattr(c, what)
    unit = {"matmul_flops_per_s": "FLOP/s", "mem_bandwidth_bytes_per_s": "B/s"}.get(what)
    text = _fmt.seconds(value) if unit is None else _fmt.si(value, unit)
    return value, f"bl.measure_ceilings().{what} on this machine: {text}"


# ------------------------------------------------------------------ chapter 00


def _ridge_a100(ctx: Context) -> Worked:
    return Worked(
        peak(ctx, "A100", "fp32") / bandwidth(ctx, "A100"),
        (given_peak(ctx, "A100", "fp32"), given_bandwidth(ctx, "A100"),
         "ridge point = peak FLOP/s / bandwidth in bytes/s (the seconds cancel)"),
    )  # fmt: skip


def _ridge_here(ctx: Context) -> Worked:
    (mm, mm_step), (bw, bw_step) = (measured(ctx, "matmul_flops_per_s"),
                                    measured(ctx, "mem_bandwidth_bytes_per_s"))  # fmt: skip
    return Worked(mm / bw, (mm_step, bw_step, "ridge point = matmul FLOP/s / bandwidth"))


def _growth(ctx: Context) -> Worked:
    flops = peak(ctx, "H100", "fp16") / peak(ctx, "V100", "fp16")
    bytes_per_s = bandwidth(ctx, "H100") / bandwidth(ctx, "V100")
    return Worked(
        flops / bytes_per_s,
        (given_peak(ctx, "H100", "fp16"), given_peak(ctx, "V100", "fp16"),
         f"FLOP/s grew {_fmt.si(flops)}x", given_bandwidth(ctx, "H100"), given_bandwidth(ctx, "V100"),
         f"bandwidth grew {_fmt.si(bytes_per_s)}x", "FLOPs per byte needed grew by their quotient"),
    )  # fmt: skip


def _regime_tiny(ctx: Context) -> Worked:
    flops, nbytes = 10, 10 * 2 * FP32_BYTES  # read 10 floats, write 10
    return Worked(
        "overhead",
        (f"one call: {flops} FLOPs and {nbytes} bytes (40 read, 40 written)",
         f"an A100 does the FLOPs in {_fmt.seconds(flops / peak(ctx, 'A100', 'fp32'))} and "
         f"moves the bytes in {_fmt.seconds(nbytes / bandwidth(ctx, 'A100'))}",
         "one op's fixed cost (Python, dispatcher, launch) is microseconds: chapter 03 "
         "measures it; it dwarfs both"),
    )  # fmt: skip


# fmt: off
CHAPTER_00 = (
    Exercise(Question(
        "00.ridge_a100",
        "An A100 without tensor cores (fp32 peak FLOP/s) and its memory bandwidth: how many "
        "FLOPs must a kernel do per byte it moves before compute, not memory, is the limit? "
        "(the ridge point)",
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
        "This machine's ridge point: its measured matmul FLOP/s divided by its measured memory "
        "bandwidth (both from bl.measure_ceilings()).",
        unit="FLOP/byte",
        hints=("Run c = bl.measure_ceilings() and look at its fields; units are FLOP/s and bytes/s.",
               "c.matmul_flops_per_s / c.mem_bandwidth_bytes_per_s"),
        explain="An op doing fewer FLOPs per byte than this is memory-bound on this machine.",
    ), _ridge_here, {4.0: "That is per fp32 element (4 bytes); the question asks per byte."}),
    Exercise(Question(
        "00.growth",
        "From V100 to H100, fp16 tensor-core FLOP/s grew by one factor and memory bandwidth by "
        "another. Divide the FLOP/s growth by the bandwidth growth: by how many times did the "
        "FLOPs a kernel must do per byte (to stay compute-bound) go up?",
        unit="times (a ratio)",
        hints=("Growth of X = X on H100 / X on V100. Do it for FLOP/s and for bandwidth, then divide.",
               "It equals H100's fp16 ridge point divided by V100's fp16 ridge point."),
        explain="Compute outgrew bandwidth: each generation, more kernels end up memory-bound.",
    ), _growth),
    Exercise(Question(
        "00.regime_tiny",
        "A loop calls x + 1 a million times on a tensor of 10 floats. Which of the three is it "
        "paying for?",
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


# ------------------------------------------------------------------ chapter 01

_MM_SHAPE = (512, 1024, 256)  # (M, K, N) for 01.matmul_flops
#: The essay's BERT table (% of FLOPs, % of runtime) per operator class, from Ivanov et al.,
#: "Data Movement Is All You Need" (https://arxiv.org/abs/2007.00072), as quoted in
#: https://horace.io/brrr_intro.html ("Compute" section). Chapter 01 shows it.
ESSAY_BERT = {
    "tensor contraction": (99.80, 61.0),
    "statistical normalization": (0.17, 25.5),
    "element-wise": (0.03, 13.5),
}
_MM_HERE_N = 2048  # square size for 01.matmul_time_here


def _matmul_flops(ctx: Context) -> Worked:
    m, k, n = _MM_SHAPE
    return Worked(
        2 * m * k * n,
        (f"M x N = {m} x {n} outputs, each a dot product of length K = {k}",
         "a dot product of length K is K multiplies and K adds: 2K FLOPs",
         f"FLOPs = 2 x M x K x N = 2 x {m} x {k} x {n}"),
    )  # fmt: skip


def _matmul_time_here(ctx: Context) -> Worked:
    n = _MM_HERE_N
    peak, step = measured(ctx, "matmul_flops_per_s")
    return Worked(
        2 * n**3 / peak,
        (f"FLOPs = 2 x n^3 = 2 x {n}^3 = {_fmt.si(2 * n**3, 'FLOP')}", step,
         "time >= FLOPs / (FLOP/s), in seconds"),
    )  # fmt: skip


def _bert_norm(ctx: Context) -> Worked:
    return Worked(
        "memory",
        ("the essay: normalization does 0.17% of the FLOPs in 25.5% of the time, so it runs "
         f"at {_fmt.si(25.5 / 0.17)}x fewer FLOP/s than the model's average",
         "it reads and writes every activation for a few FLOPs per element: far below the "
         f"ridge point (A100 fp32: {_fmt.si(peak(ctx, 'A100', 'fp32') / bandwidth(ctx, 'A100'))} "
         "FLOP/byte)",
         "so the bytes, not the FLOPs, set its time"),
    )  # fmt: skip


def _rate(op_class: str) -> float:
    """An operator class's FLOP/s in units of the whole model's: its FLOP share over its time share."""
    flops, time = ESSAY_BERT[op_class]
    return flops / time


def _bert_gap(ctx: Context) -> Worked:
    mm, norm = _rate("tensor contraction"), _rate("statistical normalization")
    return Worked(
        mm / norm,
        ("FLOP/s = FLOPs / time, so each class's rate is its % of FLOPs over its % of time",
         f"matmuls: 99.80 / 61.0 = {mm:.3g}; normalization: 0.17 / 25.5 = {norm:.3g} (units: "
         "the model's average FLOP/s)",
         f"ratio = {mm:.3g} / {norm:.3g}; units alone would explain "
         f"{peak(ctx, 'A100', 'bf16') / peak(ctx, 'A100', 'fp32'):.0f}x (A100 bf16 / fp32)"),
    )  # fmt: skip


# fmt: off
CHAPTER_01 = (
    Exercise(Question(
        "01.matmul_flops",
        f"How many FLOPs does torch.mm do for a ({_MM_SHAPE[0]}, {_MM_SHAPE[1]}) matrix times a "
        f"({_MM_SHAPE[1]}, {_MM_SHAPE[2]}) matrix?",
        unit="FLOPs", rel_tol=0.01,
        hints=("Each of the M*N outputs is a dot product of length K.",
               "A dot product of length K is K multiplies and K adds."),
        explain="2*M*K*N: the formula every matmul FLOP count (and bl.count) uses.",
    ), _matmul_flops, {0.5: "A multiply-add counts as two FLOPs: one multiply and one add."}),
    Exercise(Question(
        "01.tensor_core_ratio",
        "On an A100, how many times higher is the bf16 tensor-core peak than the fp32 peak "
        "(which does not use tensor cores)?",
        unit="times (a ratio)",
        hints=("bl.spec('A100').peak_flops_per_s is a dict keyed by dtype.",
               "Divide the 'bf16' entry by the 'fp32' entry."),
        explain="Anything that is not a matmul runs on the slow units: that is the real price of "
        "'everything else'.",
    ), lambda ctx: peak_ratio(ctx, "A100", "bf16", "fp32")),
    Exercise(Question(
        "01.matmul_time_here",
        f"At this machine's measured matmul peak, what is the shortest time a {_MM_HERE_N}x"
        f"{_MM_HERE_N} by {_MM_HERE_N}x{_MM_HERE_N} fp32 matmul can take?",
        unit="seconds",
        hints=("time >= FLOPs / (FLOP/s). Count the FLOPs first.",
               "FLOPs = 2*n**3; divide by bl.measure_ceilings().matmul_flops_per_s."),
        explain="Compare with bl.benchmark(torch.mm, a, b): how close does this machine get?",
    ), _matmul_time_here, {0.5: "A multiply-add counts as two FLOPs: one multiply and one add."}),
    Exercise(Question(
        "01.bert_norm",
        "In the essay's BERT measurements, normalization is 0.17% of the FLOPs but 25.5% of the "
        "runtime. What is it spending its time on?",
        choices=REGIMES,
        hints=("It does almost no arithmetic, yet it reads and writes whole activations.",
               "Count bytes per FLOP: a layer norm moves each element a few times for a few FLOPs."),
        explain="Normalization is memory-bound: the trucks, not the factory, set its time.",
    ), _bert_norm, {
        "compute": "0.17% of the FLOPs cannot fill 25.5% of the time on the factory floor.",
        "overhead": "BERT's activations are large, so each call does real work; think bytes.",
    }),
    Exercise(Question(
        "01.bert_gap",
        "In the essay's BERT table, matmuls do 99.80% of the FLOPs in 61.0% of the runtime and "
        "normalization 0.17% of the FLOPs in 25.5% of the runtime. How many times fewer FLOP/s "
        "does normalization achieve than the matmuls? (Tensor cores against the fp32 units "
        "would explain 16x.)",
        unit="times (a ratio)",
        hints=("FLOP/s is FLOPs divided by time; the shares stand in for both (the totals cancel).",
               "Rate of a class = its % of FLOPs / its % of time. Divide the matmuls' rate by "
               "normalization's."),
        explain="Far more than the 16x slower units explain: normalization does a few FLOPs per "
        "byte it moves, so it waits on memory. The same arithmetic gives element-wise ops ~700x.",
    ), _bert_gap, {
        (99.80 / 0.17) / ((99.80 / 61.0) / (0.17 / 25.5)): (
            "That compares FLOPs only; the question is about FLOPs per second: divide each "
            "class's FLOP share by its time share first."),
    }),
)
# fmt: on


# ------------------------------------------------------------------ chapter 02

_UNARY_BYTES_PER_ELEMENT = 2 * FP32_BYTES  # read one fp32, write one fp32
_UNARY_HERE_N = 2**24  # elements for 02.unary_time_here
_FUSION_OPS = 3  # y = x.sin().cos().exp() for 02.fusion_speedup
_LN_SHAPE = (4096, 1024)  # (rows, width) of the activation in 02.layernorm_bytes
# FLOPs per element of tanh-approximated gelu, counted by hand:
# 0.5*x*(1+tanh(0.79788456*(x+0.044715*x**3))), tanh as ~8 FLOPs of exp/div.
_GELU_FLOPS_PER_ELEMENT = 16


def _ops_per_element(ctx: Context, device: str) -> float:
    """FLOPs the vector units can do while one fp32 element is read and written."""
    return peak(ctx, device, "fp32") * _UNARY_BYTES_PER_ELEMENT / bandwidth(ctx, device)


def _ridge_per_element(ctx: Context) -> Worked:
    return Worked(
        _ops_per_element(ctx, "A100"),
        (given_peak(ctx, "A100", "fp32"), given_bandwidth(ctx, "A100"),
         "bytes per element = 4 read + 4 written = 8",
         "FLOPs per element = peak x 8 / bandwidth"),
    )  # fmt: skip


def _fusion_speedup(ctx: Context) -> Worked:
    eager, fused = _FUSION_OPS * _UNARY_BYTES_PER_ELEMENT, _UNARY_BYTES_PER_ELEMENT
    return Worked(
        eager / fused,
        (f"eager: {_FUSION_OPS} kernels, each reads 4 and writes 4 bytes per element = {eager}",
         f"fused: read x once, write y once = {fused} bytes per element",
         "memory-bound: time is proportional to bytes, so speedup = eager bytes / fused bytes"),
    )  # fmt: skip


def _layernorm_bytes(ctx: Context) -> Worked:
    rows, width = _LN_SHAPE
    activations = 2 * FP32_BYTES * rows * width  # read x, write y
    params = 2 * FP32_BYTES * width  # weight and bias, read once
    return Worked(
        (activations + params) / (rows * width),
        (f"x and y: {rows} x {width} elements, 4 bytes read + 4 written each = "
         f"{_fmt.binary_bytes(activations)}",
         f"weight and bias: 2 x {width} x 4 bytes = {_fmt.binary_bytes(params)}, read once",
         f"per element of x: ({activations} + {params}) / {rows * width}"),
    )  # fmt: skip


def _unary_time_here(ctx: Context) -> Worked:
    nbytes = _UNARY_HERE_N * _UNARY_BYTES_PER_ELEMENT
    bw, step = measured(ctx, "mem_bandwidth_bytes_per_s")
    return Worked(
        nbytes / bw,
        (f"bytes = {_fmt.elements(_UNARY_HERE_N)} elements x (4 read + 4 written) = "
         f"{_fmt.binary_bytes(nbytes)}", step, "time >= bytes / (bytes/s), in seconds"),
    )  # fmt: skip


def _gelu_vs_relu(ctx: Context) -> Worked:
    budget = _ops_per_element(ctx, "A100")
    same = _GELU_FLOPS_PER_ELEMENT < budget
    return Worked(
        "same" if same else "relu",
        (f"gelu (tanh form) does about {_GELU_FLOPS_PER_ELEMENT} FLOPs per element, relu 1",
         f"an A100 can do {_fmt.si(budget)} fp32 FLOPs per element in the time it moves it (02.ridge)",
         "both are below that budget: memory-bound, same bytes, same time" if same
         else "gelu is above that budget: compute-bound, so slower than relu"),
    )  # fmt: skip


# fmt: off
CHAPTER_02 = (
    Exercise(Question(
        "02.ridge",
        "A100, fp32, an elementwise op: it reads each 4-byte element and writes one back. How "
        "many FLOPs per element could the fp32 units do in the time memory takes to move that "
        "element in and out?",
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
        "y = x.sin().cos().exp() on a large fp32 tensor, memory-bound. Eager runs three kernels, "
        "each reading its input from memory and writing its output back; a fused kernel reads x "
        "once and writes y once. Predicted speedup of fused over eager?",
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
        f"On this machine, what is the shortest time torch.relu on {_UNARY_HERE_N:,} fp32 "
        "elements can take if it runs at the measured memory bandwidth?",
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
        "On an A100 in fp32, gelu does many more FLOPs per element than relu (which does one). "
        "On a large tensor, which is faster?",
        choices=("gelu", "relu", "same"),
        hints=("Are these two ops compute-bound or memory-bound? Compare their FLOPs per element "
               "with 02.ridge.",
               "Both read one element and write one element."),
        explain="Both are memory-bound: same bytes, same time. The extra FLOPs are free.",
    ), _gelu_vs_relu, {
        "relu": "More FLOPs only costs time once compute is the limit. Is it, for gelu?",
        "gelu": "gelu never does *less* work than relu; think about what sets their time.",
    }),
    Exercise(Question(
        "02.layernorm_bytes",
        f"torch.nn.functional.layer_norm on a {_LN_SHAPE} fp32 activation runs as one kernel: it "
        f"reads x, reads the {_LN_SHAPE[1]} weights and {_LN_SHAPE[1]} biases, and writes y. How "
        "many bytes does it move per element of x?",
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


CHAPTERS_00_02 = CHAPTER_00 + CHAPTER_01 + CHAPTER_02
