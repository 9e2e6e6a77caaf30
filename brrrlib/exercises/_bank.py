"""The question bank: each question's text is data, its answer a solver that records its steps."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import brrrlib.ceilings
from brrrlib import _fmt
from brrrlib._files import course_folder
from brrrlib.exercises._judge import Verdict, expects, judge
from brrrlib.hardware import spec

__all__ = ["Context", "Question", "Worked", "chapter_prompts", "load", "solves"]

#: Each question's solver, by question id (filled by :func:`solves`).
SOLVERS: dict[str, Callable[[Context], Worked]] = {}
#: How a chapter asks an exercise: a markdown paragraph that starts **Exercise `id`.**
#: (or **Exercises `a`, `b`.** for questions asked together).
_ASKED = re.compile(r"\*\*Exercises? (?P<ids>[\w.`, ]+)\.\*\*\s*(?P<text>.*?)(?:\n\s*\n|\Z)", re.S)


@dataclass(frozen=True)
class Worked:
    """An expected answer with its working; ``machine`` is set when it used measured ceilings."""

    value: Any
    steps: tuple[str, ...] = ()
    slips: Mapping[str, float] = field(default_factory=dict, compare=False)
    machine: str | None = None


def solves(question_id: str) -> Callable:
    """Register the decorated function as the solver of ``question_id``."""
    return lambda solver: SOLVERS.setdefault(question_id, solver)


class Context:
    """What a solver may look at (the spec table, this machine's ceilings); it records the steps."""

    spec = staticmethod(spec)

    def __init__(self, ceilings: Any = None) -> None:
        needed = ("matmul_flops_per_s", "mem_bandwidth_bytes_per_s", "op_overhead_s")
        if ceilings is not None and not all(hasattr(ceilings, a) for a in needed):
            kind = type(ceilings).__name__
            raise TypeError(f"ceilings must be what bl.measure_ceilings() returns, got {kind}")
        self._ceilings, self.used_ceilings, self.steps = ceilings, False, []

    @property
    def ceilings(self) -> Any:
        """This machine's ceilings (``bl.measure_ceilings()``, cached on disk)."""
        self.used_ceilings = True
        if self._ceilings is None:
            self._ceilings = brrrlib.ceilings.measure_ceilings()  # shows progress if it measures
        return self._ceilings

    def note(self, label: str, value: Any, unit: str = "") -> Any:
        """Record the step ``label: value`` (unit ``"s"``: a duration, ``"x"``: a ratio); return value."""
        shown = {"s": _fmt.seconds, "x": _fmt.times}.get(unit, lambda v: _fmt.si(v, unit))
        self.steps.append(f"{label}: {value if isinstance(value, str) else shown(value)}")
        return value

    def peak(self, device: str, dtype: str) -> float:
        """The spec sheet's peak FLOP/s of ``device`` in ``dtype`` (a step)."""
        return self.note(f"bl.spec({device!r}).peak({dtype!r})", spec(device).peak(dtype), "FLOP/s")

    def bandwidth(self, device: str) -> float:
        """The spec sheet's memory bandwidth of ``device``, bytes/s (a step)."""
        bytes_per_s = spec(device).mem_bandwidth_bytes_per_s
        return self.note(f"bl.spec({device!r}).mem_bandwidth_bytes_per_s", bytes_per_s, "B/s")

    def measured(self, what: str) -> float:
        """A field of ``bl.measure_ceilings()`` on this machine (a step)."""
        unit = {"matmul_flops_per_s": "FLOP/s", "mem_bandwidth_bytes_per_s": "B/s"}.get(what, "s")
        return self.note(f"bl.measure_ceilings().{what}", getattr(self.ceilings, what), unit)


@dataclass(frozen=True)
class Question:
    """One exercise: its id, the unit or options of its answer, hints and nudges."""

    id: str
    unit: str = ""
    choices: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    rel_tol: float = 0.1  # spec-sheet numbers are rounded (1.5 vs 1.555 TB/s)
    explain: str = ""
    nudges: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def kind(self) -> str:
        """``"choice"`` when the question has options, else ``"number"``."""
        return "choice" if self.choices else "number"

    @property
    def chapter(self) -> str:
        """The two-digit chapter the question belongs to (``"02"`` for ``"02.ridge"``)."""
        return self.id[:2]

    @property
    def prompt(self) -> str:
        """The question as its chapter words it (see :func:`chapter_prompts`)."""
        return chapter_prompts().get(self.id, "")

    def solve(self, ceilings: Any = None) -> Worked:
        """The expected answer with its working, on ``ceilings`` (this machine's when None)."""
        ctx = Context(ceilings)
        worked = SOLVERS[self.id](ctx)
        steps = tuple(dict.fromkeys([*ctx.steps, *worked.steps]))  # each step once, in order
        name = getattr(ctx._ceilings, "device_name", "") if ctx.used_ceilings else None
        return dataclasses.replace(worked, steps=steps, machine=name)

    def judge(self, answer: Any, ceilings: Any = None) -> Verdict:
        """What ``bl.check`` decides for ``answer``, unprinted: (right, slip, reply)."""
        return judge(self, answer, ceilings)

    def __repr__(self) -> str:
        return f"{self.id}: {self.prompt} [{expects(self)}]"


def load() -> dict[str, Question]:
    """The questions of questions.json, by id, in its order (``"like"`` copies another's fields)."""
    rows = json.loads((Path(__file__).parent / "questions.json").read_text(encoding="utf-8"))
    out = {}
    for qid, row in rows.items():
        row = {**rows.get(row.pop("like", None), {}), **row}
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
        out[qid] = Question(qid, **fields)
    return out


@functools.cache
def chapter_prompts() -> dict[str, str]:
    """Each exercise's question, read from the chapter that asks it (id -> plain text)."""
    prompts: dict[str, str] = {}
    folder = course_folder()
    for path in sorted(folder.glob("*.ipynb")) if folder else ():
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            for m in _ASKED.finditer("".join(cell.get("source", ()))):
                for qid in re.findall(r"`([^`]+)`", m["ids"]):
                    prompts[qid] = " ".join(m["text"].replace("`", "").split())
    return prompts
