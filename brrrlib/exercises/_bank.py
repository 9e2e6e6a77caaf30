"""The question bank: each exercise's text as plain data, its answer as a solver."""

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
    "SOLVERS",
    "Context",
    "Question",
    "Worked",
    "chapter_prompts",
    "parse_questions",
    "solves",
]

DEFAULT_REL_TOL = 0.1
"""Relative tolerance for numeric answers unless a question sets its own: the inputs
are spec-sheet numbers that people round (1.5 vs 1.555 TB/s)."""

FP32_BYTES = 4
"""Bytes of one fp32 number."""


@dataclass(frozen=True)
class Worked:
    """An expected answer with its working: the steps, in words and numbers, that give it."""

    value: Any
    steps: tuple[str, ...] = ()
    slips: Mapping[str, float] = field(default_factory=dict, compare=False)


#: Each question's solver, by question id (filled by :func:`solves`).
SOLVERS: dict[str, Callable[[Context], Worked]] = {}


def solves(question_id: str) -> Callable:
    """Register the decorated function as the solver of ``question_id`` (once only)."""

    def register(solver: Callable[[Context], Worked]) -> Callable[[Context], Worked]:
        if question_id in SOLVERS:
            raise ValueError(f"question id {question_id!r} has a solver twice")
        SOLVERS[question_id] = solver
        return solver

    return register


@dataclass(frozen=True)
class Question:
    """One exercise: its id, the unit or options of its answer, hints and nudges."""

    id: str
    unit: str = ""
    choices: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    rel_tol: float = DEFAULT_REL_TOL
    explain: str = ""
    nudges: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

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

    def solve(self, ctx: Context) -> Worked:
        """The expected answer with its working, computed by the question's solver."""
        return SOLVERS[self.id](ctx)

    def __repr__(self) -> str:
        unit = f" [{self.unit}]" if self.unit else ""
        options = f" (one of: {', '.join(self.choices)})" if self.choices else ""
        return f"{self.id}: {self.prompt}{unit}{options}"


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if repeated := sorted({k for k in keys if keys.count(k) > 1}):
        raise ValueError(f"given twice in the question bank: {repeated}")
    return dict(pairs)


def parse_questions(text: str) -> dict[str, Question]:
    """The questions of a bank in ``questions.json``'s form, by id, in its order."""
    rows = json.loads(text, object_pairs_hook=_refuse_repeats)
    out = {}
    for qid, row in rows.items():
        if "like" in row:
            row = {**rows[row["like"]], **{k: v for k, v in row.items() if k != "like"}}
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
        out[qid] = Question(qid, **fields)
    return out


#: How a chapter asks an exercise: a markdown paragraph that starts **Exercise `id`.**
#: (or **Exercises `a`, `b`.** for questions asked together).
_ASKED = re.compile(
    r"\*\*Exercises? (?P<ids>`\d\d\.\w+`(?:,? (?:and )?`\d\d\.\w+`)*)\.\*\*\s*"
    r"(?P<text>.*?)(?:\n\s*\n|\Z)",
    re.S,
)


@functools.cache
def chapter_prompts() -> dict[str, str]:
    """Each exercise's question, read from the chapter that asks it (id -> plain text)."""
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


_CEILING_UNITS = {"matmul_flops_per_s": "FLOP/s", "mem_bandwidth_bytes_per_s": "B/s"}


class Context:
    """What a solver may look at: the spec table and this machine's ceilings."""

    def __init__(self, ceilings: Any = None) -> None:
        self._ceilings = ceilings
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
        if self._ceilings is None:
            from brrrlib.ceilings import measure_ceilings

            self._ceilings = measure_ceilings()  # shows progress if it has to measure
        return self._ceilings

    def peak(self, device: str, dtype: str) -> float:
        """The spec sheet's peak FLOP/s of ``device`` in ``dtype``."""
        return float(self.spec(device).peak_flops_per_s[dtype])

    def bandwidth(self, device: str) -> float:
        """The spec sheet's memory bandwidth of ``device``, bytes/s."""
        return float(self.spec(device).mem_bandwidth_bytes_per_s)

    def peak_step(self, device: str, dtype: str) -> str:
        """The working step that quotes a spec-sheet peak."""
        flops = _fmt.si(self.peak(device, dtype), "FLOP/s")
        return f"{device} {dtype} peak, bl.spec('{device}'): {flops}"

    def bandwidth_step(self, device: str) -> str:
        """The working step that quotes a spec-sheet bandwidth."""
        bytes_per_s = _fmt.si(self.bandwidth(device), "B/s")
        return f"{device} memory bandwidth, bl.spec('{device}'): {bytes_per_s}"

    def measured(self, what: str) -> tuple[float, str]:
        """A measured ceiling (a field of ``bl.measure_ceilings()``) and the step that quotes it."""
        value = getattr(self.ceilings, what)
        unit = _CEILING_UNITS.get(what)
        text = _fmt.seconds(value) if unit is None else _fmt.si(value, unit)
        return value, f"bl.measure_ceilings().{what} on this machine: {text}"
