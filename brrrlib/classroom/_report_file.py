"""The class report file: read it safely, check each field against its dataclass's type."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from brrrlib import _checks, _fmt
from brrrlib.ceilings import Ceilings
from brrrlib.hardware import DeviceSpec

SCHEMA, SCHEMA_VERSION = "brrr-report", 2
#: A report is about 2 KB; a file over this size is not one and is not read.
MAX_REPORT_BYTES = 256 * 2**10
#: What a chapter's numbers may be: ``{"02": {"knee_repeat": 16}}``.
VALUES = Mapping[str, bool | int | float | str]
CHAPTERS = Mapping[str, VALUES]
#: Spec-sheet fields a prediction stores (the rest of a DeviceSpec is lookup plumbing).
SPEC_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(DeviceSpec)
    if f.compare and f.name not in ("aliases", "notes")
)
_NAMES = {float: "a finite number", Mapping: "an object", tuple: "a list", type(None): "null"}


def read_json(path: Path, root: Path) -> Any:
    """``path``'s JSON: a plain file of at most MAX_REPORT_BYTES, never a link out of ``root``."""
    real = path.resolve()
    if not real.is_relative_to(root.resolve()):
        raise ValueError(f"{path}: a link to {real}, outside the class folder; not followed")
    try:
        info = os.stat(real)  # a fifo named x.json would block the kernel: never opened
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REPORT_BYTES:
            raise ValueError(f"not a file within the {MAX_REPORT_BYTES:,}-byte limit")
        with open(real, "rb") as f:
            raw = f.read(MAX_REPORT_BYTES)  # grown since: cut short, not valid JSON
        # a 400-digit integer or a NaN becomes a float the field's check refuses by name
        return json.loads(raw.decode(), parse_int=lambda d: int(d) if len(d) <= 18 else float(d))
    except (OSError, ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"{path}: {type(exc).__name__}: {_fmt.error_line(exc)}") from None


def check(value: Any, hint: Any, where: str) -> Any:
    """``value`` if it is JSON of type ``hint``: float finite, Mapping[str, T] an object, tuple a list."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and isinstance(value, (list, tuple)):
        return tuple(check(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin is Mapping and isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: check(v, args[1], f"{where}[{k!r}]") for k, v in value.items()}
    kinds = args if origin in (typing.Union, types.UnionType) else (origin or hint,)
    if not any(_fits(value, kind) for kind in kinds) or origin in (tuple, Mapping):
        names = " or ".join(_NAMES.get(k, getattr(k, "__name__", "")) for k in kinds)
        raise ValueError(f"{where} must be {names}, got {value!r:.60}")
    return value


def _fits(value: Any, kind: type) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is float:
        return number and math.isfinite(value)
    return number and isinstance(value, int) if kind is int else isinstance(value, kind)


def record(cls: type, data: Any, where: str, names: tuple[str, ...] = ()) -> Any:
    """``cls(**data)``, each field checked against ``cls``'s declared types."""
    hints = typing.get_type_hints(cls)
    check(data, Mapping[str, object], where)
    if unknown := sorted(set(data) - set(names or hints)):  # written by a newer brrrlib
        raise ValueError(f"{where}: unknown field(s) {unknown}: pip install -U brrrlib")
    fields = {k: check(v, hints[k], f"{where}: field {k!r}") for k, v in data.items()}
    try:
        return cls(**fields)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def parse(data: Any) -> dict[str, Any]:
    """A decoded report file as the Report's fields."""
    head = (data.get("schema"), data.get("schema_version")) if isinstance(data, dict) else None
    if head != (want := (SCHEMA, SCHEMA_VERSION)):  # not a report, or an older brrrlib's
        raise ValueError(f"schema, schema_version {head!r:.60}, not {want}: re-run bl.report()")
    kind = _checks.one_of("field 'kind'", data.get("kind"), ("measurement", "prediction"))
    try:
        if kind == "measurement":
            machine = record(Ceilings, data["ceilings"], "ceilings")
        else:
            machine = record(DeviceSpec, data["spec"], "spec", SPEC_FIELDS)
        name, chapters, created_at = data["name"], data["chapters"], data["created_at"]
    except KeyError as exc:
        raise ValueError(f"missing field {exc}") from None
    key = "ridge_point_flops_per_byte"  # stored for readers without brrrlib
    ridge = check(data.get(key), float | None, key)
    if ridge is not None and abs(ridge / machine.ridge_point_flops_per_byte() - 1) > 1e-6:
        raise ValueError(f"{key} {ridge!r} is not matmul / bandwidth: edited by hand")
    return {
        "name": check(name, str, "name"),
        "machine": machine,
        "chapters": chapters,  # Report checks them
        "created_at": check(created_at, str | None, "created_at"),
        "notes": check(data.get("notes", []), tuple[str, ...], "notes"),
    }
