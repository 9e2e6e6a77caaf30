"""Exercises: ``bl.check`` an answer, ``bl.hint`` when stuck, ``bl.solution`` after the last hint."""

from __future__ import annotations

from typing import Any

from brrrlib import _fmt
from brrrlib._checks import kind, one_of, positive_int
from brrrlib.exercises import _decoding, _diagnosis, _distributed, _one_device  # noqa: F401
from brrrlib.exercises._bank import Question, load
from brrrlib.exercises._judge import answer_text, expects

__all__ = ["check", "hint", "questions", "solution"]

#: The questions, in course order; their text is plain data, in questions.json beside this file.
_BANK = load()


class QuestionList(tuple):
    """The questions of one chapter (or all), as :func:`questions` returns them."""

    @property
    def ids(self) -> tuple[str, ...]:
        """The question ids, in course order."""
        return tuple(q.id for q in self)

    def __repr__(self) -> str:
        return "\n".join(map(repr, self))

    def _repr_html_(self) -> str:
        rows = [(q.id, q.prompt, expects(q)) for q in self]
        return _fmt.html_table(("id", "question", "answer"), rows, align=" l", tags={0: "code"})


def _get(question_id: Any) -> Question:
    kind("question_id", question_id, str, "str")
    return _BANK[one_of("question_id", question_id, _BANK)]


def questions(chapter: str | int | None = None) -> QuestionList:
    """List the exercises, for one chapter (``"02"`` or ``2``) or for all."""
    if chapter is not None:
        chapter = one_of("chapter", str(chapter).zfill(2), dict.fromkeys(k[:2] for k in _BANK))
    return QuestionList(q for q in _BANK.values() if chapter in (None, q.chapter))


def hint(question_id: str, level: int = 1) -> None:
    """Print a hint for a question; ``level=2`` (and up) gives a stronger one."""
    q = _get(question_id)
    n, last = min(positive_int("level", level), len(q.hints)), len(q.hints)
    more = f"bl.hint({q.id!r}, level={n + 1})" if n < last else f"bl.solution({q.id!r})"
    print(f"Hint {n}/{last} for {q.id}: {q.hints[n - 1]}\n  (next: {more})")


def check(question_id: str, answer: Any, *, ceilings: Any = None) -> bool:
    """Check an answer, print feedback, and return ``True`` when it is right."""
    verdict = _get(question_id).judge(answer, ceilings)
    print(verdict.reply)
    return verdict.right


def solution(question_id: str, *, ceilings: Any = None) -> None:
    """Print the worked answer to a question: its method, the numbers it uses, the answer."""
    q = _get(question_id)
    worked = q.solve(ceilings)
    here = "" if worked.machine is None else f" (machine={worked.machine!r})"
    steps = "".join(f"\n  {i}. {step}" for i, step in enumerate(worked.steps, 1))
    print(f"{q!r}\n  method: {q.hints[-1]}{steps}\n  answer: {answer_text(q, worked.value)}{here}")
    print(f"  {q.explain}")
