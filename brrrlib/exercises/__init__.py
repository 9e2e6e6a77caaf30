"""Exercises: ``bl.check`` an answer, ``bl.hint`` when stuck, ``bl.solution`` after the last hint."""

from __future__ import annotations

import bisect
import math
import numbers
import reprlib
from collections import namedtuple
from typing import Any

from brrrlib import _fmt
from brrrlib._checks import positive_int
from brrrlib.exercises import _decoding, _diagnosis, _distributed, _one_device  # noqa: F401
from brrrlib.exercises._bank import Question, Worked, load

__all__ = ["check", "hint", "questions", "solution"]

#: The questions, in course order; their text is plain data, in questions.json beside this file.
_BANK = load()
#: A number this close (as a ratio) to a power of 1000 times the right one is a units slip.
_UNIT_SLIP_REL_TOL = 0.25
#: Answers beyond these magnitudes are out of range for every question in the bank.
_LARGEST, _SMALLEST = 1e300, 1e-300
#: The prefix of a units slip, by the power of ten the answer is off: 1e3 too large is milli.
_PREFIXES = {-15: "peta", -12: "tera", -9: "giga", -6: "mega", -3: "kilo", 3: "milli", 6: "micro"}
#: How far off a wrong answer is, as a ratio: under 1.5x, 1.5x to 3x, ...
_BANDS = (1.5, 3, 10, 100)
_BAND_WORDS = ("under 1.5x", "1.5x to 3x", "3x to 10x", "10x to 100x", "over 100x")
#: Other names of an option: "memory-bound", "Memory bound" and "MEMORY_BOUND" are "memory".
_SYNONYMS = {"bandwidth": "memory", "memory bandwidth": "memory"}
_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist = 40, 40, 4


class QuestionList(tuple):
    """The questions of one chapter (or all), as :func:`questions` returns them."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The question ids, in course order."""
        return tuple(q.id for q in self)

    def __repr__(self) -> str:
        return "\n".join(map(repr, self))

    def _repr_html_(self) -> str:
        rows = [(q.id, q.prompt, q.unit or ", ".join(q.choices)) for q in self]
        header = ("id", "question", "unit / options")
        return _fmt.html_table(header, rows, align=" l", tags={0: "code"})


#: The checker's decision on one answer: right or not, the slip it diagnosed, its reply.
Verdict = namedtuple("Verdict", "right slip reply")


def _get(question_id: Any) -> Question:
    if not isinstance(question_id, str):
        kind = type(question_id).__name__
        raise TypeError(f"question_id must be a string such as '02.ridge', got {kind}")
    if question_id not in _BANK:
        valid = ", ".join(_BANK)
        raise ValueError(f"unknown question_id {_short.repr(question_id)}; valid ids: {valid}")
    return _BANK[question_id]


def questions(chapter: str | int | None = None) -> QuestionList:
    """List the exercises, for one chapter (``"02"`` or ``2``) or for all."""
    key = str(chapter).zfill(2)
    found = QuestionList(q for q in _BANK.values() if chapter is None or q.chapter == key)
    if not found:
        chapters = sorted({q.chapter for q in _BANK.values()})
        raise ValueError(f"chapter {chapter!r} has no questions; chapters with some: {chapters}")
    return found


def hint(question_id: str, level: int = 1) -> None:
    """Print a hint for a question; ``level=2`` (and up) gives a stronger one."""
    q = _get(question_id)
    n, last = min(positive_int("level", level), len(q.hints)), len(q.hints)
    more = f"bl.hint({q.id!r}, level={n + 1}) gives a stronger hint"
    if n == last:
        more = f"that is the last hint; bl.solution({q.id!r}) shows the worked answer"
    print(f"Hint {n}/{last} for {q.id}: {q.hints[n - 1]}\n  ({more})")


def check(question_id: str, answer: Any, *, ceilings: Any = None) -> bool:
    """Check an answer, print feedback, and return ``True`` when it is right."""
    verdict = _judge(question_id, answer, ceilings)
    print(verdict.reply)
    return verdict.right


def _judge(question_id: str, answer: Any, ceilings: Any = None) -> Verdict:
    """What :func:`check` decides and replies (nothing is solved for an answer it cannot read)."""
    q = _get(question_id)
    if answer is None or answer is ...:
        reply = f"{q.id}: fill in your answer first ({_expects(q)}), then run this cell again."
        return Verdict(False, "unanswered", reply)
    value, slip, message = (_read_choice if q.kind == "choice" else _read_number)(q, answer)
    if not slip:
        worked = q.solve(ceilings)
        if q.kind == "choice":
            slip, message = ("", q.explain) if value == worked.value else (value, q.nudges[value])
        else:
            slip, message = _judge_number(q, value, worked)
    if not slip:
        return Verdict(True, "", f"Correct! {message}".rstrip())
    return Verdict(False, slip, f"Not yet. {message}\n  (bl.hint({q.id!r}) helps)")


def _expects(q: Question) -> str:
    return f"one of: {', '.join(map(repr, q.choices))}" if q.choices else f"a number, in {q.unit}"


def _read_choice(q: Question, answer: Any) -> tuple[str, str, str]:
    """The option an answer names (case, ``-bound`` and synonyms aside), the slip, and why."""
    if not isinstance(answer, str):
        return "", "not_an_option", f"{q.id} expects {_expects(q)}, not {_short.repr(answer)}."
    words = answer.lower().replace("_", " ").replace("-", " ").split()
    option = " ".join(words[:-1] if words[-1:] == ["bound"] else words)
    option = _SYNONYMS.get(option, option)
    if option not in q.choices:
        return option, "not_an_option", f"{_short.repr(answer)} is not {_expects(q)}."
    return option, "", ""


def _read_number(q: Question, answer: Any) -> tuple[float, str, str]:
    """The answer as a float, the slip that stops it being checked (``""``: none), and why."""
    if hasattr(answer, "item") and getattr(answer, "ndim", None) == 0:
        try:
            answer = answer.item()  # a NumPy scalar or 0-d tensor
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
            why = f"{_short.repr(answer)} has no value to read ({type(exc).__name__})."
            return math.nan, "no_value", why
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        kind = type(answer).__name__
        return math.nan, "not_a_number", f"{q.id} expects {_expects(q)}, not {kind}: no quotes."
    try:
        value = float(answer)
    except OverflowError:  # an int or Fraction beyond any float
        value = math.inf
    if math.isnan(value):
        return value, "not_a_number", f"{value} is not a number; {q.id} expects {_expects(q)}."
    if value and not _SMALLEST <= abs(value) <= _LARGEST:
        return value, "out_of_range", f"{_short.repr(answer)} is out of range for {q.id}."
    return value, "", ""


def _close(log_ratio: float, ratio: float, rel_tol: float) -> bool:
    """True when ``exp(log_ratio)`` is within ``rel_tol`` of ``ratio``."""
    return ratio > 0 and abs(log_ratio - math.log(ratio)) <= math.log1p(rel_tol)


def _judge_number(q: Question, value: float, worked: Worked) -> tuple[str, str]:
    """The slip (``""`` when right) and what to say about it."""
    if value <= 0:  # every quantity in the bank is positive
        return ("zero" if value == 0 else "sign"), "The quantity asked for is positive."
    expected = float(worked.value)
    # Compare logarithms: a ratio of two extreme numbers may not fit a float, its log does.
    lr = math.log(value) - math.log(expected)
    if _close(lr, 1.0, q.rel_tol):  # right: the computed value shows how close the rounding was
        return "", f"(computed: {_answer_text(q, expected)}) {q.explain}"
    for key, nudge in q.nudges.items():  # the solver's ratio for a named slip, else the key's
        if _close(lr, worked.slips.get(key, float(key) if key[0].isdigit() else 0), q.rel_tol):
            return key, nudge
    power = 3 * round(lr / math.log(1000))
    if power and abs(lr - power * math.log(10)) <= math.log1p(_UNIT_SLIP_REL_TOL):
        prefix = _PREFIXES.get(power, f"1e{-power}")
        return "units", (
            f"Your number is {'too large' if power > 0 else 'too small'} by about 1e{abs(power)}: "
            f"did you answer in {prefix}-units? The answer is wanted in plain {q.unit}."
        )
    if _close(-math.log(value), expected, q.rel_tol) and abs(lr) > math.log(10):
        return "upside_down", "Your ratio looks upside down: divide the other way round."
    band = _BAND_WORDS[bisect.bisect_right(_BANDS, math.exp(min(abs(lr), 700)))]
    direction = "too_high" if lr > 0 else "too_low"
    return direction, f"Your answer is {direction.replace('_', ' ')}, by {band}."


def _answer_text(q: Question, value: Any) -> str:
    """The answer as a learner would type it: a plain number in the unit, or the option."""
    if q.kind == "choice":
        return repr(value)
    return f"{value if isinstance(value, int) else f'{value:.4g}'} {q.unit}"


def solution(question_id: str, *, ceilings: Any = None) -> None:
    """Print the worked answer to a question: its method, the numbers it uses, the answer."""
    q = _get(question_id)
    worked = q.solve(ceilings)
    here = "" if worked.machine is None else f" (on this machine, {worked.machine})"
    print(f"Worked answer to {q.id}: {q.prompt}\n  method: {q.hints[-1]}")
    for i, step in enumerate(worked.steps, 1):
        print(f"  {i}. {step}")
    print(f"  answer: {_answer_text(q, worked.value)}{here}\n  {q.explain}")
