"""Exercise checkers for the course chapters: ``bl.check``, ``bl.hint``, ``bl.questions``.

Every chapter ends with a few questions. You write your answer into a
variable and ask the checker::

    answer = 12.5                        # your number, in the unit the prompt names
    bl.check("00.ridge_a100", answer)    # prints feedback, returns True/False
    bl.hint("00.ridge_a100")             # a first hint; level=2 gives a stronger one

How the checker works (so you can trust it):

* The expected answer is **computed when you ask**, never stored: from the
  spec-sheet table (``bl.spec``) or from this machine's measured ceilings
  (``bl.measure_ceilings``). Change the table or the machine and the answer
  follows.
* A numeric answer is right when it is within the question's relative
  tolerance (10 % unless the prompt says otherwise): performance numbers are
  estimates, not digits to copy.
* A wrong answer gets a nudge that diagnoses the usual slips: a units prefix
  (off by 1e3, 1e6, 1e9, 1e12), a ratio turned upside down, the question's own
  common mistakes (forgetting that an op also *writes* its output, counting a
  multiply-add as one FLOP, bytes vs elements), or else how far off you are,
  as a band ("between 1.5x and 3x too high"). The expected value itself is
  never printed before you get it right.

Chapters register their questions with :func:`_add` in their own marked
section below (``# --- chapter 00`` ...). Each question is plain data: an id
``"CC.name"``, a prompt with its unit, a function ``answer(ctx)`` that computes
the expected value from a :class:`_Context`, hints from gentle to strong, and a
mapping of typical mistakes to the nudge they deserve.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brrrlib.devices import ESSAY_PYTHON_ADDS_PER_S

__all__ = ["Question", "QuestionList", "check", "hint", "questions"]

# Relative tolerance for numeric answers unless a question sets its own: the
# inputs are spec-sheet numbers that people round (1.5 vs 1.555 TB/s).
DEFAULT_REL_TOL = 0.1

# A numeric answer this close (as a ratio, in log space) to a power of 1000
# times the right value is reported as a units slip rather than as "too high".
_UNIT_SLIP_REL_TOL = 0.25

_BIG_PREFIXES = {3: "kilo", 6: "mega", 9: "giga", 12: "tera", 15: "peta"}
_SMALL_PREFIXES = {3: "milli", 6: "micro", 9: "nano", 12: "pico"}

# Bands for the generic "how far off" nudge: (upper ratio, words).
_BANDS = (
    (1.5, "a little (less than 1.5x)"),
    (3.0, "by between 1.5x and 3x"),
    (10.0, "by between 3x and 10x"),
    (100.0, "by between 10x and 100x"),
    (math.inf, "by more than 100x"),
)

_CHOICE_SYNONYMS = {
    "memory-bound": "memory",
    "memory bound": "memory",
    "bandwidth": "memory",
    "memory bandwidth": "memory",
    "bandwidth-bound": "memory",
    "compute-bound": "compute",
    "compute bound": "compute",
    "overhead-bound": "overhead",
    "overhead bound": "overhead",
}


class _Context:
    """What an answer function may look at: the spec table and this machine's ceilings.

    ``ceilings`` is measured (or read from the on-disk cache) only when a
    question needs it, so spec-sheet questions never start a measurement.
    Tests pass a fake ``Ceilings`` to make machine-dependent answers exact.
    """

    def __init__(self, ceilings: Any = None) -> None:
        self._ceilings = ceilings

    @staticmethod
    def spec(name: str) -> Any:
        from brrrlib.devices import spec

        return spec(name)

    @property
    def ceilings(self) -> Any:
        if self._ceilings is None:
            from brrrlib.ceilings import measure_ceilings

            self._ceilings = measure_ceilings()  # cached on disk; shows progress if it measures
        return self._ceilings


@dataclass(frozen=True)
class Question:
    """One exercise: its id, the prompt the learner reads, and how it is checked.

    ``kind`` is ``"number"`` (compare within ``rel_tol``) or ``"choice"`` (one
    of ``choices``). ``explain`` is shown once the answer is right. The answer
    function and the typical mistakes are kept out of this record, so listing
    questions reveals nothing.
    """

    id: str
    prompt: str
    unit: str = ""
    kind: str = "number"
    choices: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    rel_tol: float = DEFAULT_REL_TOL
    explain: str = ""

    @property
    def chapter(self) -> str:
        """The two-digit chapter the question belongs to (``"02"`` for ``"02.ridge"``)."""
        return self.id.split(".", 1)[0]

    def __repr__(self) -> str:
        unit = f" [{self.unit}]" if self.unit else ""
        options = f" (one of: {', '.join(self.choices)})" if self.choices else ""
        return f"{self.id}: {self.prompt}{unit}{options}"


@dataclass(frozen=True)
class QuestionList:
    """The questions of one chapter (or all), as returned by :func:`questions`."""

    items: tuple[Question, ...]

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Question:
        return self.items[i]

    @property
    def ids(self) -> tuple[str, ...]:
        """The question ids, in course order."""
        return tuple(q.id for q in self.items)

    def __repr__(self) -> str:
        return "\n".join(repr(q) for q in self.items) or "(no questions)"

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td><code>{html.escape(q.id)}</code></td><td style='text-align:left'>"
            f"{html.escape(q.prompt)}</td><td>{html.escape(q.unit or ', '.join(q.choices))}"
            "</td></tr>"
            for q in self.items
        )
        return f"<table><tr><th>id</th><th>question</th><th>unit / options</th></tr>{rows}</table>"


_QUESTIONS: dict[str, Question] = {}
_ANSWERS: dict[str, Callable[[_Context], Any]] = {}
_MISTAKES: dict[str, Mapping[Any, str] | Callable[[_Context], Mapping[Any, str]]] = {}


def _add(
    id: str,
    prompt: str,
    answer: Callable[[_Context], Any],
    *,
    unit: str = "",
    choices: tuple[str, ...] = (),
    hints: tuple[str, ...] = (),
    rel_tol: float = DEFAULT_REL_TOL,
    mistakes: Mapping[Any, str] | Callable[[_Context], Mapping[Any, str]] | None = None,
    explain: str = "",
) -> None:
    """Register a question (used by the chapter sections of this module).

    ``answer(ctx)`` computes the expected value from ``ctx.spec(name)`` and
    ``ctx.ceilings``. ``mistakes`` maps a typical slip to its nudge: for a
    number, the ratio *learner's answer / right answer* that the slip produces
    (``0.5`` = "forgot that the op also writes"); for a choice, the wrong
    option. It may also be a function of ``ctx`` when the ratio comes from the
    spec table (e.g. the bf16/fp32 peak ratio). Nudges and hints must never
    contain the expected value.
    """
    if id in _QUESTIONS:
        raise ValueError(f"question id {id!r} is registered twice")
    if not hints:
        raise ValueError(f"question {id!r} needs at least one hint")
    _QUESTIONS[id] = Question(
        id=id,
        prompt=prompt,
        unit=unit,
        kind="choice" if choices else "number",
        choices=tuple(choices),
        hints=tuple(hints),
        rel_tol=rel_tol,
        explain=explain,
    )
    _ANSWERS[id] = answer
    _MISTAKES[id] = mistakes if mistakes is not None else {}


def _get(question_id: Any) -> Question:
    if not isinstance(question_id, str):
        raise TypeError(
            f"question_id must be a string such as '02.ridge', got {type(question_id).__name__}"
        )
    try:
        return _QUESTIONS[question_id]
    except KeyError:
        valid = ", ".join(_QUESTIONS)
        raise ValueError(
            f"unknown question_id {question_id!r}; valid ids are: {valid}. "
            "bl.questions() lists them with their prompts."
        ) from None


def questions(chapter: str | int | None = None) -> QuestionList:
    """List the exercises, for one chapter (``"02"`` or ``2``) or for all.

    Each entry shows the id to pass to :func:`check`, the prompt and the unit
    (or the options) the answer is expected in.
    """
    if chapter is None:
        return QuestionList(tuple(_QUESTIONS.values()))
    if isinstance(chapter, bool) or not isinstance(chapter, (str, int)):
        raise TypeError(f"chapter must be like '02' or 2, got {type(chapter).__name__}")
    key = f"{int(chapter):02d}" if isinstance(chapter, int) else chapter.zfill(2)
    items = tuple(q for q in _QUESTIONS.values() if q.chapter == key)
    if not items:
        chapters = sorted({q.chapter for q in _QUESTIONS.values()})
        raise ValueError(
            f"chapter {chapter!r} has no questions; chapters with questions: {chapters}"
        )
    return QuestionList(items)


def hint(question_id: str, level: int = 1) -> None:
    """Print a hint for a question; ``level=2`` (and up) gives a stronger one.

    Hints point at the method (which spec row, which formula), never at the
    number itself.
    """
    q = _get(question_id)
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise ValueError(f"level must be a positive integer (1 = gentlest), got {level!r}")
    n = len(q.hints)
    text = q.hints[min(level, n) - 1]
    more = (
        f"  (bl.hint({question_id!r}, level={level + 1}) gives a stronger hint)"
        if level < n
        else "  (that is the last hint)"
    )
    print(f"Hint {min(level, n)}/{n} for {question_id}: {text}\n{more}")


def check(question_id: str, answer: Any, *, ceilings: Any = None) -> bool:
    """Check an answer, print feedback, and return ``True`` when it is right.

    ``answer`` is a number in the unit the prompt names (plain Python number,
    NumPy scalar or 0-d tensor) or, for a multiple-choice question, one of its
    options as a string. ``None`` means "not answered yet" and only prints a
    reminder. ``ceilings`` replaces this machine's measured ceilings (tests use
    it; by default they come from ``bl.measure_ceilings()``, cached on disk).
    """
    q = _get(question_id)
    if answer is None or answer is ...:
        print(
            f"{question_id}: fill in your answer first ({_expects(q)}), then run this cell again."
        )
        return False
    if q.kind == "number":
        answer = _as_number(q, answer)  # a bad type raises before anything is measured
    elif not isinstance(answer, str):
        raise TypeError(
            f"answer to {q.id} must be {_expects(q)} (a string), got {type(answer).__name__}"
        )
    ctx = _Context(ceilings)
    expected = _ANSWERS[question_id](ctx)
    mistakes = _MISTAKES[question_id]
    if callable(mistakes):
        mistakes = mistakes(ctx)
    if q.kind == "choice":
        ok, message = _judge_choice(q, answer, expected, mistakes)
    else:
        ok, message = _judge_number(q, answer, float(expected), mistakes)
    mark = "Correct!" if ok else "Not yet."
    print(f"{mark} {message}".rstrip())
    if not ok:
        print(f"  (bl.hint({question_id!r}) helps)")
    return ok


def _expects(q: Question) -> str:
    if q.kind == "choice":
        return "one of: " + ", ".join(repr(c) for c in q.choices)
    return f"a number, in {q.unit}" if q.unit else "a number"


def _as_number(q: Question, answer: Any) -> float:
    if hasattr(answer, "item") and callable(answer.item) and getattr(answer, "ndim", 0) == 0:
        answer = answer.item()  # NumPy scalar or 0-d tensor
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        raise TypeError(
            f"answer to {q.id} must be {_expects(q)}, got {type(answer).__name__} {answer!r}"
        )
    return float(answer)


def _close(ratio: float, target: float, rel_tol: float) -> bool:
    return target > 0 and abs(math.log(ratio / target)) <= math.log1p(rel_tol)


def _judge_number(
    q: Question, answer: Any, expected: float, mistakes: Mapping[Any, str]
) -> tuple[bool, str]:
    value = _as_number(q, answer)
    if not math.isfinite(value):
        return False, f"{value} is not a finite number; the answer is {_expects(q)}."
    if value == 0 or expected == 0:
        if value == expected:
            return True, q.explain
        return False, "Zero is not right here: the quantity asked for is not zero."
    ratio = value / expected
    if ratio < 0:
        return False, "The sign is wrong: this quantity is positive. Check what you subtracted."
    if _close(ratio, 1.0, q.rel_tol):
        # right, so the computed value may be shown: it tells how close the rounding was
        unit = f" {q.unit}" if q.unit else ""
        return True, f"(computed: {expected:.4g}{unit}) {q.explain}"
    for factor, nudge in mistakes.items():
        if _close(ratio, float(factor), q.rel_tol):
            return False, nudge
    exponent = round(math.log10(ratio) / 3) * 3
    if exponent != 0 and _close(ratio, 10.0**exponent, _UNIT_SLIP_REL_TOL):
        unit = q.unit or "the unit asked for"
        if exponent < 0:
            prefix = _BIG_PREFIXES.get(-exponent, f"1e{-exponent}")
            guess = f"did you answer in {prefix}-units (e.g. 1.5 for 1.5e12)?"
        else:
            prefix = _SMALL_PREFIXES.get(exponent, f"1e-{exponent}")
            guess = f"did you answer in {prefix}-units (e.g. milliseconds instead of seconds)?"
        direction = "too large" if exponent > 0 else "too small"
        return False, (
            f"Your number is {direction} by a factor of about 1e{abs(exponent)}: {guess} "
            f"The answer is wanted in plain {unit}."
        )
    if _close(value * expected, 1.0, q.rel_tol) and abs(math.log10(abs(ratio))) > 0.5:
        return False, "Your ratio looks upside down: divide the other way round."
    direction = "too high" if ratio > 1 else "too low"
    off = ratio if ratio > 1 else 1 / ratio
    band = next(words for upper, words in _BANDS if off < upper)
    return False, f"Your answer is {direction} {band}."


def _normalize_choice(answer: str) -> str:
    a = " ".join(answer.strip().lower().replace("_", " ").split())
    return _CHOICE_SYNONYMS.get(a, a)


def _judge_choice(
    q: Question, answer: Any, expected: str, mistakes: Mapping[Any, str]
) -> tuple[bool, str]:
    a = _normalize_choice(answer)  # check() has made sure it is a string
    if a not in q.choices:
        return False, f"{answer!r} is not one of the options: {', '.join(map(repr, q.choices))}."
    if a == expected:
        return True, q.explain
    return False, mistakes.get(a, f"{a!r} is not it. Think about which resource runs out first.")


# ---------------------------------------------------------------------------
# Answer helpers shared by chapters. Spec-sheet numbers always come from
# ctx.spec(...) and measured ones from ctx.ceilings: nothing is typed here.
# ---------------------------------------------------------------------------

_FP32_BYTES = 4


def _peak(ctx: _Context, device: str, dtype: str) -> float:
    return float(ctx.spec(device).peak_flops_per_s[dtype])


def _bw(ctx: _Context, device: str) -> float:
    return float(ctx.spec(device).mem_bandwidth_bytes_per_s)


# --- chapter 00 --------------------------------------------------------------

_add(
    "00.ridge_a100",
    "An A100 without tensor cores (fp32 peak FLOP/s) and its memory bandwidth: how many "
    "FLOPs must a kernel do per byte it moves before compute, not memory, is the limit? "
    "(the ridge point)",
    lambda ctx: _peak(ctx, "A100", "fp32") / _bw(ctx, "A100"),
    unit="FLOP/byte",
    hints=(
        "The ridge point is peak FLOP/s divided by bytes/s; the seconds cancel.",
        "bl.spec('A100').peak_flops_per_s['fp32'] / bl.spec('A100').mem_bandwidth_bytes_per_s",
    ),
    mistakes=lambda ctx: {
        4.0: "That is per fp32 element (4 bytes); the question asks per byte.",
        _peak(ctx, "A100", "bf16") / _peak(ctx, "A100", "fp32"): (
            "You used the tensor-core (bf16) peak; the question asks for fp32 without tensor cores."
        ),
    },
    explain="Below this many FLOPs per byte, an A100 kernel waits on the trucks, not the factory.",
)

_add(
    "00.ridge_here",
    "This machine's ridge point: its measured matmul FLOP/s divided by its measured memory "
    "bandwidth (both from bl.measure_ceilings()).",
    lambda ctx: ctx.ceilings.matmul_flops_per_s / ctx.ceilings.mem_bandwidth_bytes_per_s,
    unit="FLOP/byte",
    hints=(
        "Run c = bl.measure_ceilings() and look at its fields; units are FLOP/s and bytes/s.",
        "c.matmul_flops_per_s / c.mem_bandwidth_bytes_per_s",
    ),
    mistakes={4.0: "That is per fp32 element (4 bytes); the question asks per byte."},
    explain="An op doing fewer FLOPs per byte than this is memory-bound on this machine.",
)

_add(
    "00.growth",
    "From V100 to H100, fp16 tensor-core FLOP/s grew by one factor and memory bandwidth by "
    "another. Divide the FLOP/s growth by the bandwidth growth: by how many times did the "
    "FLOPs a kernel must do per byte (to stay compute-bound) go up?",
    lambda ctx: (
        (_peak(ctx, "H100", "fp16") / _peak(ctx, "V100", "fp16"))
        / (_bw(ctx, "H100") / _bw(ctx, "V100"))
    ),
    unit="times (a ratio)",
    hints=(
        "Growth of X = X on H100 / X on V100. Do it for FLOP/s and for bandwidth, then divide.",
        "It equals H100's fp16 ridge point divided by V100's fp16 ridge point.",
    ),
    explain="Compute outgrew bandwidth: each generation, more kernels end up memory-bound.",
)

_add(
    "00.regime_tiny",
    "A loop calls x + 1 a million times on a tensor of 10 floats. Which of the three is it "
    "paying for?",
    lambda ctx: "overhead",
    choices=("compute", "memory", "overhead"),
    hints=(
        "Ten floats are 40 bytes and ten FLOPs. How long would the factory or the trucks need?",
        "Every call goes through Python, the dispatcher and a kernel launch, whatever its size.",
    ),
    mistakes={
        "compute": "Ten additions take the factory nanoseconds; the time goes elsewhere.",
        "memory": "40 bytes take the trucks nanoseconds; the time goes elsewhere.",
    },
    explain="Tiny ops spend their time on the instructions (Python, dispatch, launch), not the work.",
)

# --- chapter 01 --------------------------------------------------------------

_MM_SHAPE = (512, 1024, 256)  # (M, K, N) for 01.matmul_flops
_MM_HERE_N = 2048  # square size for 01.matmul_time_here


def _mm_flops(m: int, k: int, n: int) -> int:
    return 2 * m * k * n  # one multiply + one add per (i, j, k)


_add(
    "01.matmul_flops",
    f"How many FLOPs does torch.mm do for a ({_MM_SHAPE[0]}, {_MM_SHAPE[1]}) matrix times a "
    f"({_MM_SHAPE[1]}, {_MM_SHAPE[2]}) matrix?",
    lambda ctx: _mm_flops(*_MM_SHAPE),
    unit="FLOPs",
    rel_tol=0.01,
    hints=(
        "Each of the M*N outputs is a dot product of length K.",
        "A dot product of length K is K multiplies and K adds.",
    ),
    mistakes={0.5: "A multiply-add counts as two FLOPs: one multiply and one add."},
    explain="2*M*K*N: the formula every matmul FLOP count (and bl.count) uses.",
)

_add(
    "01.tensor_core_ratio",
    "On an A100, how many times higher is the bf16 tensor-core peak than the fp32 peak "
    "(which does not use tensor cores)?",
    lambda ctx: _peak(ctx, "A100", "bf16") / _peak(ctx, "A100", "fp32"),
    unit="times (a ratio)",
    hints=(
        "bl.spec('A100').peak_flops_per_s is a dict keyed by dtype.",
        "Divide the 'bf16' entry by the 'fp32' entry.",
    ),
    explain="Anything that is not a matmul runs on the slow units: that is the real price of "
    "'everything else'.",
)

_add(
    "01.matmul_time_here",
    f"At this machine's measured matmul peak, what is the shortest time a {_MM_HERE_N}x"
    f"{_MM_HERE_N} by {_MM_HERE_N}x{_MM_HERE_N} fp32 matmul can take?",
    lambda ctx: _mm_flops(_MM_HERE_N, _MM_HERE_N, _MM_HERE_N) / ctx.ceilings.matmul_flops_per_s,
    unit="seconds",
    hints=(
        "time >= FLOPs / (FLOP/s). Count the FLOPs first.",
        "FLOPs = 2*n**3; divide by bl.measure_ceilings().matmul_flops_per_s.",
    ),
    mistakes={0.5: "A multiply-add counts as two FLOPs: one multiply and one add."},
    explain="Compare with bl.benchmark(torch.mm, a, b): how close does this machine get?",
)

_add(
    "01.bert_norm",
    "In the essay's BERT measurements, normalization is 0.17% of the FLOPs but 25.5% of the "
    "runtime. What is it spending its time on?",
    lambda ctx: "memory",
    choices=("compute", "memory", "overhead"),
    hints=(
        "It does almost no arithmetic, yet it reads and writes whole activations.",
        "Count bytes per FLOP: a layer norm moves each element a few times for a few FLOPs.",
    ),
    mistakes={
        "compute": "0.17% of the FLOPs cannot fill 25.5% of the time on the factory floor.",
        "overhead": "BERT's activations are large, so each call does real work; think bytes.",
    },
    explain="Normalization is memory-bound: the trucks, not the factory, set its time.",
)

# --- chapter 02 --------------------------------------------------------------

_UNARY_BYTES_PER_ELEMENT = 2 * _FP32_BYTES  # read one fp32, write one fp32
_UNARY_HERE_N = 2**24  # elements for 02.unary_time_here
# FLOPs per element of tanh-approximated gelu, counted by hand:
# 0.5*x*(1+tanh(0.79788456*(x+0.044715*x**3))), tanh as ~8 FLOPs of exp/div.
_GELU_FLOPS_PER_ELEMENT = 16


def _ops_per_element(ctx: _Context, device: str) -> float:
    """FLOPs the vector units can do while one fp32 element is read and written."""
    return _peak(ctx, device, "fp32") * _UNARY_BYTES_PER_ELEMENT / _bw(ctx, device)


_add(
    "02.ridge",
    "A100, fp32, an elementwise op: it reads each 4-byte element and writes one back. How "
    "many FLOPs per element could the fp32 units do in the time memory takes to move that "
    "element in and out?",
    lambda ctx: _ops_per_element(ctx, "A100"),
    unit="FLOPs per element",
    hints=(
        "How many elements per second can the trucks carry in and out? Compare with FLOP/s.",
        "Bytes per element moved = 4 (read) + 4 (write). FLOPs per element = peak * 8 / bandwidth.",
    ),
    mistakes=lambda ctx: {
        0.5: "Remember the op also writes its output: 8 bytes move per element, not 4.",
        0.125: "That is per byte; the question asks per element (read + write = 8 bytes).",
        _peak(ctx, "A100", "bf16") / _peak(ctx, "A100", "fp32"): (
            "Elementwise ops cannot use the tensor cores: use the fp32 peak."
        ),
    },
    explain="Until an elementwise op does this much arithmetic, its cost is just moving bytes.",
)

_add(
    "02.fusion_speedup",
    "y = x.cos().cos() on a large tensor, memory-bound. Eager runs two kernels (the first writes "
    "a temporary, the second reads it back); a fused kernel reads x once and writes y once. "
    "Predicted speedup of fused over eager?",
    lambda ctx: (2 * _UNARY_BYTES_PER_ELEMENT) / _UNARY_BYTES_PER_ELEMENT,
    unit="times (a ratio)",
    hints=(
        "When memory-bound, time is proportional to bytes moved. Count reads and writes.",
        "Eager: read x, write tmp, read tmp, write y. Fused: read x, write y.",
    ),
    mistakes={
        0.75: "Count the temporary twice in eager: it is written once and read back once.",
    },
    explain="Fusion removes the round trip to the warehouse; the cos arithmetic is nearly free.",
)

_add(
    "02.unary_time_here",
    f"On this machine, what is the shortest time torch.relu on {_UNARY_HERE_N:,} fp32 elements "
    "can take if it runs at the measured memory bandwidth?",
    lambda ctx: _UNARY_HERE_N * _UNARY_BYTES_PER_ELEMENT / ctx.ceilings.mem_bandwidth_bytes_per_s,
    unit="seconds",
    hints=(
        "time >= bytes moved / (bytes/s). Count the bytes first.",
        "Bytes = elements * (4 read + 4 written); bandwidth is "
        "bl.measure_ceilings().mem_bandwidth_bytes_per_s.",
    ),
    mistakes={
        0.5: "Remember the op also writes its output: 8 bytes move per element, not 4.",
        0.25: "Each fp32 element is 4 bytes: convert elements to bytes.",
        0.125: "Bytes, not elements: each element is 4 bytes read plus 4 bytes written.",
    },
    explain="Compare with bl.benchmark(torch.relu, x): the gap is what a real kernel loses.",
)

_add(
    "02.gelu_vs_relu",
    "On an A100 in fp32, gelu does many more FLOPs per element than relu (which does one). On "
    "a large tensor, which is faster?",
    lambda ctx: "same" if _GELU_FLOPS_PER_ELEMENT < _ops_per_element(ctx, "A100") else "relu",
    choices=("gelu", "relu", "same"),
    hints=(
        "Are these two ops compute-bound or memory-bound? Compare their FLOPs per element with "
        "02.ridge.",
        "Both read one element and write one element.",
    ),
    mistakes={
        "relu": "More FLOPs only costs time once compute is the limit. Is it, for gelu?",
        "gelu": "gelu never does *less* work than relu; think about what sets their time.",
    },
    explain="Both are memory-bound: same bytes, same time. The extra FLOPs are free.",
)

# --- chapter 03 (owner: chapter 03 author; add questions below with _add) ------

# The essay's figure for how many additions per second a Python loop does
# (https://horace.io/brrr_intro.html, section "Overhead"). Not a spec-sheet
# number: a measured interpreter speed the essay quotes; chapter 03 measures it here.

# a + b on fp32 reads two numbers and writes one: 3 x 4 bytes per element.
_ADD_BYTES_PER_ELEMENT = 3 * _FP32_BYTES

_add(
    "03.python_vs_h100",
    "The essay measures Python at about 32 million additions per second. How many bf16 "
    "FLOPs can an H100 (dense tensor-core peak, from bl.spec) do in the time Python does "
    "one addition?",
    lambda ctx: _peak(ctx, "H100", "bf16") / ESSAY_PYTHON_ADDS_PER_S,
    unit="FLOPs (a plain count)",
    hints=(
        "FLOPs per Python addition = (FLOPs per second) / (additions per second).",
        "bl.spec('H100').peak_flops_per_s['bf16'] / 32e6",
    ),
    mistakes=lambda ctx: {
        _peak(ctx, "H100", "fp32") / _peak(ctx, "H100", "bf16"): (
            "You used the fp32 peak; the question asks for bf16 on the tensor cores."
        ),
        _peak(ctx, "A100", "bf16") / _peak(ctx, "H100", "bf16"): (
            "That is the A100's number (the essay's); the question asks for the H100."
        ),
    },
    explain="Millions of FLOPs per line of Python: a GPU is only busy when each op is big.",
)

_add(
    "03.break_even_numel",
    "a + b on n fp32 elements reads 2n numbers and writes n. For which n does moving those "
    "bytes at this machine's measured bandwidth take exactly as long as one op's fixed "
    "overhead (both from bl.measure_ceilings())? Below it, a + b is mostly overhead.",
    lambda ctx: (
        ctx.ceilings.op_overhead_s * ctx.ceilings.mem_bandwidth_bytes_per_s / _ADD_BYTES_PER_ELEMENT
    ),
    unit="elements",
    hints=(
        "Set n x (bytes per element) / bandwidth equal to the overhead and solve for n.",
        "n = c.op_overhead_s * c.mem_bandwidth_bytes_per_s / 12, with c = bl.measure_ceilings()"
        ": 12 = (2 reads + 1 write) x 4 bytes.",
    ),
    mistakes={
        _ADD_BYTES_PER_ELEMENT: "That is a number of bytes; the question asks for elements.",
        1.5: "You counted the two reads but not the write of the result.",
        3.0: "You counted 4 bytes per element; the op reads two numbers and writes one.",
    },
    explain="An op smaller than this costs about the same whatever its size: that is overhead.",
)

_add(
    "03.overhead_fraction",
    "Doubling the batch makes a training step take only 10% longer. Model the step as a "
    "fixed overhead plus work proportional to the batch. What fraction of the original "
    "step's time was the fixed overhead? (a number between 0 and 1)",
    # T(b) = O + W and T(2b) = O + 2W = 1.1 T(b)  =>  W = 0.1 T(b)  =>  O / T(b) = 0.9
    lambda ctx: 1.0 - (1.1 - 1.0),
    unit="fraction of the step",
    hints=(
        "Write T(b) = O + W and T(2b) = O + 2W. Doubling the batch added exactly one more W.",
        "The extra 10% is one W, so W is 10% of T(b); the rest of T(b) is O.",
    ),
    mistakes={
        1.0 / 9.0: "That is the work's share; the question asks for the overhead's share.",
        1.0 / 0.9: "A fraction of the step cannot exceed 1; divide the overhead by the whole step.",
    },
    explain="Mostly overhead: a bigger batch is nearly free until the work catches up.",
)

_add(
    "03.weight_read_us",
    "At batch size 1, a Linear(4096, 4096) layer in fp32 must read its whole weight matrix "
    "once per call (ignore the bias and the activations). How long does that take at an "
    "A100's memory bandwidth (bl.spec)?",
    lambda ctx: 4096 * 4096 * _FP32_BYTES / _bw(ctx, "A100") * 1e6,
    unit="µs",
    hints=(
        "Bytes of the weight matrix = rows x columns x bytes per fp32 number. Time = bytes / bandwidth.",
        "4096 * 4096 * 4 / bl.spec('A100').mem_bandwidth_bytes_per_s, then convert seconds to µs.",
    ),
    mistakes={
        0.25: "You counted elements, not bytes: each fp32 weight is 4 bytes.",
        0.5: "That is bf16 (2 bytes per weight); the layer here is fp32.",
    },
    explain=(
        "Tens of µs: more than the launch overhead of an op. A small batch against big "
        "weights is bandwidth-bound, even though doubling the batch barely changes its time."
    ),
)

# --- chapter 04 (owner: chapter 04 author; add questions below with _add) ------

_MYSTERY_NUDGES = {
    "compute": "If it were compute-bound, FLOPs / matmul FLOP/s would come close to its measured "
    "time. Count its FLOPs: are there that many?",
    "memory": "If it were memory-bound, bytes moved / bandwidth would come close to its measured "
    "time. Count its bytes: are there that many?",
    "overhead": "If it were overhead-bound, (number of ops) x (overhead per op) would come close "
    "to its measured time. Are there that many ops, each that small?",
}


def _mystery(letter: str, regime: str, why: str) -> None:
    _add(
        f"04.mystery_{letter}",
        f"Read the code of workloads.mystery_{letter} (inspect.getsource) and its sizes. "
        "Which regime is it in?",
        lambda ctx: regime,
        choices=("compute", "memory", "overhead"),
        hints=(
            "Estimate three times: FLOPs / matmul FLOP/s, bytes / bandwidth, ops x overhead per op "
            "(bl.measure_ceilings() has all three rates). The largest wins.",
            "bl.count(fn, *args) gives FLOPs, bytes and the number of ops; divide by the rates.",
        ),
        mistakes={k: v for k, v in _MYSTERY_NUDGES.items() if k != regime},
        explain=why,
    )


_mystery(
    "a",
    "memory",
    "Five pointwise ops over tens of megabytes: about one FLOP per 8 bytes, far below the "
    "ridge point. The trucks set the pace; fusing the ops (torch.compile) is the remedy.",
)
_mystery(
    "b",
    "overhead",
    "Two tiny in-place ops per parameter, over a hundred parameters: each op moves a few KB "
    "and pays the full dispatch cost. torch._foreach_* or a fused optimizer is the remedy.",
)
_mystery(
    "c",
    "compute",
    "A matmul of thousands of tokens by a square weight does hundreds of FLOPs per byte: "
    "far above the ridge point. Only faster math helps: tensor cores, lower precision.",
)


def _block_counts(batch: int):
    """bl.count of workloads.transformer_block(batch) on the course device."""
    from brrrlib.counting import count
    from brrrlib.workloads import transformer_block

    block, args = transformer_block(batch=batch)
    return count(block, *args)


def _block_floors_s(ctx: _Context, batch: int) -> tuple[float, float]:
    """(compute floor, memory floor) in seconds of the block on this machine."""
    counts, c = _block_counts(batch), ctx.ceilings
    return counts.flops / c.matmul_flops_per_s, counts.bytes_moved / c.mem_bandwidth_bytes_per_s


def _block_lower_bound_us(ctx: _Context) -> float:
    from brrrlib import roofline

    counts, c = _block_counts(16), ctx.ceilings
    bound_s = roofline.lower_bound_s(
        counts.flops, counts.bytes_moved, c.matmul_flops_per_s, c.mem_bandwidth_bytes_per_s
    )
    return bound_s * 1e6


def _block_mistakes(ctx: _Context) -> dict[float, str]:
    compute_s, memory_s = _block_floors_s(ctx, 16)
    floor_s = max(compute_s, memory_s)
    out = {
        (compute_s + memory_s) / floor_s: "You added the two times; the roofline takes the larger."
    }
    smaller = min(compute_s, memory_s) / floor_s
    if smaller < 0.8:  # only a distinct slip when the two floors differ
        out[smaller] = "You took the smaller of the two times; the slower resource sets the floor."
    return out


_add(
    "04.block_lower_bound_us",
    "workloads.transformer_block(batch=16): from bl.count's FLOPs and bytes and this "
    "machine's ceilings (matmul FLOP/s, bandwidth), what is the roofline's lower bound on "
    "its time? No real run can beat it.",
    _block_lower_bound_us,
    unit="µs",
    rel_tol=0.15,
    hints=(
        "Two floors: FLOPs / matmul FLOP/s and bytes / bandwidth. The work cannot finish before "
        "the slower of the two resources is done.",
        "bl.roofline.lower_bound_s(counts.flops, counts.bytes_moved, c.matmul_flops_per_s, "
        "c.mem_bandwidth_bytes_per_s), in µs.",
    ),
    mistakes=_block_mistakes,
    explain="Compare it with the measured time: the gap is what overhead and imperfect kernels cost.",
)

_add(
    "04.bf16_gain_a100",
    "On an A100, by how many times is the dense bf16 tensor-core peak higher than the fp32 "
    "peak without tensor cores (bl.spec)? That is the most a compute-bound block can gain "
    "from switching its matmuls to bf16.",
    lambda ctx: _peak(ctx, "A100", "bf16") / _peak(ctx, "A100", "fp32"),
    unit="times (a ratio)",
    hints=(
        "Both numbers are in bl.spec('A100').peak_flops_per_s.",
        "peak_flops_per_s['bf16'] / peak_flops_per_s['fp32']",
    ),
    mistakes=lambda ctx: {
        _peak(ctx, "A100", "tf32") / _peak(ctx, "A100", "bf16"): (
            "That is the tf32 tensor-core peak over fp32; the question asks for bf16."
        ),
        2.0: "Halving the bytes gives 2x to a memory-bound op; a compute-bound one gains the "
        "peak ratio. Look at the spec table.",
    },
    explain="A big gain, but only for compute-bound matmuls; memory-bound ops gain 2x at most.",
)
