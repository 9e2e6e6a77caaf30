"""The class report file: read it safely, check every field, know both schema versions."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from brrrlib.ceilings import Ceilings
from brrrlib.hardware import DeviceSpec

__all__ = [
    "MAX_REPORT_BYTES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "V1_VECTOR_METHOD",
    "chapter_key",
    "check_chapters",
    "extras",
    "parse",
    "read_json",
    "spec_to_dict",
]

SCHEMA = "brrr-report"
SCHEMA_VERSION = 2
"""Version of the JSON layout written now. Bump it when a field changes meaning or is
removed; :func:`parse` refuses files newer than it understands."""

MAX_REPORT_BYTES = 256 * 2**10
"""A report is about 2 KB; a file over this size (256 KiB) is not one and is not read."""

#: The longest integer literal read as an integer; longer ones become floats (or inf).
_MAX_INT_DIGITS = 18
#: Spec-sheet fields a prediction stores (the rest of a DeviceSpec is lookup plumbing).
_SPEC_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(DeviceSpec)
    if f.compare and f.name not in ("aliases", "notes")
)
#: A chapter measurement: a finite number, text or a bool (it goes into JSON).
_SCALAR = bool | int | float | str

V1_VECTOR_METHOD = "fused multiply-adds, halved to one FLOP per operation (schema 1)"
"""How schema-1 reports measured the vector ceiling (FMAs, two FLOPs each): read, it is
halved to the course's one FLOP per operation (an FMA unit does one multiply per slot)."""

_V1_NOTES = {
    "vector": "vector ceiling measured on fused multiply-adds (two FLOPs each) and halved "
    "when read, to the course's one FLOP per operation",
    "overhead": "op overhead measured on a + b with a fresh output, not the in-place floor",
    "noisy": "flagged noisy when measured (schema 1 kept no per-ceiling spread)",
}


# ------------------------------------------------------------------ reading the bytes


def read_json(path: Path, root: Path) -> Any:
    """The decoded JSON of ``path``, a file found under the class folder ``root``."""
    real, home = path.resolve(), root.resolve()
    if path.is_symlink() and not real.is_relative_to(home):
        raise ValueError(
            f"{path}: a link to {real}, outside the class folder {home}; not followed "
            "(copy the file into the folder instead)"
        )
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):  # a fifo named x.json would block the kernel
            raise ValueError(f"{path}: not a regular file; a report is a plain .json file")
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_REPORT_BYTES + 1)  # what it holds, not what stat said it held
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise ValueError(
            f"{path}: over the {MAX_REPORT_BYTES:,}-byte limit for a report (a real one is "
            "about 2 KB): not read"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 text (byte {exc.start} is {raw[exc.start : exc.start + 1]!r}); "
            "a report is JSON written by bl.report(): ask for the file again"
        ) from None
    return _loads(text, str(path))


def _loads(text: str, where: str) -> Any:
    """``json.loads`` that keeps numbers finite and nesting bounded; errors name ``where``."""
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to be a report") from None
    except ValueError as exc:  # JSONDecodeError and the refusals below
        raise ValueError(f"{where}: not valid JSON ({exc}); ask for the file again") from None


def _parse_int(digits: str) -> int | float:
    # A 400-digit integer is no measurement: as a float it becomes inf, which the field
    # checks refuse by name (as an int it would overflow deep inside the arithmetic).
    return int(digits) if len(digits.lstrip("-")) <= _MAX_INT_DIGITS else float(digits)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a report can hold")


# ------------------------------------------------------------------ checking fields


def _check(value: Any, hint: Any, where: str) -> Any:
    """``value`` if it has the declared type ``hint`` (str, int, float, bool, a chapter value,
    Mapping[str, T] as a JSON object, tuple[T, ...] as a JSON list).
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where} must be a list of {_name(args[0])}, got {_short(value)}")
        return tuple(_check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin is not None and issubclass(origin, Mapping):
        if not isinstance(value, Mapping):
            raise ValueError(f"{where} must be an object of name -> {_name(args[1])}")
        return {
            _check(k, str, f"{where} key"): _check(v, args[1], f"{where}[{k!r}]")
            for k, v in value.items()
        }
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    finite = not number or math.isfinite(value)
    fits = {
        float: number and finite,
        int: number and isinstance(value, int),
        _SCALAR: isinstance(value, _SCALAR) and finite,
    }.get(hint, hint in (str, bool, dict) and isinstance(value, hint))
    if not fits:
        raise ValueError(f"{where} must be {_name(hint)}, got {_short(value)}")
    return float(value) if hint is float else value


def _name(hint: Any) -> str:
    names = {float: "a finite number", _SCALAR: "a finite number, text or bool"}
    return names.get(hint) or getattr(hint, "__name__", str(hint))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _build(cls: type, data: Any, where: str, allowed: tuple[str, ...] | None = None) -> Any:
    """``cls(**data)`` after checking each key against ``cls``'s declared field types."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be an object, got {type(data).__name__}")
    hints = {k: v for k, v in typing.get_type_hints(cls).items() if allowed is None or k in allowed}
    unknown = sorted(set(data) - set(hints))
    if unknown:
        raise ValueError(
            f"{where}: unknown field(s) {', '.join(map(repr, unknown[:5]))} "
            "(written by a newer brrrlib? upgrade: pip install -U brrrlib)"
        )
    fields = {k: _check(v, hints[k], f"{where}: field {k!r}") for k, v in data.items()}
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def _field(data: Mapping, key: str, where: str, hint: Any, nullable: bool = False) -> Any:
    if key not in data:
        raise ValueError(f"{where}: missing field {key!r}")
    if data[key] is None and nullable:
        return None
    return _check(data[key], hint, f"{where}: field {key!r}")


def check_chapters(chapters: Any, where: str) -> dict[str, dict[str, Any]]:
    """Chapter measurements: ``{"02": {"knee_repeat": 16}}``, values finite numbers, text, bools."""
    return _check(chapters, Mapping[str, Mapping[str, _SCALAR]], f"{where}: chapters")


# ------------------------------------------------------------------ the two layouts


def parse(data: Any, where: str) -> dict[str, Any]:
    """Check a decoded report file; returns the :class:`~brrrlib.classroom.Report` fields."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ValueError(
            f"{where}: not a brrr report (field 'schema' is {_short(data.get('schema'))}, "
            f"expected {SCHEMA!r}); files come from bl.report()"
        )
    version = _field(data, "schema_version", where, int)
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"{where}: schema_version {version} is newer than this brrrlib understands "
            f"({SCHEMA_VERSION}); upgrade brrrlib (pip install -U brrrlib)"
        )
    if version < 1:
        raise ValueError(f"{where}: schema_version must be >= 1, got {version}")
    kind = _field(data, "kind", where, str)
    if kind not in ("measurement", "prediction"):
        raise ValueError(
            f"{where}: field 'kind' must be 'measurement' or 'prediction', got {kind!r}"
        )
    fields = {
        "name": _field(data, "name", where, str),
        "created_at": _field(data, "created_at", where, str, nullable=True),
        "chapters": check_chapters(_field(data, "chapters", where, dict), where),
        "schema_version": version,
    }
    parse_layout = _parse_v1 if version == 1 else _parse_v2
    fields["machine"], fields["notes"] = parse_layout(data, kind, where)
    _check_ridge(data, fields["machine"], where)
    return fields


def _parse_v2(data: dict, kind: str, where: str) -> tuple[Ceilings | DeviceSpec, tuple]:
    notes = _check(data.get("notes", []), tuple[str, ...], f"{where}: field 'notes'")
    if kind == "measurement":
        return _build(Ceilings, _field(data, "ceilings", where, dict), f"{where}: ceilings"), notes
    return _spec(_field(data, "spec", where, dict), f"{where}: spec"), notes


def _parse_v1(data: dict, kind: str, where: str) -> tuple[Ceilings | DeviceSpec, tuple]:
    """Schema 1: ``machine`` and ``ceilings`` objects with a flat copy of a few fields."""
    m, c = f"{where}: machine", f"{where}: ceilings"
    machine = _field(data, "machine", where, dict)
    ceil = _field(data, "ceilings", where, dict)
    if _field(ceil, "dtype", c, str) != "fp32":
        raise ValueError(f"{c}: field 'dtype' must be 'fp32' (schema 1 measured fp32 only)")
    by_dtype = _field(ceil, "matmul_flops_per_s_by_dtype", c, Mapping[str, float])
    numbers = {
        k: _field(ceil, k, c, float)
        for k in ("matmul_flops_per_s", "vector_flops_per_s", "mem_bandwidth_bytes_per_s")
    }
    device, name = _field(machine, "device", m, str), _field(machine, "device_name", m, str)
    if kind == "prediction":
        spec = {
            "name": name,
            "mem_bandwidth_bytes_per_s": numbers["mem_bandwidth_bytes_per_s"],
            "peak_flops_per_s": {"fp32": numbers["matmul_flops_per_s"], **by_dtype},
            "mem_bytes": 0,
            "vendor": "",  # schema 1 kept neither
            "source": _field(data, "source", where, str).removeprefix("spec sheet: "),
            "kind": "gpu" if device == "cuda" else device,
        }
        return _spec(spec, c), ()
    overhead = _field(ceil, "op_overhead_s", c, float, nullable=True)
    if overhead is None:
        raise ValueError(f"{c}: field 'op_overhead_s': a measurement must include it")
    numbers["vector_flops_per_s"] /= 2  # FMA = 2 FLOPs then; one FLOP per operation now
    ceilings = {
        **numbers,
        "op_overhead_s": overhead,
        "device": device,
        "device_name": name,
        "matmul_flops_per_s_by_dtype": by_dtype,
        "vector_method": V1_VECTOR_METHOD,
        "num_threads": _field(machine, "num_threads", m, int, nullable=True) or 1,
        "torch_version": _field(machine, "torch_version", m, str),
        "library_version": _field(machine, "brrrlib_version", m, str),
        "host": _field(machine, "host", m, str),
        "measured_at": _field(ceil, "measured_at", c, str, nullable=True) or "",
    }
    notes = [_V1_NOTES["vector"], _V1_NOTES["overhead"]]
    if _field(ceil, "noisy", c, bool):
        notes.append(_V1_NOTES["noisy"])
    return _build(Ceilings, ceilings, c), tuple(notes)


def _spec(fields: dict, where: str) -> DeviceSpec:
    """A prediction's spec-sheet row, every roof and the bandwidth checked positive."""
    spec = _build(DeviceSpec, fields, where, allowed=_SPEC_FIELDS)
    if min(*spec.peak_flops_per_s.values(), spec.mem_bandwidth_bytes_per_s) <= 0:
        raise ValueError(
            f"{where}: fields peak_flops_per_s and mem_bandwidth_bytes_per_s must be positive"
        )
    return spec


def _check_ridge(data: dict, machine: Ceilings | DeviceSpec, where: str) -> None:
    """The stored fp32 ridge point (for readers without brrrlib) must match the numbers."""
    if data.get("ridge_point_flops_per_byte") is None:
        return
    stored = _field(data, "ridge_point_flops_per_byte", where, float)
    ridge = machine.ridge_point_flops_per_byte("fp32")
    if not math.isclose(stored, ridge, rel_tol=1e-6):
        raise ValueError(
            f"{where}: ridge_point_flops_per_byte {stored!r} does not equal matmul / bandwidth "
            f"= {ridge:.6g}: the file was edited by hand; write it again with bl.report()"
        )


def spec_to_dict(spec: DeviceSpec) -> dict[str, Any]:
    """The spec-sheet fields a prediction file stores (schema 2's ``"spec"``)."""
    out = {name: getattr(spec, name) for name in _SPEC_FIELDS}
    out["peak_flops_per_s"] = dict(spec.peak_flops_per_s)
    return out


# ------------------------------------------------------------------ writing


def chapter_key(chapter: Any) -> str | None:
    """``2`` or ``"2"`` -> ``"02"``: the key a chapter's numbers are stored under."""
    if chapter is None:
        return None
    if isinstance(chapter, bool) or not isinstance(chapter, (int, str)):
        raise TypeError(f"chapter must be a chapter number like 2 or '02', got {chapter!r}")
    text = str(chapter).strip()
    if text.isdigit() and len(text) <= 3:
        return f"{int(text):02d}"
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,20}", text):
        raise ValueError(f"chapter={chapter!r}: use a chapter number like 2 or '02'")
    return text


def extras(extra: Any) -> dict[str, Any]:
    """A chapter's own numbers as given to ``bl.report(extra=...)``, checked for JSON."""
    if extra is None:
        return {}
    if not isinstance(extra, Mapping):
        raise TypeError(
            f"extra must be a dict of name -> number/text, e.g. {{'knee_repeat': 16}}; "
            f"got {type(extra).__name__}"
        )
    try:
        checked = _check(extra, Mapping[str, _SCALAR], "extra")
    except ValueError as exc:  # the learner's argument: a TypeError, and what to pass
        raise TypeError(f"{exc} (it goes into JSON): pass e.g. float(x) or t.median_s") from None
    if "" in checked:
        raise TypeError("extra: keys must be non-empty strings")
    return checked
