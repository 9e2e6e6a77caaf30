"""Exercises: ``bl.check`` an answer, ``bl.hint`` when stuck, ``bl.solution`` after the last hint."""

from __future__ import annotations

import math
import numbers
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brrrlib import _fmt
from brrrlib.exercises import (
    _compute,
    _decoding,
    _diagnosis,
    _distributed,
    _memory,
    _overhead,
    _roofline,
)
from brrrlib.exercises._bank import Context, Question, Worked, parse_questions

__all__ = ["check", "hint", "questions", "solution"]

#: The modules whose solvers the bank's questions call, one per topic.
_TOPICS = (_roofline, _compute, _memory, _overhead, _diagnosis, _distributed, _decoding)
#: The questions, in course order; their text is plain data, in questions.json beside this file.
_BANK = parse_questions((Path(__file__).parent / "questions.json").read_text(encoding="utf-8"))

#: A numeric answer this close (as a ratio, in log space) to a power of 1000 times
#: the right value is reported as a units slip rather than as "too high".
_UNIT_SLIP_REL_TOL = 0.25
#: Answers beyond these magnitudes are out of range for every question in the bank.
_LARGEST, _SMALLEST = 1e300, 1e-300
#: A choice longer than this is not one of the options (and is not echoed whole).
_LONGEST_CHOICE = 100

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

#: Other names of an option: "memory-bound", "Memory bound" and "MEMORY_BOUND" are "memory".
_CHOICE_SYNONYMS = {"bandwidth": "memory", "memory bandwidth": "memory"}

_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist = 40, 40, 4


@dataclass(frozen=True)
class QuestionList:
    """The questions of one chapter (or all), as returned by :func:`questions`."""

    items: tuple[Question, ...]

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def ids(self) -> tuple[str, ...]:
        """The question ids, in course order."""
        return tuple(q.id for q in self.items)

    def __repr__(self) -> str:
        return "\n".join(repr(q) for q in self.items) or "(no questions)"

    def _repr_html_(self) -> str:
        rows = [(q.id, q.prompt, q.unit or ", ".join(q.choices)) for q in self.items]
        header = ("id", "question", "unit / options")
        return _fmt.html_table(header, rows, align=" l", tags={0: "code"})


@dataclass(frozen=True)
class Verdict:
    """The checker's decision on one answer: right or not, the slip it diagnosed, its reply."""

    right: bool
    slip: str
    reply: str


def _get(question_id: Any) -> Question:
    if not isinstance(question_id, str):
        raise TypeError(
            f"question_id must be a string such as '02.ridge', got {type(question_id).__name__}"
        )
    try:
        return _BANK[question_id]
    except KeyError:
        raise ValueError(
            f"unknown question_id {_short.repr(question_id)}; valid ids are: {', '.join(_BANK)}. "
            "bl.questions() lists them with their prompts."
        ) from None


def _context(ceilings: Any) -> Context:
    needed = ("matmul_flops_per_s", "mem_bandwidth_bytes_per_s", "op_overhead_s")
    if ceilings is not None and not all(hasattr(ceilings, a) for a in needed):
        raise TypeError(
            "ceilings must be what bl.measure_ceilings() returns (or None for this machine's), "
            f"got {type(ceilings).__name__}"
        )
    return Context(ceilings)


def questions(chapter: str | int | None = None) -> QuestionList:
    """List the exercises, for one chapter (``"02"`` or ``2``) or for all."""
    if chapter is None:
        return QuestionList(tuple(_BANK.values()))
    if isinstance(chapter, bool) or not isinstance(chapter, (str, int)):
        raise TypeError(f"chapter must be like '02' or 2, got {type(chapter).__name__}")
    key = f"{int(chapter):02d}" if isinstance(chapter, int) else chapter.zfill(2)
    found = tuple(q for q in _BANK.values() if q.chapter == key)
    if not found:
        chapters = sorted({q.chapter for q in _BANK.values()})
        raise ValueError(
            f"chapter {chapter!r} has no questions; chapters with questions: {chapters}"
        )
    return QuestionList(found)


def hint(question_id: str, level: int = 1) -> None:
    """Print a hint for a question; ``level=2`` (and up) gives a stronger one."""
    q = _get(question_id)
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise ValueError(f"level must be a positive integer (1 = gentlest), got {level!r}")
    n = len(q.hints)
    text = q.hints[min(level, n) - 1]
    more = (
        f"  (bl.hint({question_id!r}, level={level + 1}) gives a stronger hint)"
        if level < n
        else f"  (that is the last hint; bl.solution({question_id!r}) shows the worked answer)"
    )
    print(f"Hint {min(level, n)}/{n} for {question_id}: {text}\n{more}")


def check(question_id: str, answer: Any, *, ceilings: Any = None) -> bool:
    """Check an answer, print feedback, and return ``True`` when it is right."""
    verdict = _judge(question_id, answer, ceilings)
    print(verdict.reply)
    return verdict.right


def _judge(question_id: str, answer: Any, ceilings: Any = None) -> Verdict:
    """What :func:`check` decides and replies (nothing is measured for an answer it cannot read)."""
    q, ctx = _get(question_id), _context(ceilings)
    if answer is None or answer is ...:
        reply = f"{q.id}: fill in your answer first ({_expects(q)}), then run this cell again."
        return Verdict(False, "unanswered", reply)
    if q.kind == "number":
        value, slip, why = _read_number(q, answer)
    elif isinstance(answer, str):
        slip = why = ""
    else:
        slip = "not_an_option"
        why = f"The answer to {q.id} is {_expects(q)} (a string), not {_short.repr(answer)}."
    if slip:  # an answer that cannot be checked: say why (nothing is solved or measured)
        return Verdict(False, slip, f"Not yet. {why}")
    worked = q.solve(ctx)
    if q.kind == "choice":
        slip, message = _judge_choice(q, answer, worked.value)
    else:
        slip, message = _judge_number(q, value, worked)
    if not slip:
        return Verdict(True, "", f"Correct! {message}".rstrip())
    return Verdict(False, slip, f"Not yet. {message}\n  (bl.hint({q.id!r}) helps)")


def _expects(q: Question) -> str:
    if q.kind == "choice":
        return "one of: " + ", ".join(repr(c) for c in q.choices)
    return f"a number, in {q.unit}" if q.unit else "a number"


def _read_number(q: Question, answer: Any) -> tuple[float, str, str]:
    """The answer as a float, and ``("", "")`` or the slip and a sentence saying why it cannot be
    checked as one.
    """
    if hasattr(answer, "item") and callable(answer.item) and getattr(answer, "ndim", None) == 0:
        try:
            answer = answer.item()  # NumPy scalar or 0-d tensor
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
            why = f"{_short.repr(answer)} has no value to read ({type(exc).__name__})."
            return math.nan, "no_value", why
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        why = (
            f"The answer to {q.id} must be {_expects(q)}, not {type(answer).__name__} "
            f"{_short.repr(answer)}: write the number without quotes."
        )
        return math.nan, "not_a_number", why
    out_of_range = (
        f"{_short.repr(answer)} is out of range for {q.id}: it expects {_expects(q)}, between "
        f"{_SMALLEST:g} and {_LARGEST:g} in size."
    )
    try:
        value = float(answer)
    except OverflowError:  # an int or Fraction beyond any float
        return math.nan, "out_of_range", out_of_range
    if math.isnan(value):
        return value, "not_a_number", f"{value} is not a number; the answer is {_expects(q)}."
    if not abs(value) <= _LARGEST or 0 < abs(value) < _SMALLEST:
        return value, "out_of_range", out_of_range
    return value, "", ""


def _close(log_ratio: float, target: float, rel_tol: float) -> bool:
    """True when ``exp(log_ratio)`` is within ``rel_tol`` of ``target`` (a ratio)."""
    return target > 0 and abs(log_ratio - math.log(target)) <= math.log1p(rel_tol)


def _slip_ratios(q: Question, worked: Worked) -> dict[str, float]:
    """Each numeric nudge's ratio to the right answer: the key itself, or the solver's for a named slip
    (one the solver does not report here, such as floors that are alike, is left out).
    """
    ratios = {}
    for key in q.nudges:
        if key in worked.slips:
            ratios[key] = float(worked.slips[key])
        else:
            try:
                ratios[key] = float(key)  # a ratio written in the bank
            except ValueError:
                continue
    return ratios


def _judge_number(q: Question, value: float, worked: Worked) -> tuple[str, str]:
    """The slip (``""`` when right) and what to say about it."""
    expected = float(worked.value)
    if value == 0 or expected == 0:
        if value == expected:
            return "", q.explain
        return "zero", "Zero is not right here: the quantity asked for is not zero."
    if (value < 0) != (expected < 0):
        return "sign", "The sign is wrong: this quantity is positive. Check what you subtracted."
    # Compare logarithms: a ratio of two extreme numbers may not fit a float, its log does.
    lr = math.log(abs(value)) - math.log(abs(expected))
    if _close(lr, 1.0, q.rel_tol):
        # right, so the computed value may be shown: it tells how close the rounding was
        return "", f"(computed: {_answer_text(q, expected)}) {q.explain}"
    for key, ratio in _slip_ratios(q, worked).items():
        if _close(lr, ratio, q.rel_tol):
            return key, q.nudges[key]
    exponent = round(lr / math.log(10) / 3) * 3
    if exponent != 0 and _close(lr, 10.0**exponent, _UNIT_SLIP_REL_TOL):
        return "units", _unit_slip(q, exponent)
    flipped = math.log(abs(value)) + math.log(abs(expected))
    if _close(flipped, 1.0, q.rel_tol) and abs(lr) > 0.5 * math.log(10):
        return "upside_down", "Your ratio looks upside down: divide the other way round."
    direction = "too_high" if lr > 0 else "too_low"
    band = next(words for upper, words in _BANDS if abs(lr) < math.log(upper))
    return direction, f"Your answer is {direction.replace('_', ' ')} {band}."


def _unit_slip(q: Question, exponent: int) -> str:
    unit = q.unit or "the unit asked for"
    if exponent < 0:
        prefix = _BIG_PREFIXES.get(-exponent, f"1e{-exponent}")
        guess = f"did you answer in {prefix}-units (e.g. 1.5 for 1.5e12)?"
    else:
        prefix = _SMALL_PREFIXES.get(exponent, f"1e-{exponent}")
        guess = f"did you answer in {prefix}-units (e.g. milliseconds instead of seconds)?"
    direction = "too large" if exponent > 0 else "too small"
    return (
        f"Your number is {direction} by a factor of about 1e{abs(exponent)}: {guess} "
        f"The answer is wanted in plain {unit}."
    )


def _judge_choice(q: Question, answer: str, expected: str) -> tuple[str, str]:
    """The slip (``""`` when right) and what to say about it."""
    a = answer
    if len(answer) <= _LONGEST_CHOICE:
        words = answer.lower().replace("_", " ").replace("-", " ").split()
        a = " ".join(words[:-1] if words[-1:] == ["bound"] else words)
        a = _CHOICE_SYNONYMS.get(a, a)
    if a not in q.choices:
        options = ", ".join(map(repr, q.choices))
        return "not_an_option", f"{_short.repr(answer)} is not one of the options: {options}."
    if a == expected:
        return "", q.explain
    return a, q.nudges.get(a, f"{a!r} is not it. Think about which resource runs out first.")


def _answer_text(q: Question, value: Any) -> str:
    """The expected answer as the learner would type it: a plain number in the unit, or the option."""
    if q.kind == "choice":
        return repr(value)
    number = str(value) if isinstance(value, int) else f"{value:.4g}"  # an int exactly
    return f"{number} {q.unit}".rstrip()


def solution(question_id: str, *, ceilings: Any = None) -> None:
    """Print the worked answer to a question: each step with its numbers, then the answer."""
    q, ctx = _get(question_id), _context(ceilings)
    worked = q.solve(ctx)
    lines = [f"Worked answer to {q.id}: {q.prompt}"]
    lines += [f"  {i}. {step}" for i, step in enumerate(worked.steps, 1)]
    here = ""
    if ctx.used_ceilings:
        here = f" (on this machine, {getattr(ctx.ceilings, 'device_name', '')})"
    lines.append(f"  answer: {_answer_text(q, worked.value)}{here}")
    if q.explain:
        lines.append(f"  {q.explain}")
    print("\n".join(lines))
