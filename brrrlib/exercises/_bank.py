"""The shape of an exercise: the unit, hints, typical slips and the solver of its answer.

The question itself is worded once, in the chapter that asks it (a markdown
cell starting **Exercise `id`.**, just above its ``bl.check`` cell); the bank
holds what the chapter does not show. Each exercise is a :class:`Question`
(id, unit or options, hints) and a *solver*: a function of a :class:`Context`
that returns a :class:`Worked` answer, the expected value with the steps
that produce it.
The solver computes from ``ctx.spec(name)`` (the spec-sheet table) and
``ctx.ceilings`` (this machine's measured ceilings), never from a typed-in
number, so the checker, the worked solution and the instructor's answer key
all follow the table and the machine. ``mistakes`` maps a typical slip (the
ratio *learner's answer / right answer* it produces, or a wrong option) to
its nudge; nudges and hints never contain the expected value.

The exercises themselves are grouped by topic, one module each
(``_roofline``, ``_compute``, ``_memory``, ``_overhead``, ``_diagnosis``,
``_distributed``, ``_decoding``), each with a tuple ``EXERCISES``; the checking lives in
:mod:`brrrlib.exercises`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brrrlib import _fmt

__all__ = [
    "DEFAULT_REL_TOL",
    "FP32_BYTES",
    "REGIMES",
    "Context",
    "Exercise",
    "Question",
    "Worked",
    "bandwidth",
    "chapter_prompts",
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
    """One exercise: its id, the unit or options of its answer, and its hints.

    ``kind`` is ``"number"`` (compared within ``rel_tol``) or ``"choice"``
    (one of ``choices``). ``explain`` is shown once the answer is right. The
    solver and the typical mistakes are kept out of this record, so listing
    questions reveals nothing.
    """

    id: str
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

    @property
    def prompt(self) -> str:
        """The question as its chapter words it (see :func:`chapter_prompts`)."""
        return chapter_prompts().get(self.id, "")

    def __repr__(self) -> str:
        unit = f" [{self.unit}]" if self.unit else ""
        options = f" (one of: {', '.join(self.choices)})" if self.choices else ""
        return f"{self.id}: {self.prompt}{unit}{options}"


#: How a chapter asks an exercise: a markdown paragraph that starts **Exercise `id`.**
#: (or **Exercises `a`, `b`.** for questions asked together).
_ASKED = re.compile(
    r"\*\*Exercises? (?P<ids>`\d\d\.\w+`(?:,? (?:and )?`\d\d\.\w+`)*)\.\*\*\s*"
    r"(?P<text>.*?)(?:\n\s*\n|\Z)",
    re.S,
)


@functools.cache
def chapter_prompts() -> dict[str, str]:
    """Each exercise's question, read from the chapter that asks it (id -> plain text).

    The chapters (shipped in the package as ``brrrlib.course``) are the one
    place a question is worded; the answer key and :func:`brrrlib.questions`
    quote them from there.
    """
    from brrrlib._files import course_folder

    prompts: dict[str, str] = {}
    folder = course_folder()
    for path in sorted(folder.glob("*.ipynb")) if folder else ():
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            if cell.get("cell_type") != "markdown":
                continue
            for m in _ASKED.finditer("".join(cell.get("source", ()))):
                for qid in re.findall(r"`([^`]+)`", m["ids"]):
                    prompts[qid] = " ".join(m["text"].replace("`", "").split())
    return prompts


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
        (
            given_peak(ctx, device, top),
            given_peak(ctx, device, bottom),
            f"ratio = {top} peak / {bottom} peak",
        ),
    )


def measured(ctx: Context, what: str) -> tuple[float, str]:
    """A measured ceiling and the step that quotes it."""
    c = ctx.ceilings
    value = getattr(c, what)
    unit = {"matmul_flops_per_s": "FLOP/s", "mem_bandwidth_bytes_per_s": "B/s"}.get(what)
    text = _fmt.seconds(value) if unit is None else _fmt.si(value, unit)
    return value, f"bl.measure_ceilings().{what} on this machine: {text}"
