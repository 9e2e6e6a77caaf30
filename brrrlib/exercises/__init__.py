"""Exercises: ``bl.check`` an answer, ``bl.hint`` when stuck, ``bl.solution`` after the last hint.

Every chapter asks a few questions. You write your answer into a variable and
ask the checker::

    answer = 12.5                        # your number, in the unit the prompt names
    bl.check("00.ridge_a100", answer)    # prints feedback, returns True/False
    bl.hint("00.ridge_a100")             # a first hint; level=2 gives a stronger one
    bl.solution("00.ridge_a100")         # the worked answer, step by step

How the checker works (so you can trust it):

* The expected answer is **computed when you ask**, never stored: from the
  spec-sheet table (``bl.spec``) or from this machine's measured ceilings
  (``bl.measure_ceilings``), by the question's solver in the question bank
  (:mod:`brrrlib.exercises._bank`, one module per topic). Change the table or the machine and the answer
  follows; :func:`solution` shows the same computation, step by step.
* A numeric answer is right when it is within the question's relative
  tolerance (10 % unless the prompt says otherwise): performance numbers are
  estimates, not digits to copy. Answers are compared as logarithms, so any
  number, however large or small, gets a reply, never an exception.
* A wrong answer gets a nudge that diagnoses the usual slips: a units prefix
  (off by 1e3, 1e6, 1e9, 1e12), a ratio turned upside down, the question's own
  common mistakes (forgetting that an op also *writes* its output, counting a
  multiply-add as one FLOP, bytes vs elements), or else how far off you are,
  as a band ("between 1.5x and 3x too high"). The expected value itself is
  never printed before you get it right (or ask for the solution).

Instructors get every worked answer in one table: :func:`answer_key`.
"""

from __future__ import annotations

import html
import math
import numbers
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from brrrlib.exercises import (
    _compute,
    _decoding,
    _diagnosis,
    _distributed,
    _memory,
    _overhead,
    _roofline,
)
from brrrlib.exercises._bank import Context, Exercise, Question, Worked, index

__all__ = ["check", "hint", "questions", "solution"]

_TOPICS = (_roofline, _compute, _memory, _overhead, _diagnosis, _distributed, _decoding)
_BANK: dict[str, Exercise] = index(tuple(ex for topic in _TOPICS for ex in topic.EXERCISES))

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

    def __getitem__(self, i: int) -> Question:
        return self.items[i]

    @property
    def ids(self) -> tuple[str, ...]:
        """The question ids, in course order."""
        return tuple(q.id for q in self.items)

    def __repr__(self) -> str:
        return "\n".join(repr(q) for q in self.items) or "(no questions)"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(q.id)}</code></td><td style='text-align:left'>"
            f"{html.escape(q.prompt)}</td><td>{html.escape(q.unit or ', '.join(q.choices))}"
            "</td></tr>"
            for q in self.items
        )
        return f"<table><tr><th>id</th><th>question</th><th>unit / options</th></tr>{rows}</table>"


def _get(question_id: Any) -> Exercise:
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


def _chapter_key(chapter: Any) -> str:
    if isinstance(chapter, bool) or not isinstance(chapter, (str, int)):
        raise TypeError(f"chapter must be like '02' or 2, got {type(chapter).__name__}")
    key = f"{int(chapter):02d}" if isinstance(chapter, int) else chapter.zfill(2)
    if not any(ex.question.chapter == key for ex in _BANK.values()):
        chapters = sorted({ex.question.chapter for ex in _BANK.values()})
        raise ValueError(
            f"chapter {chapter!r} has no questions; chapters with questions: {chapters}"
        )
    return key


def questions(chapter: str | int | None = None) -> QuestionList:
    """List the exercises, for one chapter (``"02"`` or ``2``) or for all.

    Each entry shows the id to pass to :func:`check`, the prompt and the unit
    (or the options) the answer is expected in.
    """
    key = None if chapter is None else _chapter_key(chapter)
    return QuestionList(
        tuple(ex.question for ex in _BANK.values() if key in (None, ex.question.chapter))
    )


def hint(question_id: str, level: int = 1) -> None:
    """Print a hint for a question; ``level=2`` (and up) gives a stronger one.

    Hints point at the method (which spec row, which formula), never at the
    number itself. After the last one, :func:`solution` shows the working.
    """
    q = _get(question_id).question
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
    """Check an answer, print feedback, and return ``True`` when it is right.

    ``answer`` is a number in the unit the prompt names (plain Python number,
    NumPy scalar or 0-d tensor) or, for a multiple-choice question, one of its
    options as a string. ``None`` means "not answered yet" and only prints a
    reminder. Whatever the answer (text for a number, 1e-324, 10**400, nan,
    a megabyte of text), the checker replies in words and never raises.
    ``ceilings`` replaces this machine's measured ceilings (tests use it; by
    default they come from ``bl.measure_ceilings()``, cached on disk).
    """
    ex = _get(question_id)
    q, ctx = ex.question, _context(ceilings)
    if answer is None or answer is ...:
        print(
            f"{question_id}: fill in your answer first ({_expects(q)}), then run this cell again."
        )
        return False
    if q.kind == "number":
        value, problem = _read_number(q, answer)  # before anything is measured
        if problem:
            print(f"Not yet. {problem}")
            return False
    elif not isinstance(answer, str):
        print(
            f"Not yet. The answer to {q.id} is {_expects(q)} (a string), not {_short.repr(answer)}."
        )
        return False
    expected = ex.solve(ctx).value
    if q.kind == "choice":
        ok, message = _judge_choice(q, answer, expected, ex.mistakes_for(ctx))
    else:
        ok, message = _judge_number(q, value, float(expected), ex.mistakes_for(ctx))
    print(f"{'Correct!' if ok else 'Not yet.'} {message}".rstrip())
    if not ok:
        print(f"  (bl.hint({question_id!r}) helps)")
    return ok


def _expects(q: Question) -> str:
    if q.kind == "choice":
        return "one of: " + ", ".join(repr(c) for c in q.choices)
    return f"a number, in {q.unit}" if q.unit else "a number"


def _read_number(q: Question, answer: Any) -> tuple[float, str]:
    """The answer as a float, or a sentence saying why it cannot be checked as one."""
    if hasattr(answer, "item") and callable(answer.item) and getattr(answer, "ndim", None) == 0:
        try:
            answer = answer.item()  # NumPy scalar or 0-d tensor
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as exc:
            return math.nan, f"{_short.repr(answer)} has no value to read ({type(exc).__name__})."
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
        return math.nan, (
            f"The answer to {q.id} must be {_expects(q)}, not {type(answer).__name__} "
            f"{_short.repr(answer)}: write the number without quotes."
        )
    out_of_range = (
        f"{_short.repr(answer)} is out of range for {q.id}: it expects {_expects(q)}, between "
        f"{_SMALLEST:g} and {_LARGEST:g} in size."
    )
    try:
        value = float(answer)
    except OverflowError:  # an int or Fraction beyond any float
        return math.nan, out_of_range
    if math.isnan(value):
        return value, f"{value} is not a number; the answer is {_expects(q)}."
    if not abs(value) <= _LARGEST or 0 < abs(value) < _SMALLEST:
        return value, out_of_range
    return value, ""


def _close(log_ratio: float, target: float, rel_tol: float) -> bool:
    """True when ``exp(log_ratio)`` is within ``rel_tol`` of ``target`` (a ratio)."""
    return target > 0 and abs(log_ratio - math.log(target)) <= math.log1p(rel_tol)


def _judge_number(
    q: Question, value: float, expected: float, mistakes: Mapping[Any, str]
) -> tuple[bool, str]:
    if value == 0 or expected == 0:
        if value == expected:
            return True, q.explain
        return False, "Zero is not right here: the quantity asked for is not zero."
    if (value < 0) != (expected < 0):
        return False, "The sign is wrong: this quantity is positive. Check what you subtracted."
    # Compare logarithms: a ratio of two extreme numbers may not fit a float, its log does.
    lr = math.log(abs(value)) - math.log(abs(expected))
    if _close(lr, 1.0, q.rel_tol):
        # right, so the computed value may be shown: it tells how close the rounding was
        return True, f"(computed: {_answer_text(q, expected)}) {q.explain}"
    for factor, nudge in mistakes.items():
        if _close(lr, float(factor), q.rel_tol):
            return False, nudge
    exponent = round(lr / math.log(10) / 3) * 3
    if exponent != 0 and _close(lr, 10.0**exponent, _UNIT_SLIP_REL_TOL):
        return False, _unit_slip(q, exponent)
    flipped = math.log(abs(value)) + math.log(abs(expected))
    if _close(flipped, 1.0, q.rel_tol) and abs(lr) > 0.5 * math.log(10):
        return False, "Your ratio looks upside down: divide the other way round."
    direction = "too high" if lr > 0 else "too low"
    band = next(words for upper, words in _BANDS if abs(lr) < math.log(upper))
    return False, f"Your answer is {direction} {band}."


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


def _normalize_choice(answer: str) -> str:
    a = " ".join(answer.strip().lower().replace("_", " ").split())
    return _CHOICE_SYNONYMS.get(a, a)


def _judge_choice(
    q: Question, answer: str, expected: str, mistakes: Mapping[Any, str]
) -> tuple[bool, str]:
    a = _normalize_choice(answer) if len(answer) <= _LONGEST_CHOICE else answer
    if a not in q.choices:
        options = ", ".join(map(repr, q.choices))
        return False, f"{_short.repr(answer)} is not one of the options: {options}."
    if a == expected:
        return True, q.explain
    return False, mistakes.get(a, f"{a!r} is not it. Think about which resource runs out first.")


# --------------------------------------------------------------------------- worked answers


def _answer_text(q: Question, value: Any) -> str:
    """The expected answer as the learner would type it: a plain number in the unit, or the option."""
    if q.kind == "choice":
        return repr(value)
    number = str(value) if isinstance(value, int) else f"{value:.4g}"  # an int exactly
    return f"{number} {q.unit}".rstrip()


def _solve(ex: Exercise, ctx: Context) -> Worked:
    worked = ex.solve(ctx)
    if not worked.steps:
        raise ValueError(f"question {ex.question.id!r}: its solver gives no working")
    return worked


def solution(question_id: str, *, ceilings: Any = None) -> None:
    """Print the worked answer to a question: each step with its numbers, then the answer.

    For when the last hint was not enough. The steps are the solver's own
    computation (the same one :func:`check` compares against), from
    ``bl.spec`` and this machine's ceilings; a machine-dependent answer is
    this machine's. Try the question first: the working teaches more after
    an attempt.
    """
    ex = _get(question_id)
    ctx = _context(ceilings)
    worked = _solve(ex, ctx)
    q = ex.question
    lines = [f"Worked answer to {q.id}: {q.prompt}"]
    lines += [f"  {i}. {step}" for i, step in enumerate(worked.steps, 1)]
    name = getattr(ctx.known_ceilings, "device_name", "")
    here = f" (on this machine, {name})" if ctx.used_ceilings else ""
    lines.append(f"  answer: {_answer_text(q, worked.value)}{here}")
    if q.explain:
        lines.append(f"  {q.explain}")
    print("\n".join(lines))


@dataclass(frozen=True)
class AnswerKey:
    """Every question with its answer and working: the instructor's key (:func:`answer_key`).

    ``entries`` holds ``(question, worked, from_this_machine)`` per question.
    Answers computed from measured ceilings are this machine's (``machine``
    names it); a learner's machine gives its own. Renders as text, as HTML
    in a notebook, and as Markdown (:meth:`to_markdown`) for a handout.
    """

    entries: tuple[tuple[Question, Worked, bool], ...]
    machine: str = ""

    def _rows(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        return [
            (q.id, q.prompt, _answer_text(q, w.value) + " *" * here, w.steps)
            for q, w, here in self.entries
        ]

    def _note(self) -> str:
        if not any(here for _, _, here in self.entries):
            return ""
        return f"* measured on this machine ({self.machine}); each learner's machine gives its own"

    def __repr__(self) -> str:
        blocks = [
            f"{i}  {prompt}\n   answer: {answer}\n" + "\n".join(f"   - {s}" for s in steps)
            for i, prompt, answer, steps in self._rows()
        ]
        return "\n\n".join(blocks + [self._note()] * bool(self._note()))

    def to_markdown(self) -> str:
        """A Markdown table (id, question, answer, working) for a handout or a wiki."""

        def cell(text: str) -> str:
            return text.replace("|", "\\|").replace("\n", " ")

        lines = ["| id | question | answer | working |", "|---|---|---|---|"]
        lines += [
            f"| `{i}` | {cell(p)} | {cell(a)} | {'<br>'.join(cell(s) for s in steps)} |"
            for i, p, a, steps in self._rows()
        ]
        return "\n".join(lines + ["", self._note()] * bool(self._note())) + "\n"

    def _repr_html_(self) -> str:
        e = html.escape
        body = "".join(
            f"<tr><td><code>{e(i)}</code></td><td style='text-align:left'>{e(p)}</td>"
            f"<td style='text-align:left'>{e(a)}</td><td style='text-align:left'><ol>"
            + "".join(f"<li>{e(s)}</li>" for s in steps)
            + "</ol></td></tr>"
            for i, p, a, steps in self._rows()
        )
        note = f"<caption style='caption-side:bottom'><small>{e(self._note())}</small></caption>"
        return (
            f"<table>{note * bool(self._note())}<tr><th>id</th><th>question</th><th>answer</th>"
            f"<th>working</th></tr>{body}</table>"
        )


def answer_key(chapter: str | int | None = None, *, ceilings: Any = None) -> AnswerKey:
    """The answer key for one chapter or the whole course, made from the question bank.

    Each answer is computed as the checker computes it, with its working.
    Answers that depend on the machine use ``ceilings`` (default: this
    machine's, ``bl.measure_ceilings()``, measured once if not cached) and are
    marked; the rest come from the spec table and hold for every learner.
    """
    key = None if chapter is None else _chapter_key(chapter)
    ctx = _context(ceilings)
    entries = []
    for ex in _BANK.values():
        if key not in (None, ex.question.chapter):
            continue
        ctx = Context(ctx.known_ceilings)  # measured at most once, reused by later questions
        entries.append((ex.question, _solve(ex, ctx), ctx.used_ceilings))
    c = ctx.known_ceilings
    machine = "" if c is None else f"{getattr(c, 'device', '')} {getattr(c, 'device_name', '')}"
    return AnswerKey(tuple(entries), machine.strip())
