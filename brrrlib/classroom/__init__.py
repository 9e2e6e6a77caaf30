"""Workshop results: save this machine's numbers to a small file, gather a class's files."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import hashlib
import json
import os
import re
import socket
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from brrrlib import _checks, _files, _fmt, roofline
from brrrlib.ceilings import Ceilings, measure_ceilings
from brrrlib.classroom import _report_file as _file
from brrrlib.classroom._report_file import SCHEMA, SCHEMA_VERSION
from brrrlib.hardware import DeviceSpec, spec

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

#: The variable that names the class's shared folder (``brrr workshop``'s hub sets it).
RESULTS_ENV = "BRRR_RESULTS_DIR"
#: The recordings shipped with brrrlib (see its README.md): an H100 and an H200, 2026-11-22.
RECORDINGS = Path(__file__).resolve().parents[1] / "recordings" / "h100-2026-11-22"


@dataclass(frozen=True)
class ClassTable:
    """A table about the class's machines: text in a terminal, HTML in a notebook."""

    reports: tuple[Report, ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    muted: tuple[bool, ...] = ()  # predictions' rows, in italics

    def __repr__(self) -> str:
        table = _fmt.text_table(self.columns, self.rows, rule=True) if self.rows else ""
        return "\n".join(filter(None, (table, self.caption)))

    def _repr_html_(self) -> str:
        return _fmt.html_table(self.columns, self.rows, caption=self.caption, muted=self.muted)


@dataclass(frozen=True)
class Report:
    """One machine's results for the class: a name and its roofs, measured or predicted."""

    name: str
    machine: Ceilings | DeviceSpec
    chapters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)
    created_at: str | None = None
    recorded: bool = False
    notes: tuple[str, ...] = ()
    path: Path | None = field(default=None, compare=False)
    # What the class compares, read from either kind of machine by __post_init__:
    device: str = field(init=False, compare=False)
    device_name: str = field(init=False, compare=False)
    precisions: tuple[str, ...] = field(init=False, compare=False)  # its matmul roofs
    vector_flops_per_s: float = field(init=False, compare=False)
    op_overhead_s: float | None = field(init=False, compare=False)  # a sheet has none
    mem_bandwidth_bytes_per_s: float = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("name must be a non-empty string")
        m = _checks.kind(
            "machine", self.machine, (Ceilings, DeviceSpec), "Ceilings or a DeviceSpec"
        )
        if isinstance(m, DeviceSpec):  # vector: half the sheet's fp32, which counts an FMA as two
            kind = "cuda" if m.kind == "gpu" else m.kind
            read = (kind, m.name, tuple(m.peak_flops_per_s), m.peak("fp32") / 2, None)
        else:
            by_dtype = tuple(m.matmul_flops_per_s_by_dtype)
            read = (m.device, m.device_name, by_dtype, m.vector_flops_per_s, m.op_overhead_s)
        read_fields = [f.name for f in dataclasses.fields(self) if not f.init]
        for name, value in zip(read_fields, (*read, m.mem_bandwidth_bytes_per_s), strict=True):
            object.__setattr__(self, name, value)
        chapters = _file.check(self.chapters, _file.CHAPTERS, "chapters")
        chapters = {k: MappingProxyType(v) for k, v in chapters.items()}
        object.__setattr__(self, "chapters", MappingProxyType(chapters))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def is_prediction(self) -> bool:
        return isinstance(self.machine, DeviceSpec)

    @property
    def kind(self) -> str:
        return "prediction" if self.is_prediction else "measurement"

    @property
    def label(self) -> str:
        """The name as the class sees it; predictions and recordings say what they are."""
        for flag, word in ((self.is_prediction, "prediction"), (self.recorded, "recorded")):
            if flag and word not in self.name.lower():
                return f"{self.name} ({word})"
        return self.name

    def matmul_peak(self, precision: str = "fp32") -> float:
        """Matmul FLOP/s in ``precision``: measured, or the sheet's dense peak."""
        m = self.machine
        return m.peak(precision) if self.is_prediction else m.matmul_peak(precision)

    def ridge_point_flops_per_byte(self, precision: str = "fp32") -> float:
        """``matmul_peak(precision) / mem_bandwidth_bytes_per_s``: below it, memory-bound."""
        return self.matmul_peak(precision) / self.mem_bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        """The file's layout, schema 2 (``path`` and ``recorded`` are not stored)."""
        m = self.machine
        if self.is_prediction:
            row = {k: getattr(m, k) for k in _file.SPEC_FIELDS}
            body = {"spec": row | {"peak_flops_per_s": dict(m.peak_flops_per_s)}}
        else:
            body = {"ceilings": m.to_dict()}
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "name": self.name,
            "created_at": self.created_at,
            **body,
            "ridge_point_flops_per_byte": self.ridge_point_flops_per_byte(),
            "notes": list(self.notes),
            "chapters": {k: dict(v) for k, v in self.chapters.items()},
        }

    def to_json(self) -> str:
        """``to_dict()`` as indented JSON with a final newline (the file's exact text)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "report") -> Report:
        """Check a decoded report file and build the Report; errors name ``where``."""
        try:
            return cls(**_file.parse(data))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None

    def __repr__(self) -> str:
        return repr(reports_table([self]))

    def _repr_html_(self) -> str:
        return reports_table([self])._repr_html_()


def _row(r: Report) -> tuple[str, ...]:
    fast = max(r.precisions, key=r.matmul_peak)
    return (
        r.label,
        _status(r),
        f"{r.device} ({r.device_name})",
        _fmt.si(r.matmul_peak(), "FLOP/s"),
        f"{fast} {_fmt.si(r.matmul_peak(fast), 'FLOP/s')}",
        _fmt.si(r.vector_flops_per_s, "FLOP/s"),
        _fmt.si(r.mem_bandwidth_bytes_per_s, "B/s"),
        "n/a" if r.op_overhead_s is None else _fmt.seconds(r.op_overhead_s),
        _fmt.si(r.ridge_point_flops_per_byte()),
        f"{_fmt.si(r.ridge_point_flops_per_byte(fast))} ({fast})",
        ", ".join(sorted(r.chapters)) or "-",
    )


def _status(r: Report) -> str:
    return "predicted" if r.is_prediction else "recorded" if r.recorded else "measured"


_COLUMNS = tuple(
    "machine,kind,device,matmul fp32,fastest matmul,vector,bandwidth,op overhead,ridge fp32,"
    "ridge fastest,chapters".split(",")
)


def from_ceilings(ceilings: Ceilings, *, name: str | None = None) -> Report:
    """A measurement :class:`Report` of ``ceilings`` (pure: writes nothing)."""
    _checks.kind("ceilings", ceilings, Ceilings, "bl.measure_ceilings()")
    name = name if name is not None else (ceilings.host or socket.gethostname())
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return Report(name.strip() if isinstance(name, str) else name, ceilings, created_at=now)


def report(
    path: str | Path | None = None,
    *,
    chapter: int | str | None = None,
    name: str | None = None,
    extra: Mapping[str, Any] | None = None,
    ceilings: Ceilings | None = None,
) -> Path:
    """Save this machine's ceilings (and a chapter's measurements) for the class; returns the path."""
    key = _chapter_key(chapter)
    if extra is not None and key is None:
        raise ValueError("extra needs chapter=, e.g. bl.report(chapter=2, extra={...})")
    try:
        extra = _file.check(extra or {}, _file.VALUES, "extra")
    except ValueError as exc:  # the learner's argument: a TypeError
        raise TypeError(*exc.args) from None
    ceilings = measure_ceilings() if ceilings is None else ceilings
    # On a JupyterHub every learner shares one host name; the hub's user name tells them apart.
    hub_user = os.environ.get("JUPYTERHUB_USER") or None
    rep = from_ceilings(ceilings, name=name if name is not None else hub_user)
    target = _target(path, rep, continue_earlier=name is None and hub_user is None)
    previous = _previous(target, rep)
    chapters = {k: dict(v) for k, v in previous.chapters.items()} if previous else {}
    if key is not None:
        chapters.setdefault(key, {}).update(extra)
    if previous is not None and name is None:
        rep = dataclasses.replace(rep, name=previous.name)  # the class knows this file by it
    _write(target, dataclasses.replace(rep, chapters=chapters))
    return target


def _chapter_key(chapter: Any) -> str | None:
    """``2`` or ``"2"`` -> ``"02"``: the key a chapter's numbers are stored under."""
    if chapter is None:
        return None
    typed = isinstance(chapter, (int, str)) and not isinstance(chapter, bool)
    text = str(chapter).strip()
    if not typed or not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", text):
        error = ValueError if typed else TypeError
        raise error(f"chapter={chapter!r}: use a chapter number like 2 or '02'")
    return f"{int(text):02d}" if text.isdigit() and len(text) <= 3 else text


def write_predictions(
    folder: str | Path, names: Iterable[str] = ("T4", "A100", "H100")
) -> list[Path]:
    """Write spec-sheet *prediction* files (nothing measured) for spec-table devices to ``folder``."""
    written = []
    for device_name in (names,) if isinstance(names, str) else names:  # a name, not its letters
        row = spec(device_name)
        stored = DeviceSpec(**{k: getattr(row, k) for k in _file.SPEC_FIELDS})  # no aliases
        rep = Report(row.name, stored)  # labelled "(prediction)"
        written.append(Path(folder) / f"prediction-{_slug(row.name)}-{rep.device}.json")
        _write(written[-1], rep)
    return written


def _write(target: Path, rep: Report) -> None:
    try:
        _files.write_atomic(target, rep.to_json(), mode=0o644)  # the instructor reads it
    except OSError as exc:
        why = exc.strerror or exc
        raise OSError(f"could not write the report to {target} ({why}): pass path=") from None


def _target(path: Any, rep: Report, continue_earlier: bool) -> Path:
    """Where ``rep`` goes: ``path``, else this machine's earlier file, else a new one."""
    if path is None:
        folder = Path(os.environ.get(RESULTS_ENV) or "brrr-results")
        # Without a name, continue this machine's earlier report (say, one made with
        # name="ada" in chapter 00) rather than start a second file.
        earlier = _reports_of_this_machine(folder, rep) if continue_earlier else []
        return earlier[0].path if len(earlier) == 1 else folder / _file_name(rep)
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
    return rep.kind, getattr(rep.machine, "host", ""), rep.device, rep.device_name


def _file_name(rep: Report) -> str:
    """``<name>-<device>-<fingerprint>.json``: safe on every file system, one per learner."""
    key = "\0".join((rep.name, *_machine_of(rep)[1:])).encode()
    return f"{_slug(rep.name) or 'learner'}-{rep.device}-{hashlib.sha256(key).hexdigest()[:8]}.json"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")[:40]


def _previous(target: Path, rep: Report) -> Report | None:
    """The report already in ``target``, if any; another machine's file there is an error."""
    if not target.exists() and not target.is_symlink():
        return None
    previous = _read(target, target.parent)
    if _machine_of(previous) != _machine_of(rep):
        raise ValueError(f"path={str(target)!r} holds another machine's report ({previous.label})")
    return previous


def _reports_of_this_machine(folder: Path, rep: Report) -> list[Report]:
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        with contextlib.suppress(ValueError):  # not ours to judge here; load_reports names bad ones
            found.append(_read(path, folder))
    return [other for other in found if _machine_of(other) == _machine_of(rep)]


def _read(path: Path, root: Path) -> Report:
    data = _file.read_json(path, root)
    return dataclasses.replace(Report.from_dict(data, where=str(path)), path=path)


def load_reports(folder: str | Path, *, strict: bool = True) -> list[Report]:
    """Read every ``*.json`` report in ``folder`` (and its subfolders), validated."""
    if not isinstance(folder, (str, Path)) or not Path(folder).is_dir():
        raise ValueError(f"folder={folder!r} is not a folder (of learners' brrr-results/*.json)")
    files = []  # linked folders are not entered: they may lead anywhere
    for where, _dirs, names in os.walk(folder, followlinks=False):
        files += [Path(where) / n for n in names if n.lower().endswith(".json")]
    reports, skipped = [], []
    for path in sorted(files):
        try:
            reports.append(_read(path, Path(folder)))
        except ValueError as exc:
            if strict:
                raise
            skipped.append(f"  {exc}")
    if skipped:
        warnings.warn(f"skipped {len(skipped)} report(s):\n" + "\n".join(skipped), stacklevel=2)
    if not reports:  # bl.report() writes them
        raise ValueError(f"folder={str(folder)!r}: no report among its {len(files)} *.json files")
    return sorted(reports, key=lambda r: (r.is_prediction, r.recorded, r.name.lower(), r.device))


def recorded_reports() -> list[Report]:
    """The measured H100 and H200 shipped with brrrlib, marked as recorded."""
    out = []
    for rep in load_reports(RECORDINGS / "reports"):  # labelled "(recorded)"
        c, device = rep.machine, rep.device_name.removeprefix("NVIDIA ")
        name = f"{device} {c.measured_at[:10]} torch {c.torch_version}"
        out.append(dataclasses.replace(rep, name=name, recorded=True))
    return out


def _check_reports(reports: Any, precision: str = "fp32") -> tuple[Report, ...]:
    """The reports (one or a list) with a matmul roof in ``precision``; an error names the fix."""
    reports = [reports] if isinstance(reports, Report) else reports
    _checks.kind("reports", reports, Sequence, "list[Report]")
    _checks.some("reports", reports, "load_reports(folder)")
    for i, r in enumerate(reports):
        _checks.kind(f"reports[{i}]", r, Report, "bl.classroom.Report")
    chosen = tuple(r for r in reports if precision in r.precisions)
    if not chosen:
        raise ValueError(f"precision={precision!r}: no report carries a {precision} matmul peak")
    return chosen


def reports_table(reports: Sequence[Report]) -> ClassTable:
    """One row per machine: its roofs, ridge points and which chapters it reported."""
    chosen = _check_reports(reports)
    muted = tuple(r.is_prediction for r in chosen)
    return ClassTable(chosen, _COLUMNS, tuple(map(_row, chosen)), muted=muted)


def chapters_table(reports: Sequence[Report]) -> ClassTable:
    """One row per chapter measurement a learner reported (machine, chapter, name, value)."""
    chosen = _check_reports(reports)
    rows = tuple(
        (r.label, chapter, key, str(value))
        for r in chosen
        for chapter, values in sorted(r.chapters.items())
        for key, value in values.items()
    )
    caption = "" if rows else "no chapter measurements yet: bl.report(chapter=2, extra={...})"
    return ClassTable(chosen, ("machine", "chapter", "measurement", "value"), rows, caption)


def attainable_table(
    reports: Sequence[Report], intensity_flops_per_byte: float, *, precision: str = "fp32"
) -> ClassTable:
    """What a kernel of ``intensity_flops_per_byte`` can reach on each machine, and of its peak."""
    chosen = _check_reports(reports, precision)
    x = _checks.number(
        "intensity_flops_per_byte", intensity_flops_per_byte, positive=True, finite=True
    )
    peaks = [r.matmul_peak(precision) for r in chosen]
    rows = []
    for r, peak in zip(chosen, peaks, strict=True):
        rate = roofline.attainable_flops_per_s(float(x), peak, r.mem_bandwidth_bytes_per_s)
        rows.append(
            (r.label, *(_fmt.si(v, "FLOP/s") for v in (peak, rate)), _fmt.percent(rate, peak))
        )
    columns = ("machine", f"{precision} matmul peak", f"attainable at {x:g} FLOP/B", "of peak")
    caption = f"peaks differ {round(max(peaks) / min(peaks)):,}x"
    return ClassTable(chosen, columns, tuple(rows), caption, tuple(r.is_prediction for r in chosen))


def plot_reports(
    reports: Sequence[Report], *, ax: Any = None, dtype: str = "fp32", title: str | None = None
) -> Any:
    """Every report's roofs on one roofline (:func:`brrrlib.roofline.plot`); returns the Axes."""
    chosen = _check_reports(reports, dtype)
    if title is None:
        counts = collections.Counter(map(_status, chosen))
        kinds = ", ".join(
            f"{counts[k]} {k}" for k in ("measured", "recorded", "predicted") if counts[k]
        )
        title = f"{dtype} roofs: {kinds}"
    # roofline.plot labels a device by its name: give each the label the class sees.
    devices = [
        dataclasses.replace(r.machine, **{"name" if r.is_prediction else "device_name": r.label})
        for r in chosen
    ]
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(12, 5), layout="constrained")
    ax = roofline.plot(devices, ax=ax, dtype=dtype)
    ax.set_title(title)
    predicted = tuple(r.label + " " for r in chosen if r.is_prediction)
    for line in ax.get_lines():
        if line.get_label().startswith(predicted):
            line.set_linestyle(":")  # nothing measured: dotted
    _fmt.legend_beside(ax, fontsize=7)  # again: the keys of the dotted lines dotted too
    return ax
