"""Workshop results: save this machine's numbers to a small file, gather a class's files."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import html
import json
import math
import numbers
import os
import re
import socket
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from brrrlib import _files, _fmt, roofline
from brrrlib.ceilings import Ceilings
from brrrlib.classroom import _report_file
from brrrlib.classroom._report_file import SCHEMA, SCHEMA_VERSION
from brrrlib.hardware import DeviceSpec

__all__ = [
    "ClassTable",
    "Report",
    "attainable_table",
    "chapters_table",
    "from_ceilings",
    "load_reports",
    "plot_reports",
    "recorded_reports",
    "report",
    "reports_table",
    "write_predictions",
]

RESULTS_ENV = "BRRR_RESULTS_DIR"
"""The variable that names the class's shared folder (``brrr workshop``'s hub sets it)."""

RECORDINGS = Path(__file__).resolve().parents[1] / "recordings" / "h100-2026-11-22"
"""The recordings shipped with brrrlib (see its README.md): an H100 and an H200, 2026-11-22."""


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class ClassTable:
    """A table about the class's machines: text in a terminal, HTML in a notebook."""

    reports: tuple[Any, ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    muted: tuple[bool, ...] = ()
    caption: str = ""

    def __repr__(self) -> str:
        if not self.rows:
            return self.caption
        table = _fmt.text_table(self.columns, self.rows, rule=True)
        return table + (f"\n{self.caption}" if self.caption else "")

    def _repr_html_(self) -> str:
        if not self.rows:
            return f"<p>{html.escape(self.caption)}</p>"
        align = "l" * len(self.columns)
        return _fmt.html_table(
            self.columns, self.rows, caption=self.caption, align=align, muted=self.muted
        )


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Report:
    """One machine's results for the class: a name and its roofs, measured or predicted."""

    name: str
    machine: Ceilings | DeviceSpec
    chapters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    created_at: str | None = None
    recorded: bool = False
    notes: tuple[str, ...] = ()
    schema_version: int = field(default=SCHEMA_VERSION, compare=False)
    path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("name must be a non-empty string (what the class sees)")
        if not isinstance(self.machine, (Ceilings, DeviceSpec)):
            raise TypeError(
                "machine must be Ceilings (bl.measure_ceilings()) or a spec-sheet row "
                f"(bl.spec('T4')), got {type(self.machine).__name__}"
            )
        chapters = _report_file.check_chapters(self.chapters, "Report")
        frozen = {k: MappingProxyType(v) for k, v in chapters.items()}
        object.__setattr__(self, "chapters", MappingProxyType(frozen))
        object.__setattr__(self, "notes", tuple(self.notes))

    # -- what every report answers ------------------------------------------------------
    @property
    def kind(self) -> str:
        """``"prediction"`` for spec-sheet numbers, ``"measurement"`` otherwise."""
        return "prediction" if self.is_prediction else "measurement"

    @property
    def is_prediction(self) -> bool:
        """True for spec-sheet numbers: nothing was measured."""
        return isinstance(self.machine, DeviceSpec)

    @property
    def label(self) -> str:
        """The name as the class sees it; predictions and recordings say what they are."""
        for flag, word in ((self.is_prediction, "prediction"), (self.recorded, "recorded")):
            if flag and word not in self.name.lower():
                return f"{self.name} ({word})"
        return self.name

    @property
    def device(self) -> str:
        """``"cpu"``, ``"cuda"``, ``"mps"``: the kind of device the numbers belong to."""
        if isinstance(self.machine, Ceilings):
            return self.machine.device
        return "cuda" if self.machine.kind == "gpu" else self.machine.kind

    @property
    def device_name(self) -> str:
        """The device's own name (``"NVIDIA H100 80GB HBM3"``, a CPU model, a spec row)."""
        m = self.machine
        return m.device_name if isinstance(m, Ceilings) else m.name

    @property
    def precisions(self) -> tuple[str, ...]:
        """The matmul precisions with a roof here: always ``"fp32"``, GPUs more."""
        m = self.machine
        by = m.matmul_flops_per_s_by_dtype if isinstance(m, Ceilings) else m.peak_flops_per_s
        return tuple(by)

    def matmul_peak(self, precision: str = "fp32") -> float:
        """Matmul FLOP/s in ``precision``: measured, or the sheet's dense peak."""
        m = self.machine
        return m.matmul_peak(precision) if isinstance(m, Ceilings) else m.peak(precision)

    def fastest_precision(self) -> str:
        """The precision with the highest matmul roof (``"bf16"`` on most GPUs)."""
        return max(self.precisions, key=self.matmul_peak)

    @property
    def mem_bandwidth_bytes_per_s(self) -> float:
        """Memory bandwidth: a measured copy, or the sheet's number."""
        return self.machine.mem_bandwidth_bytes_per_s

    @property
    def vector_flops_per_s(self) -> float:
        """The non-matmul roof, one FLOP per operation: measured, or half the sheet's fp32 peak (a
        sheet counts a fused multiply-add as two FLOPs; a plain operation is one).
        """
        m = self.machine
        return m.vector_flops_per_s if isinstance(m, Ceilings) else m.peak("fp32") / 2

    @property
    def op_overhead_s(self) -> float | None:
        """One tiny op's cost, measured; None for a prediction (no sheet lists it)."""
        return self.machine.op_overhead_s if isinstance(self.machine, Ceilings) else None

    def ridge_point_flops_per_byte(self, precision: str = "fp32") -> float:
        """``matmul_peak(precision) / mem_bandwidth_bytes_per_s``: below it, memory-bound."""
        return self.matmul_peak(precision) / self.mem_bandwidth_bytes_per_s

    # -- the file ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The JSON layout of :mod:`~brrrlib.classroom._report_file` (schema 2; ``path`` and
        ``recorded`` are not stored).
        """
        numbers = (
            {"spec": _report_file.spec_to_dict(self.machine)}
            if isinstance(self.machine, DeviceSpec)
            else {"ceilings": self.machine.to_dict()}
        )
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "name": self.name,
            "created_at": self.created_at,
            **numbers,
            "ridge_point_flops_per_byte": self.ridge_point_flops_per_byte(),
            "notes": list(self.notes),
            "chapters": {k: dict(v) for k, v in self.chapters.items()},
        }

    def to_json(self) -> str:
        """``to_dict()`` as indented JSON with a final newline (the file's exact text)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "report") -> Report:
        """Check a decoded report file (schema 1 or 2) and build the Report; errors name ``where``."""
        fields = _report_file.parse(data, where)  # its errors name where already
        try:
            return cls(**fields)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None

    # -- rendering -----------------------------------------------------------------------
    def __repr__(self) -> str:
        c = _cells(self)
        notes = "".join(f"\n  note: {n}" for n in self.notes)
        return (
            f"Report({c['machine']}: {c['device']}, {c['kind']}; matmul {c['matmul fp32']} "
            f"(fastest {c['fastest matmul']}), bandwidth {c['bandwidth']}, overhead "
            f"{c['op overhead']}, ridge {c['ridge fp32']} FLOP/byte){notes}"
        )

    def _repr_html_(self) -> str:
        return reports_table([self])._repr_html_()


def _cells(r: Report) -> dict[str, str]:
    """One report's row of :func:`reports_table`: column -> cell text."""
    fast = r.fastest_precision()
    overhead = r.op_overhead_s
    return {
        "machine": r.label,
        "kind": "prediction" if r.is_prediction else "recorded" if r.recorded else "measured",
        "device": f"{r.device} ({r.device_name})",
        "matmul fp32": _fmt.si(r.matmul_peak("fp32"), "FLOP/s"),
        "fastest matmul": f"{fast} {_fmt.si(r.matmul_peak(fast), 'FLOP/s')}",
        "vector": _fmt.si(r.vector_flops_per_s, "FLOP/s"),
        "bandwidth": _fmt.si(r.mem_bandwidth_bytes_per_s, "B/s"),
        "op overhead": "n/a" if overhead is None else _fmt.seconds(overhead),
        "ridge fp32": _fmt.si(r.ridge_point_flops_per_byte()),
        "ridge fastest": f"{_fmt.si(r.ridge_point_flops_per_byte(fast))} ({fast})",
        "chapters": ", ".join(sorted(r.chapters)) or "-",
    }


# --------------------------------------------------------------------------- making reports


def from_ceilings(ceilings: Ceilings, *, name: str | None = None) -> Report:
    """A measurement :class:`Report` of ``ceilings`` (pure: writes nothing)."""
    if not isinstance(ceilings, Ceilings):
        raise TypeError(
            f"ceilings must be what bl.measure_ceilings() returns, got {type(ceilings).__name__}"
        )
    label = name if name is not None else (ceilings.host or socket.gethostname())
    label = label.strip() if isinstance(label, str) else label  # Report says what a name must be
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Report(label, ceilings, created_at=now)


def report(
    path: str | Path | None = None,
    *,
    chapter: int | str | None = None,
    name: str | None = None,
    extra: Mapping[str, Any] | None = None,
    ceilings: Ceilings | None = None,
) -> Path:
    """Save this machine's ceilings (and a chapter's measurements) for the class; returns the path."""
    chapter_key = _report_file.chapter_key(chapter)
    extras = _report_file.extras(extra)
    if extras and chapter_key is None:
        raise ValueError("extra needs chapter=, e.g. bl.report(chapter=2, extra={...})")
    if ceilings is None:
        from brrrlib.ceilings import measure_ceilings

        ceilings = measure_ceilings()
    # On a JupyterHub every learner shares one host name; the hub's user name tells them apart.
    hub_user = os.environ.get("JUPYTERHUB_USER") or None
    rep = from_ceilings(ceilings, name=name if name is not None else hub_user)
    target = _target(path, rep, continue_earlier=name is None and hub_user is None)
    previous = _previous(target, rep)
    chapters = {k: dict(v) for k, v in previous.chapters.items()} if previous else {}
    if chapter_key is not None:
        chapters.setdefault(chapter_key, {}).update(extras)
    if previous is not None and name is None:
        rep = dataclasses.replace(rep, name=previous.name)  # the class knows this file by it
    _write(target, dataclasses.replace(rep, chapters=chapters))
    return target


def write_predictions(
    folder: str | Path, names: Iterable[str] = ("T4", "A100", "H100")
) -> list[Path]:
    """Write spec-sheet *prediction* files (nothing measured) for spec-table devices to ``folder``."""
    from brrrlib.hardware import spec

    written = []
    for device_name in (names,) if isinstance(names, str) else names:  # a name, not its letters
        row = spec(device_name)
        stored = DeviceSpec(**_report_file.spec_to_dict(row))  # the numbers, not lookup aliases
        rep = Report(f"{row.name} (prediction from spec sheet)", stored)
        written.append(Path(folder) / f"prediction-{_slug(row.name)}-{rep.device}.json")
        _write(written[-1], rep)
    return written


def _default_folder() -> Path:
    """Where :func:`report` writes without ``path``: ``$BRRR_RESULTS_DIR``, else ``./brrr-results``."""
    return Path(os.environ.get(RESULTS_ENV) or "brrr-results")


def _write(target: Path, rep: Report) -> None:
    """Write ``rep``'s file so that the instructor can read it, or say where to write instead."""
    try:
        _files.write_atomic(target, rep.to_json(), mode=0o644)
    except OSError as exc:
        fix = "pass path= a folder you can write to"
        if hasattr(os, "getuid") and target.exists() and target.stat().st_uid != os.getuid():
            fix = "another account wrote that file under the same name: pass another name="
        raise OSError(
            f"could not write the report to {target} ({exc.strerror or exc}); {fix}"
        ) from None


def _target(path: Any, rep: Report, continue_earlier: bool) -> Path:
    """Where ``rep`` goes: ``path``, else this machine's earlier file, else a new one."""
    if path is None:
        if continue_earlier:
            # Without a name, continue this machine's earlier report (say, one made
            # with name="ada" in chapter 00) rather than start a second file.
            earlier = _reports_of_this_machine(_default_folder(), rep)
            if len(earlier) == 1 and earlier[0].path is not None:
                return earlier[0].path  # report() keeps its name
        return _default_folder() / _file_name(rep)
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str, a Path or None, got {type(path).__name__}")
    target = Path(path)
    if target.is_dir() or str(path).endswith(("/", "\\")):
        return target / _file_name(rep)
    if target.suffix != ".json":
        raise ValueError(f"path={str(path)!r}: give a folder or a file name ending in .json")
    return target


def _machine_of(rep: Report) -> tuple[str, str, str, str]:
    """(kind, host, device, device name): which machine a report's numbers belong to."""
    host = rep.machine.host if isinstance(rep.machine, Ceilings) else ""
    return rep.kind, host, rep.device, rep.device_name


def _file_name(rep: Report) -> str:
    """``<name>-<device>-<fingerprint>.json``: safe on every file system, one per learner."""
    key = "\0".join((rep.name, *_machine_of(rep)[1:])).encode()
    fingerprint = hashlib.sha256(key).hexdigest()[:8]
    return f"{_slug(rep.name) or 'learner'}-{rep.device}-{fingerprint}.json"


def _slug(text: str) -> str:
    """``text`` reduced to ASCII letters, digits, ``_`` and ``-`` (at most 40 of them)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")[:40]


def _previous(target: Path, rep: Report) -> Report | None:
    """The report already in ``target``, if any; another machine's file there is an error."""
    if not target.exists() and not target.is_symlink():
        return None
    previous = _read(target, target.parent)  # a clear error on a damaged or foreign file
    if _machine_of(previous) != _machine_of(rep):
        raise ValueError(
            f"path={str(target)!r} holds the report of another machine "
            f"({previous.label}: {previous.device_name}); choose another path or name="
        )
    return previous


def _reports_of_this_machine(folder: Path, rep: Report) -> list[Report]:
    """The readable reports in ``folder`` made on the same host and device as ``rep``."""
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            other = _read(path, folder)
        except ValueError:
            continue  # not ours to judge here; load_reports names bad files
        if _machine_of(other) == _machine_of(rep):
            found.append(other)
    return found


# --------------------------------------------------------------------------- reading reports


def _read(path: Path, root: Path) -> Report:
    data = _report_file.read_json(path, root)
    return dataclasses.replace(Report.from_dict(data, where=str(path)), path=path)


def load_reports(folder: str | Path, *, strict: bool = True) -> list[Report]:
    """Read every ``*.json`` report in ``folder`` (and its subfolders), validated."""
    if not isinstance(folder, (str, Path)):
        raise TypeError(f"folder must be a str or Path, got {type(folder).__name__}")
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(
            f"folder={str(folder)!r} is not a folder; put the learners' brrr-results/*.json "
            f"files in one folder and pass its path"
        )
    files = []  # linked folders are not entered: they may lead anywhere
    for where, _dirs, names in os.walk(root, followlinks=False):
        files += [Path(where) / n for n in sorted(names) if n.lower().endswith(".json")]
    if not files:
        raise ValueError(
            f"folder={str(folder)!r} holds no *.json files; learners write them with "
            f"bl.report() (into ./brrr-results/)"
        )
    reports, skipped = [], []
    for path in sorted(files):
        try:
            reports.append(_read(path, root))
        except ValueError as exc:
            if strict:
                raise
            skipped.append(f"  {exc}")
    if skipped:
        warnings.warn(
            f"skipped {len(skipped)} unreadable report(s):\n" + "\n".join(skipped), stacklevel=2
        )
    if not reports:
        raise ValueError(f"folder={str(folder)!r}: no readable report among {len(files)} files")
    return sorted(reports, key=lambda r: (r.is_prediction, r.recorded, r.name.lower(), r.device))


def recorded_reports() -> list[Report]:
    """The measured H100 and H200 shipped with brrrlib, marked as recorded."""
    out = []
    for rep in load_reports(RECORDINGS / "reports"):
        c = rep.machine
        date = c.measured_at[:10] or (rep.created_at or "")[:10]
        name = f"{c.device_name.removeprefix('NVIDIA ')}, recorded {date}, torch {c.torch_version}"
        out.append(dataclasses.replace(rep, name=name, recorded=True))
    return out


# --------------------------------------------------------------------------- showing a class


def _check_reports(reports: Any, precision: str = "fp32") -> tuple[Report, ...]:
    """The reports (one or a list) with a matmul roof in ``precision``; an error names the fix."""
    if isinstance(reports, Report):
        reports = [reports]
    if not isinstance(reports, Sequence) or not reports:
        raise ValueError("reports: give a non-empty list of reports, e.g. load_reports(folder)")
    for r in reports:
        if not isinstance(r, Report):
            raise TypeError(f"reports must hold Report objects, got {type(r).__name__}")
    chosen = tuple(r for r in reports if precision in r.precisions)
    if not chosen:
        raise ValueError(f"precision={precision!r}: no report carries a {precision} matmul peak")
    return chosen


def reports_table(reports: Sequence[Report]) -> ClassTable:
    """One row per machine: its roofs, ridge points and which chapters it reported."""
    chosen = _check_reports(reports)
    notes = ["italic rows are spec-sheet predictions, not measurements"] * any(
        r.is_prediction for r in chosen
    )
    notes.append("vector: one FLOP per operation (a spec sheet's fp32 peak counts an FMA as two)")
    rows = [_cells(r) for r in chosen]
    muted = tuple(r.is_prediction for r in chosen)
    return ClassTable(
        chosen, tuple(rows[0]), tuple(tuple(c.values()) for c in rows), muted, "; ".join(notes)
    )


def chapters_table(reports: Sequence[Report]) -> ClassTable:
    """One row per chapter measurement a learner reported (machine, chapter, name, value)."""
    chosen = _check_reports(reports)
    rows = tuple(
        (r.label, chapter, key, str(value))
        for r in chosen
        for chapter, values in sorted(r.chapters.items())
        for key, value in values.items()
    )
    none = "No chapter measurements yet: learners add them with "
    none += "bl.report(chapter=2, extra={'knee_repeat': 16})."
    columns = ("machine", "chapter", "measurement", "value")
    return ClassTable(chosen, columns, rows, (), "" if rows else none)


def attainable_table(
    reports: Sequence[Report], intensity_flops_per_byte: float, *, precision: str = "fp32"
) -> ClassTable:
    """What a kernel of ``intensity_flops_per_byte`` can reach on each machine, and why."""
    chosen = _check_reports(reports, precision)
    x = intensity_flops_per_byte
    if isinstance(x, bool) or not (isinstance(x, numbers.Real) and 0 < x < math.inf):
        raise ValueError(
            f"intensity_flops_per_byte must be a positive number (FLOPs per byte moved), got {x!r}"
        )
    rows = []
    for r in chosen:
        peak = r.matmul_peak(precision)
        rate = roofline.attainable_flops_per_s(float(x), peak, r.mem_bandwidth_bytes_per_s)
        rows.append(
            (r.label, _fmt.si(peak, "FLOP/s"), _fmt.si(rate, "FLOP/s"), _fmt.percent(rate, peak))
        )
    low, high = (f(chosen, key=lambda r: r.matmul_peak(precision)) for f in (min, max))
    spread = high.matmul_peak(precision) / low.matmul_peak(precision)
    caption = (
        f"the {precision} matmul peaks here differ by {round(spread):,}x (lowest {low.label}: "
        f"{_fmt.si(low.matmul_peak(precision), 'FLOP/s')}; highest {high.label}: "
        f"{_fmt.si(high.matmul_peak(precision), 'FLOP/s')})"
    )
    columns = (
        "machine",
        f"{precision} matmul peak",
        f"attainable at {x:g} FLOP/B",
        "share of peak",
    )
    muted = tuple(r.is_prediction for r in chosen)
    return ClassTable(chosen, columns, tuple(rows), muted, caption)


def plot_reports(
    reports: Sequence[Report], *, ax: Any = None, dtype: str = "fp32", title: str | None = None
) -> Any:
    """Every report's roofs on one roofline (:func:`brrrlib.roofline.plot`); returns the Axes."""
    chosen = _check_reports(reports, dtype)
    if title is None:
        recorded = sum(r.recorded for r in chosen)
        predicted = sum(r.is_prediction for r in chosen)
        counts = [f"{len(chosen) - recorded - predicted} measured"]
        counts += [f"{recorded} recorded"] * bool(recorded) + [f"{predicted} predicted"]
        title = f"the class on one roofline, {dtype} roofs: {', '.join(counts)}"
    # roofline.plot labels a device by its name: give each the label the class sees.
    devices = [
        dataclasses.replace(r.machine, name=r.label)
        if r.is_prediction
        else dataclasses.replace(r.machine, device_name=r.label)
        for r in chosen
    ]
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(12, 5), layout="constrained")
    ax = roofline.plot(devices, ax=ax, dtype=dtype)
    ax.set_title(title)
    predicted_labels = tuple(r.label + " " for r in chosen if r.is_prediction)
    for line in ax.get_lines():
        if predicted_labels and line.get_label().startswith(predicted_labels):
            line.set_linestyle(":")  # nothing measured: dotted
    # A class has many machines: the legend goes beside the plot, not over the lines.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax
