"""The checker: what an answer is (a number in the unit, or an option), the slip it makes."""

from __future__ import annotations

import bisect
import math
import numbers
import reprlib
from collections import namedtuple
from typing import Any  # q: a _bank.Question, worked: its Worked (the bank imports this module)

__all__ = ["Verdict", "answer_text", "expects", "judge", "short"]

#: A number this close (as a ratio) to a power of 1000 times the right one is a units slip.
_UNIT_SLIP_REL_TOL = 0.25
#: Answers beyond these magnitudes are out of range for every question in the bank.
_LARGEST, _SMALLEST = 1e300, 1e-300
#: The prefix of a units slip, by the power of ten the answer is off: 1e3 too large is milli.
_PREFIXES = {-15: "peta", -12: "tera", -9: "giga", -6: "mega", -3: "kilo", 3: "milli", 6: "micro"}
#: How far off a wrong answer is, as a ratio: under 1.5x, 1.5x to 3x, ...
_BANDS = (1.5, 3, 10, 100)
_BAND_WORDS = ("under 1.5x", "1.5x to 3x", "3x to 10x", "10x to 100x", "over 100x")
#: Other names of an option's words ("memory bandwidth" is "memory"); "bound" is dropped.
_SYNONYMS = {"bandwidth": "memory", "bound": ""}
short = reprlib.Repr()
short.maxstring, short.maxother, short.maxlist = 40, 40, 4

#: The checker's decision on one answer: right or not, the slip it diagnosed, its reply.
Verdict = namedtuple("Verdict", ["right", "slip", "reply"])


def judge(q: Any, answer: Any, ceilings: Any = None) -> Verdict:
    """What ``bl.check`` decides and replies (nothing is solved for an answer it cannot read)."""
    if answer is None or answer is ...:
        return Verdict(False, "unanswered", _unreadable(q, answer))
    value, slip = (_read_choice if q.kind == "choice" else _read_number)(q, answer)
    if slip == "out_of_range":
        message = f"{short.repr(answer)} is out of range for {q.id}."
    elif slip:
        message = _unreadable(q, answer)
    elif q.kind == "choice":
        worked = q.solve(ceilings)
        slip, message = ("", q.explain) if value == worked.value else (value, q.nudges[value])
    else:
        slip, message = _judge_number(q, value, q.solve(ceilings))
    if not slip:
        return Verdict(True, "", f"Correct! {message}".rstrip())
    return Verdict(False, slip, f"Not yet. {message}\n  (bl.hint({q.id!r}) helps)")


def expects(q: Any) -> str:
    """What an answer to ``q`` is: one of its options, or a number in its unit."""
    options = ", ".join(map(repr, q.choices))
    return f"one of: {options}" if q.choices else f"a number > 0, in {q.unit}"


def _unreadable(q: Any, answer: Any) -> str:
    return f"{q.id} expects {expects(q)}, not {short.repr(answer)}."


def _read_choice(q: Any, answer: Any) -> tuple[str, str]:
    """The option an answer names (case, ``-bound`` and synonyms aside), and the slip."""
    if not isinstance(answer, str):
        return "", "not_an_option"
    words = answer.lower().replace("_", " ").replace("-", " ").split()
    option = " ".join(filter(None, dict.fromkeys(_SYNONYMS.get(w, w) for w in words)))
    return option, "" if option in q.choices else "not_an_option"


def _read_number(q: Any, answer: Any) -> tuple[float, str]:
    """The answer as a float, and the slip that stops it being checked (``""``: none)."""
    if hasattr(answer, "item") and getattr(answer, "ndim", None) == 0:
        try:
            answer = answer.item()  # a NumPy scalar or 0-d tensor
        except (RuntimeError, ValueError, TypeError, NotImplementedError):
            return math.nan, "no_value"  # a tensor on the meta device
    real = isinstance(answer, numbers.Real) and not isinstance(answer, bool)
    try:
        value = float(answer) if real else math.nan
    except OverflowError:  # an int or Fraction beyond any float
        value = math.inf
    if math.isnan(value):
        return value, "not_a_number"
    if value and not _SMALLEST <= abs(value) <= _LARGEST:
        return value, "out_of_range"
    return value, ""


def _close(log_ratio: float, ratio: float, rel_tol: float) -> bool:
    """True when ``exp(log_ratio)`` is within ``rel_tol`` of ``ratio``."""
    return ratio > 0 and abs(log_ratio - math.log(ratio)) <= math.log1p(rel_tol)


def _judge_number(q: Any, value: float, worked: Any) -> tuple[str, str]:
    """The slip (``""`` when right) and what to say about it."""
    if value <= 0:  # every quantity in the bank is positive
        return ("zero" if value == 0 else "sign"), _unreadable(q, value)
    expected = float(worked.value)
    # Compare logarithms: a ratio of two extreme numbers may not fit a float, its log does.
    lr = math.log(value) - math.log(expected)
    if _close(lr, 1.0, q.rel_tol):  # right: the computed value shows how close the rounding was
        return "", f"(computed: {answer_text(q, expected)}) {q.explain}"
    for key, nudge in q.nudges.items():  # the solver's ratio for a named slip, else the key's
        if _close(lr, worked.slips.get(key, float(key) if key[0].isdigit() else 0), q.rel_tol):
            return key, nudge
    power = 3 * round(lr / math.log(1000))
    if power and abs(lr - power * math.log(10)) <= math.log1p(_UNIT_SLIP_REL_TOL):
        prefix = _PREFIXES.get(power, f"1e{-power}")
        return "units", f"Off by 1e{abs(power)}: answer in plain {q.unit}, not {prefix}-units."
    if _close(-math.log(value), expected, q.rel_tol) and abs(lr) > math.log(10):
        return "upside_down", "Your ratio looks upside down: divide the other way round."
    band = _BAND_WORDS[bisect.bisect_right(_BANDS, math.exp(min(abs(lr), 700)))]
    direction = "too_high" if lr > 0 else "too_low"
    return direction, f"Your answer is {direction.replace('_', ' ')}, by {band}."


def answer_text(q: Any, value: Any) -> str:
    """The answer as a learner would type it: a plain number in the unit, or the option."""
    if q.kind == "choice":
        return repr(value)
    return f"{value if isinstance(value, int) else f'{value:.4g}'} {q.unit}"
