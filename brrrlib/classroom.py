"""Workshop results: save this machine's numbers to a small file, gather a class's files.

In a workshop every learner measures a different machine: a laptop CPU, a
Colab T4, a lab workstation. The lesson lands when the whole room sees its
machines on one roofline: the same code, ridge points a hundred times apart.

* The learner runs ``bl.report(name="ada")`` (the last cell of chapter 00 or
  any later chapter); it writes ``brrr-results/ada-cpu.json`` with this
  machine's ceilings (:func:`brrrlib.measure_ceilings`, cached, so free after
  chapter 00) and hands the file in (upload, shared folder, chat).
* The instructor puts the files in one folder and opens
  ``course/instructor/class_results.ipynb``: :func:`load_reports` reads and
  validates them, :func:`plot_reports` draws every machine's roofs on one
  roofline and :func:`reports_table` lists them.

The file format (``schema_version`` 1) is plain JSON, small enough to read::

    {
      "schema": "brrr-report",
      "schema_version": 1,
      "kind": "measurement",              # or "prediction" (spec sheet, nothing measured)
      "name": "ada",                      # what the class sees; defaults to the host name
      "created_at": "2026-01-31T10:15:00+00:00",   # null for predictions
      "machine": {
        "host": "ada-laptop", "device": "cpu", "device_name": "Intel(R) Core(TM) i7-1185G7",
        "num_threads": 4, "torch_version": "2.5.1", "brrrlib_version": "0.1.0"
      },
      "ceilings": {
        "dtype": "fp32",
        "matmul_flops_per_s": 2.1e11,     # big square matmul: the factory's top speed
        "vector_flops_per_s": 1.9e11,     # elementwise arithmetic on in-cache data
        "mem_bandwidth_bytes_per_s": 1.5e10,   # large copy, read + write
        "op_overhead_s": 2.4e-06,         # one tiny op end to end; null for predictions
        "matmul_flops_per_s_by_dtype": {},     # tf32/bf16/fp16 matmul (GPU)
        "noisy": false,                   # a measurement's spread exceeded 10 %
        "measured_at": "2026-01-31T10:14:41+00:00"
      },
      "ridge_point_flops_per_byte": 14.0, # matmul / bandwidth, stored for readers without brrrlib
      "source": "bl.measure_ceilings() on ada-laptop",
      "chapters": {"02": {"knee_repeat": 16}}   # optional measurements per chapter (numbers, text)
    }

A newer schema than this library knows is refused with a message that says
to upgrade; a file with a missing or wrong field names the file and the field.
"""

from __future__ import annotations

import datetime
import html
import json
import math
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = [
    "DEFAULT_FOLDER",
    "SCHEMA_VERSION",
    "Report",
    "from_ceilings",
    "load_reports",
    "plot_reports",
    "prediction_from_spec",
    "report",
    "reports_table",
    "write_predictions",
]

SCHEMA = "brrr-report"
SCHEMA_VERSION = 1
"""Version of the JSON layout. Bump it when a field changes meaning or is removed;
:func:`load_reports` refuses files newer than it understands."""

DEFAULT_FOLDER = Path("brrr-results")
"""Where :func:`report` writes when no path is given (relative to the working directory)."""

KINDS = ("measurement", "prediction")
_EXTRA_TYPES = (int, float, str, bool)
_DTYPES = ("fp32", "tf32", "bf16", "fp16")


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Report:
    """One machine's results: measured ceilings, or a spec-sheet prediction.

    The fields mirror the JSON file (see the module docstring). Measured and
    predicted reports have the same fields, so both go on one roofline;
    ``kind`` keeps them apart and every rendering labels predictions as such.
    ``Report`` has the field names :func:`brrrlib.roofline.plot` reads
    (``matmul_flops_per_s``, ``vector_flops_per_s``,
    ``mem_bandwidth_bytes_per_s``), so a list of reports *is* a list of
    devices to plot. ``path`` is the file it was read from (None if built in
    memory).
    """

    kind: str
    name: str
    device: str
    device_name: str
    matmul_flops_per_s: float
    vector_flops_per_s: float
    mem_bandwidth_bytes_per_s: float
    op_overhead_s: float | None
    dtype: str = "fp32"
    matmul_flops_per_s_by_dtype: Mapping[str, float] = field(default_factory=dict)
    noisy: bool = False
    host: str = ""
    num_threads: int | None = None
    torch_version: str = ""
    brrrlib_version: str = ""
    created_at: str | None = None
    measured_at: str | None = None
    source: str = ""
    chapters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    path: Path | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("name must be a non-empty string (what the class sees)")
        for attr in ("matmul_flops_per_s", "vector_flops_per_s", "mem_bandwidth_bytes_per_s"):
            _positive(attr, getattr(self, attr))
        if self.op_overhead_s is not None:
            _positive("op_overhead_s", self.op_overhead_s)
        if self.kind == "measurement" and self.op_overhead_s is None:
            raise ValueError("op_overhead_s: a measurement must include the measured op overhead")
        by_dtype = dict(self.matmul_flops_per_s_by_dtype)
        for key, value in by_dtype.items():
            if key not in _DTYPES:
                raise ValueError(
                    f"matmul_flops_per_s_by_dtype: unknown dtype {key!r}; use {_DTYPES}"
                )
            _positive(f"matmul_flops_per_s_by_dtype[{key!r}]", value)
        chapters = {str(k): MappingProxyType(dict(v)) for k, v in dict(self.chapters).items()}
        object.__setattr__(self, "matmul_flops_per_s_by_dtype", MappingProxyType(by_dtype))
        object.__setattr__(self, "chapters", MappingProxyType(chapters))

    def __hash__(self) -> int:
        return hash((self.kind, self.name, self.device, self.device_name, self.created_at))

    @property
    def is_prediction(self) -> bool:
        """True for spec-sheet numbers: nothing was measured."""
        return self.kind == "prediction"

    @property
    def label(self) -> str:
        """The name as the class sees it; predictions say so."""
        if self.is_prediction and "prediction" not in self.name.lower():
            return f"{self.name} (prediction)"
        return self.name

    def ridge_point_flops_per_byte(self) -> float:
        """``matmul_flops_per_s / mem_bandwidth_bytes_per_s``: below it, memory-bound."""
        return self.matmul_flops_per_s / self.mem_bandwidth_bytes_per_s

    def to_dict(self) -> dict[str, Any]:
        """The JSON layout of the module docstring (``path`` is not stored)."""
        return {
            "schema": SCHEMA,
            "schema_version": self.schema_version,
            "kind": self.kind,
            "name": self.name,
            "created_at": self.created_at,
            "machine": {
                "host": self.host,
                "device": self.device,
                "device_name": self.device_name,
                "num_threads": self.num_threads,
                "torch_version": self.torch_version,
                "brrrlib_version": self.brrrlib_version,
            },
            "ceilings": {
                "dtype": self.dtype,
                "matmul_flops_per_s": self.matmul_flops_per_s,
                "vector_flops_per_s": self.vector_flops_per_s,
                "mem_bandwidth_bytes_per_s": self.mem_bandwidth_bytes_per_s,
                "op_overhead_s": self.op_overhead_s,
                "matmul_flops_per_s_by_dtype": dict(self.matmul_flops_per_s_by_dtype),
                "noisy": self.noisy,
                "measured_at": self.measured_at,
            },
            "ridge_point_flops_per_byte": self.ridge_point_flops_per_byte(),
            "source": self.source,
            "chapters": {k: dict(v) for k, v in self.chapters.items()},
        }

    def to_json(self) -> str:
        """``to_dict()`` as indented JSON with a final newline (the file's exact text)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "report") -> Report:
        """Validate a decoded JSON file and build the Report; errors name ``where`` and the field."""
        return _parse(data, where)

    def _cells(self) -> list[str]:
        return [
            self.label,
            self.kind,
            f"{self.device} ({self.device_name})",
            _fmt_flops(self.matmul_flops_per_s),
            _fmt_flops(self.vector_flops_per_s),
            _fmt_bytes_per_s(self.mem_bandwidth_bytes_per_s),
            "n/a" if self.op_overhead_s is None else _fmt_s(self.op_overhead_s),
            f"{self.ridge_point_flops_per_byte():.3g}",
            ", ".join(sorted(self.chapters)) or "-",
        ]

    def __repr__(self) -> str:
        cells = dict(zip(_COLUMNS, self._cells(), strict=True))
        noisy = ", NOISY" if self.noisy else ""
        return (
            f"Report({cells['machine']}: {cells['device']}{noisy}; matmul {cells['matmul']}, "
            f"bandwidth {cells['bandwidth']}, overhead {cells['op overhead']}, "
            f"ridge {cells['ridge (FLOP/B)']} FLOP/byte; {self.kind})"
        )

    def _repr_html_(self) -> str:
        return reports_table([self])._repr_html_()


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- making reports


def _library_version() -> str:
    import brrrlib

    return str(getattr(brrrlib, "__version__", ""))


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _check_extra(extra: Any) -> dict[str, Any]:
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise TypeError(
            f"extra must be a dict of name -> number/text, e.g. {{'knee_repeat': 16}}; "
            f"got {type(extra).__name__}"
        )
    clean = {}
    for key, value in extra.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"extra: keys must be non-empty strings, got {key!r}")
        if not isinstance(value, _EXTRA_TYPES) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            raise TypeError(
                f"extra[{key!r}] must be a finite number, text or bool (it goes into JSON); "
                f"got {value!r} of type {type(value).__name__}: pass e.g. float(x) or t.median_s"
            )
        clean[key] = value
    return clean


def _check_chapter(chapter: Any) -> str | None:
    if chapter is None:
        return None
    if isinstance(chapter, bool) or not isinstance(chapter, (int, str)):
        raise TypeError(f"chapter must be a chapter number like 2 or '02', got {chapter!r}")
    text = str(chapter).strip()
    if text.isdigit():
        return f"{int(text):02d}"
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", text):
        raise ValueError(f"chapter={chapter!r}: use a chapter number like 2 or '02'")
    return text


def from_ceilings(
    ceilings: Any,
    *,
    name: str | None = None,
    chapters: Mapping[str, Mapping[str, Any]] | None = None,
) -> Report:
    """A measurement :class:`Report` from :class:`~brrrlib.devices.Ceilings` (pure, writes nothing).

    ``name`` defaults to the host name recorded in the ceilings. The class
    results notebook uses it to put the instructor's own machine beside the
    class: ``from_ceilings(bl.measure_ceilings(), name="instructor")``.
    """
    needed = ("device", "device_name", "matmul_flops_per_s", "mem_bandwidth_bytes_per_s")
    missing = [a for a in needed if not hasattr(ceilings, a)]
    if missing:
        raise TypeError(
            f"ceilings must be what bl.measure_ceilings() returns; "
            f"{type(ceilings).__name__} has no {', '.join(missing)}"
        )
    host = getattr(ceilings, "host", "") or socket.gethostname()
    label = name if name is not None else host
    if not isinstance(label, str) or not label.strip():
        raise ValueError("name must be a non-empty string, e.g. name='ada' (what the class sees)")
    return Report(
        kind="measurement",
        name=label.strip(),
        device=ceilings.device,
        device_name=ceilings.device_name,
        matmul_flops_per_s=float(ceilings.matmul_flops_per_s),
        vector_flops_per_s=float(ceilings.vector_flops_per_s),
        mem_bandwidth_bytes_per_s=float(ceilings.mem_bandwidth_bytes_per_s),
        op_overhead_s=float(ceilings.op_overhead_s),
        dtype=getattr(ceilings, "dtype", "fp32"),
        matmul_flops_per_s_by_dtype={
            k: float(v)
            for k, v in dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {})).items()
            if v and k != getattr(ceilings, "dtype", "fp32")
        },
        noisy=bool(getattr(ceilings, "noisy", False)),
        host=host,
        num_threads=getattr(ceilings, "num_threads", None),
        torch_version=getattr(ceilings, "torch_version", ""),
        brrrlib_version=getattr(ceilings, "library_version", "") or _library_version(),
        created_at=_now(),
        measured_at=getattr(ceilings, "measured_at", None) or None,
        source=f"bl.measure_ceilings() on {host}",
        chapters=chapters or {},
    )


def prediction_from_spec(spec: Any, *, name: str | None = None) -> Report:
    """A *prediction* :class:`Report` from a spec-sheet row (``bl.spec("T4")``): nothing measured.

    The roofs are the sheet's peaks: ``matmul_flops_per_s`` and
    ``vector_flops_per_s`` are both the fp32 (no tensor core) peak, the
    tensor-core peaks go in ``matmul_flops_per_s_by_dtype``, the bandwidth is
    the sheet's. A sheet says nothing about per-op overhead, so
    ``op_overhead_s`` is None. Real hardware reaches perhaps 60-90% of these
    numbers; the point of a prediction is the shape (where the ridge is), and
    its name says it is one. ``created_at`` is None, so the same spec always
    gives the same file (the shipped examples are checked against this).
    """
    for attr in ("name", "peak_flops_per_s", "mem_bandwidth_bytes_per_s"):
        if not hasattr(spec, attr):
            raise TypeError(
                f"spec must be a spec-sheet row such as bl.spec('T4'); "
                f"{type(spec).__name__} has no {attr}"
            )
    peaks = dict(spec.peak_flops_per_s)
    if name is None:
        name = f"{spec.name} (prediction from spec sheet)"
    return Report(
        kind="prediction",
        name=name,
        device="cuda" if str(getattr(spec, "kind", "gpu")).startswith("gpu") else "cpu",
        device_name=spec.name,
        matmul_flops_per_s=float(peaks["fp32"]),
        vector_flops_per_s=float(peaks["fp32"]),
        mem_bandwidth_bytes_per_s=float(spec.mem_bandwidth_bytes_per_s),
        op_overhead_s=None,
        dtype="fp32",
        matmul_flops_per_s_by_dtype={k: float(v) for k, v in peaks.items() if k != "fp32"},
        source=f"spec sheet: {spec.source}",
    )


def _default_filename(rep: Report) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{rep.name}-{rep.device}").strip("_.")
    return f"{stem or 'machine'}.json"


def report(
    path: str | Path | None = None,
    *,
    chapter: int | str | None = None,
    name: str | None = None,
    extra: Mapping[str, Any] | None = None,
    ceilings: Any = None,
) -> Path:
    """Save this machine's ceilings (and a chapter's measurements) for the class; returns the path.

    Measures nothing new by default: :func:`brrrlib.measure_ceilings` reads its
    on-disk cache (chapter 00 filled it). The file (format in the module
    docstring) goes to ``path``; a folder, or None for ``./brrr-results/``,
    gets ``<name>-<device>.json``. ``name`` is what the class sees (default:
    the host name; pick a nickname if the host name says more than you want).
    Without ``path`` and ``name``, an earlier report of this machine in
    ``./brrr-results/`` is continued under its name.

    ``chapter`` with ``extra`` records a chapter's own numbers, e.g.
    ``bl.report(chapter=2, extra={"knee_repeat": 16})``. Reporting again from
    the same machine to the same file updates the ceilings and *keeps* the
    other chapters' numbers, so one file per machine collects the whole
    course. Hand the file to the instructor (see course/INSTRUCTORS.md).
    """
    chapter_key = _check_chapter(chapter)
    extras = _check_extra(extra)
    if extras and chapter_key is None:
        raise ValueError("extra needs chapter=, e.g. bl.report(chapter=2, extra={...})")
    if ceilings is None:
        from brrrlib.ceilings import measure_ceilings

        ceilings = measure_ceilings()
    rep = from_ceilings(ceilings, name=name)

    if path is None:
        target = DEFAULT_FOLDER / _default_filename(rep)
        if name is None:
            # Without a name, continue this machine's earlier report (say, one made
            # with name="ada" in chapter 00) rather than start a second file.
            earlier = _reports_of_this_machine(DEFAULT_FOLDER, rep)
            if len(earlier) == 1:
                target = earlier[0].path
                rep = replace(rep, name=earlier[0].name)
    else:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"path must be a str, a Path or None, got {type(path).__name__}")
        target = Path(path)
        if target.is_dir() or str(path).endswith(("/", "\\")):
            target = target / _default_filename(rep)
        elif target.suffix != ".json":
            raise ValueError(f"path={str(path)!r}: give a folder or a file name ending in .json")

    chapters: dict[str, dict[str, Any]] = {}
    if target.exists():
        previous = _read(target)  # raises a clear error on a damaged or foreign file
        same = (previous.kind, previous.device, previous.device_name) == (
            rep.kind,
            rep.device,
            rep.device_name,
        )
        if not same:
            raise ValueError(
                f"path={str(target)!r} holds the report of another machine "
                f"({previous.label}: {previous.device_name}); choose another path or name="
            )
        chapters = {k: dict(v) for k, v in previous.chapters.items()}
    if chapter_key is not None:
        chapters.setdefault(chapter_key, {}).update(extras)
    rep = replace(rep, chapters=chapters)

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(rep.to_json(), encoding="utf-8")
    tmp.replace(target)
    return target


def _reports_of_this_machine(folder: Path, rep: Report) -> list[Report]:
    """The readable reports in ``folder`` made on the same host and device as ``rep``."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            other = _read(path)
        except ValueError:
            continue  # not ours to judge here; load_reports names bad files
        if (other.kind, other.host, other.device, other.device_name) == (
            rep.kind,
            rep.host,
            rep.device,
            rep.device_name,
        ):
            found.append(other)
    return found


def write_predictions(
    folder: str | Path, names: Iterable[str] = ("T4", "A100", "H100")
) -> list[Path]:
    """Write :func:`prediction_from_spec` files for spec-table devices into ``folder``.

    This is how ``course/instructor/example_results/`` is made (a test checks
    the shipped files equal what this writes today)::

        python -c "from brrrlib.classroom import write_predictions as w; w('course/instructor/example_results')"
    """
    from brrrlib.devices import spec

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for device_name in names:
        rep = prediction_from_spec(spec(device_name))
        path = folder / ("prediction-" + _default_filename(replace(rep, name=rep.device_name)))
        path.write_text(rep.to_json(), encoding="utf-8")
        written.append(path)
    return written


# --------------------------------------------------------------------------- reading reports


def _get(data: Mapping, key: str, where: str, types: tuple, *, nullable: bool = False) -> Any:
    if key not in data:
        raise ValueError(f"{where}: missing field {key!r}")
    value = data[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        want = " or ".join(t.__name__ for t in types) + (" or null" if nullable else "")
        raise ValueError(f"{where}: field {key!r} must be {want}, got {value!r}")
    return value


def _parse(data: Any, where: str) -> Report:
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ValueError(
            f"{where}: not a brrr report (field 'schema' is {data.get('schema')!r}, "
            f"expected {SCHEMA!r}); files come from bl.report()"
        )
    version = _get(data, "schema_version", where, (int,))
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"{where}: schema_version {version} is newer than this brrrlib understands "
            f"({SCHEMA_VERSION}); upgrade brrrlib (pip install -U brrrlib)"
        )
    if version < 1:
        raise ValueError(f"{where}: schema_version must be >= 1, got {version}")
    number = (int, float)
    machine = _get(data, "machine", where, (dict,))
    ceil = _get(data, "ceilings", where, (dict,))
    chapters = _get(data, "chapters", where, (dict,))
    for key, values in chapters.items():
        if not isinstance(values, dict):
            raise ValueError(f"{where}: chapters[{key!r}] must be an object of name -> value")
        for k, v in values.items():
            if not isinstance(v, _EXTRA_TYPES):
                raise ValueError(
                    f"{where}: chapters[{key!r}][{k!r}] must be a number, text or bool"
                )
    m, c = f"{where}: machine", f"{where}: ceilings"
    by_dtype = _get(ceil, "matmul_flops_per_s_by_dtype", c, (dict,))
    try:
        rep = Report(
            kind=_get(data, "kind", where, (str,)),
            name=_get(data, "name", where, (str,)),
            created_at=_get(data, "created_at", where, (str,), nullable=True),
            source=_get(data, "source", where, (str,)),
            host=_get(machine, "host", m, (str,)),
            device=_get(machine, "device", m, (str,)),
            device_name=_get(machine, "device_name", m, (str,)),
            num_threads=_get(machine, "num_threads", m, (int,), nullable=True),
            torch_version=_get(machine, "torch_version", m, (str,)),
            brrrlib_version=_get(machine, "brrrlib_version", m, (str,)),
            dtype=_get(ceil, "dtype", c, (str,)),
            matmul_flops_per_s=_get(ceil, "matmul_flops_per_s", c, number),
            vector_flops_per_s=_get(ceil, "vector_flops_per_s", c, number),
            mem_bandwidth_bytes_per_s=_get(ceil, "mem_bandwidth_bytes_per_s", c, number),
            op_overhead_s=_get(ceil, "op_overhead_s", c, number, nullable=True),
            matmul_flops_per_s_by_dtype=by_dtype,
            noisy=_get(ceil, "noisy", c, (bool,)),
            measured_at=_get(ceil, "measured_at", c, (str,), nullable=True),
            chapters=chapters,
            schema_version=version,
        )
    except (TypeError, ValueError) as exc:
        if str(exc).startswith(where):
            raise
        raise ValueError(f"{where}: {exc}") from None
    stored_ridge = data.get("ridge_point_flops_per_byte")
    if stored_ridge is not None and not math.isclose(
        stored_ridge, rep.ridge_point_flops_per_byte(), rel_tol=1e-6
    ):
        raise ValueError(
            f"{where}: ridge_point_flops_per_byte {stored_ridge!r} does not equal "
            f"matmul / bandwidth = {rep.ridge_point_flops_per_byte():.6g}: the file was edited "
            f"by hand; write it again with bl.report()"
        )
    return rep


def _read(path: Path) -> Report:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); ask for the file again") from None
    return replace(_parse(data, str(path)), path=path)


def load_reports(folder: str | Path, *, strict: bool = True) -> list[Report]:
    """Read every ``*.json`` report in ``folder`` (and its subfolders), validated.

    Returns :class:`Report` objects sorted measurements first, then by name.
    With ``strict=True`` (default) the first bad file raises a ``ValueError``
    naming the file and the field; ``strict=False`` skips bad files with a
    warning that lists them, so one broken upload does not stop a class.
    """
    if not isinstance(folder, (str, Path)):
        raise TypeError(f"folder must be a str or Path, got {type(folder).__name__}")
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(
            f"folder={str(folder)!r} is not a folder; put the learners' brrr-results/*.json "
            f"files in one folder and pass its path"
        )
    files = sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        raise ValueError(
            f"folder={str(folder)!r} holds no *.json files; learners write them with "
            f"bl.report() (into ./brrr-results/)"
        )
    reports, bad = [], []
    for path in files:
        try:
            reports.append(_read(path))
        except ValueError as exc:
            if strict:
                raise
            bad.append(str(exc))
    if bad:
        import warnings

        warnings.warn(f"skipped {len(bad)} unreadable report(s):\n" + "\n".join(bad), stacklevel=2)
    if not reports:
        raise ValueError(f"folder={str(folder)!r}: no readable report among {len(files)} files")
    return sorted(reports, key=lambda r: (r.is_prediction, r.name.lower(), r.device))


# --------------------------------------------------------------------------- showing a class

_COLUMNS = (
    "machine",
    "kind",
    "device",
    "matmul",
    "vector",
    "bandwidth",
    "op overhead",
    "ridge (FLOP/B)",
    "chapters",
)


def _fmt_flops(x: float) -> str:
    return f"{x / 1e12:.3g} TFLOP/s" if x >= 1e12 else f"{x / 1e9:.3g} GFLOP/s"


def _fmt_bytes_per_s(x: float) -> str:
    return f"{x / 1e12:.3g} TB/s" if x >= 1e12 else f"{x / 1e9:.3g} GB/s"


def _fmt_s(x: float) -> str:
    for scale, unit in ((1, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x / 1e-9:.3g} ns"


@dataclass(frozen=True)
class ReportTable:
    """A table of reports, one row per machine; renders as text and HTML."""

    reports: tuple[Report, ...]

    def rows(self) -> list[list[str]]:
        """The table's cells, as strings, one list per report (columns: ``_COLUMNS``)."""
        return [r._cells() for r in self.reports]

    def __repr__(self) -> str:
        rows = [list(_COLUMNS), *self.rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(line.rstrip() for line in lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in _COLUMNS)
        body = []
        for rep, cells in zip(self.reports, self.rows(), strict=True):
            style = " style='font-style:italic'" if rep.is_prediction else ""
            tds = "".join(f"<td>{html.escape(c)}</td>" for c in cells)
            body.append(f"<tr{style}>{tds}</tr>")
        note = (
            "<caption style='caption-side:bottom;text-align:left'><small>italic rows are "
            "spec-sheet predictions, not measurements</small></caption>"
            if any(r.is_prediction for r in self.reports)
            else ""
        )
        return f"<table>{note}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _check_reports(reports: Any) -> tuple[Report, ...]:
    if isinstance(reports, Report):
        reports = [reports]
    if not isinstance(reports, Sequence) or not reports:
        raise ValueError("reports: give a non-empty list of reports, e.g. load_reports(folder)")
    for r in reports:
        if not isinstance(r, Report):
            raise TypeError(f"reports must hold Report objects, got {type(r).__name__}")
    return tuple(reports)


def reports_table(reports: Sequence[Report]) -> ReportTable:
    """One row per report: ceilings, ridge point, which chapters it carries; predictions marked."""
    return ReportTable(_check_reports(reports))


def plot_reports(
    reports: Sequence[Report], *, ax: Any = None, dtype: str = "fp32", title: str | None = None
) -> Any:
    """Every report's roofs on one roofline (:func:`brrrlib.roofline.plot`); returns the Axes.

    Each machine gets its matmul roof (solid), its vector roof (dashed) and
    its ridge point; predictions are labelled "(prediction)". The ridge
    points are the lesson: the same workload is memory-bound on one machine
    and compute-bound on another. ``dtype`` other than ``"fp32"`` plots only
    the reports that carry that matmul peak (GPUs, predictions).
    """
    from brrrlib import roofline

    chosen = _check_reports(reports)
    if dtype != "fp32":
        chosen = tuple(r for r in chosen if dtype in r.matmul_flops_per_s_by_dtype)
        if not chosen:
            raise ValueError(f"dtype={dtype!r}: no report carries a {dtype} matmul peak")
    # A prediction is a spec sheet: drawn as one (one roof per dtype), a measurement as
    # measured Ceilings (matmul roof and the lower, dashed vector roof).
    devices = [
        _SpecView(r.label, {"fp32": r.matmul_flops_per_s, **r.matmul_flops_per_s_by_dtype},
                  r.mem_bandwidth_bytes_per_s)
        if r.is_prediction
        else replace(r, name=r.label)
        for r in chosen
    ]  # fmt: skip
    n_measured = sum(not r.is_prediction for r in chosen)
    if title is None:
        title = (
            f"the class on one roofline ({dtype}): {n_measured} measured, "
            f"{len(chosen) - n_measured} predicted"
        )
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(10, 4.8), layout="constrained")
    ax = roofline.plot(devices, ax=ax, dtype=dtype, title=title)
    # A class has many machines: the legend goes beside the plot, not over the lines.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


@dataclass(frozen=True)
class _SpecView:
    """A prediction seen as a spec-sheet row, the shape :func:`brrrlib.roofline.plot` reads."""

    name: str
    peak_flops_per_s: Mapping[str, float]
    mem_bandwidth_bytes_per_s: float
