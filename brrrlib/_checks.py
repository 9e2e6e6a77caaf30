"""Checking a learner's arguments: a clear error that names the argument and says what to do."""

from __future__ import annotations

import inspect
import math
from collections.abc import Collection
from numbers import Integral, Real
from typing import Any

__all__ = [
    "divides",
    "function",
    "kind",
    "number",
    "one_of",
    "positive_int",
    "ran",
    "seconds",
    "some",
]


def divides(name: str, value: int, whole_name: str, whole: int) -> None:
    """``value`` must divide ``whole`` (heads split a model's width evenly)."""
    if whole % value:
        raise ValueError(f"{whole_name}={whole} must be divisible by {name}={value}")


def function(name: str, fn: Any) -> None:
    """``fn`` must be callable: a learner often passes ``f(x)`` (its result) for ``f``."""
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}: pass f, not f(x)")


def kind(name: str, value: Any, types: type | tuple[type, ...], what: str) -> Any:
    """``value``, if it is an instance of ``types``; ``what`` says how to make one."""
    if not isinstance(value, types):
        raise TypeError(f"{name} must be {what}, got {type(value).__name__}")
    return value


def ran(name: str, result: Any) -> Any:
    """``result``, unless it is a generator or coroutine: ``name``'s body never ran."""
    if inspect.isgenerator(result) or inspect.iscoroutine(result):
        result.close()
        kind = type(result).__name__
        raise TypeError(f"{name} returned a {kind}, which runs nothing: pass lambda: list(g())")
    return result


def one_of(name: str, value: Any, choices: Collection) -> Any:
    """``value``, if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r:.80}")
    return value


def seconds(name: str, value: Any, *, zero_ok: bool = False) -> float:
    """A finite number of seconds (any real number type, numpy's included) as a float."""
    return number(name, value, positive=not zero_ok, finite=True)


def number(name: str, value: Any, *, positive: bool, finite: bool = False) -> float:
    """A real number, >= 0 (``positive``: > 0; ``finite``: not infinite), as a float."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    bad = math.isnan(value) or value < 0 or (finite and math.isinf(value))
    if bad or (positive and value == 0):
        bound = ">" if positive else ">="
        raise ValueError(f"{name} must be a {'finite ' * finite}number {bound} 0, got {value!r}")
    return value


def positive_int(name: str, value: Any, low: int = 1, high: int | None = None) -> int:
    """A whole number from ``low`` to ``high`` (None: no top), numpy's integers too."""
    top = value if high is None else high
    if isinstance(value, bool) or not isinstance(value, Integral) or not low <= value <= top:
        span = f">= {low:,}" if high is None else f"from {low:,} to {high:,}"
        raise ValueError(f"{name} must be a whole number {span}, got {value!r}")
    return int(value)


def some(name: str, values: Any, like: str, least: int = 1) -> None:
    """``values`` must hold ``least`` items or more; ``like`` shows what to pass."""
    if len(values) < least:
        raise ValueError(f"{name} needs at least {least}, like {like}; got {len(values)}")
