"""Shares against a same-run reference: a workload beside a kernel of its own access pattern."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, machine, timing
from brrrlib.timing import Comparison, compare

__all__ = ["Share", "share_of"]

#: The access patterns with a reference kernel (see :func:`_reference`).
PATTERNS = ("read", "copy", "update", "matmul")


@dataclass(frozen=True)
class Share:
    """A workload's rate as a share of a same-run reference kernel of its pattern."""

    label: str
    pattern: str
    reference: str
    unit: str
    work: float
    reference_work: float
    comparison: Comparison

    @property
    def rate(self) -> float:
        """The workload's work per second (its median time)."""
        return self.work / self.comparison.b.median_s

    @property
    def reference_rate(self) -> float:
        """The reference's work per second (its median time, same rounds)."""
        return self.reference_work / self.comparison.a.median_s

    @property
    def share(self) -> float:
        """Work per second of the workload over the reference's: the median of the rounds."""
        return self.work / self.reference_work / self.comparison.ratio

    @property
    def low(self) -> float:
        """The lower end of the share's 95% interval."""
        return self.work / self.reference_work / self.comparison.high

    @property
    def high(self) -> float:
        """The upper end of the share's 95% interval."""
        return self.work / self.reference_work / self.comparison.low

    @property
    def above(self) -> bool:
        """True when the whole interval lies above 1: faster than the reference, measured."""
        return self.low > 1

    def __str__(self) -> str:
        share, interval = f"{self.share:.0%}", f"{self.low:.0%}-{self.high:.0%}"
        rows = [(self.label, _fmt.si(self.rate, self.unit), share, interval)]
        rows.append((self.reference, _fmt.si(self.reference_rate, self.unit), "100%", ""))
        return _fmt.text_table(("", "rate", "share", "interval"), rows, "lrrr")

    __repr__ = __str__


def share_of(
    fn: Callable[..., Any],
    *args: Any,
    work: float,
    pattern: str,
    n: int | None = None,
    dtype: torch.dtype | None = None,
    label: str | None = None,
    budget_s: float = 1.0,
) -> Share:
    """Time ``fn(*args)`` against a reference of ``pattern`` doing ``work``, in alternating rounds."""
    _checks.function("fn", fn)
    _checks.one_of("pattern", pattern, PATTERNS)
    work = _checks.number("work", work, positive=True)
    # the device and dtype: the first tensor among the arguments, a partial's or a method's
    candidates = [*args, *getattr(fn, "args", ()), getattr(fn, "__self__", None)]
    first = next((a for a in candidates if isinstance(a, torch.Tensor)), None)
    dev = first.device if first is not None else machine.device()
    dtype = dtype or (first.dtype if first is not None else None)
    what, ref, ref_work = _reference(pattern, work, n, dtype, dev)
    job = compare(ref, functools.partial(fn, *args), budget_s=budget_s, device=dev)
    unit = "FLOP/s" if pattern == "matmul" else "B/s"
    name = label or getattr(fn, "__name__", "workload")
    return Share(name, pattern, what, unit, work, ref_work, job)


def _reference(
    pattern: str, work: float, n: int | None, dtype: torch.dtype | None, dev: torch.device
) -> tuple[str, Callable[[], Any], float]:
    """The reference as printed, its call and the work one call of it does."""
    if pattern == "matmul":
        if n is None:
            raise ValueError("pattern='matmul' needs n=: the reference multiplies n x n matrices")
        n = _checks.positive_int("n", n)
        dt = dtype if dtype is not None and dtype.is_floating_point else torch.float32
        a, b = (torch.randn(n, n, device=dev, dtype=dt) for _ in range(2))
        return f"torch.mm(n={n})", functools.partial(torch.mm, a, b), 2.0 * n**3
    per_element = 4 if pattern == "read" else 8  # fp32 bytes read, or read and written
    elements = max(int(work) // per_element, 1)
    x = torch.ones(elements, device=dev)
    if pattern == "read":
        reads = {"x.sum()": x.sum}
        if elements >= 2:
            reads["torch.dot(*x.chunk(2))"] = functools.partial(torch.dot, *x.chunk(2))
        got, _ = timing.rounds(reads, dev, n=3)  # the faster read, in alternating rounds
        best = min(got, key=lambda k: min(s for s, _ in got[k]))
        return best, reads[best], 4.0 * elements
    if pattern == "copy":
        return "out.copy_(x)", functools.partial(torch.empty_like(x).copy_, x), 8.0 * elements
    return "x.mul_(1.0)", functools.partial(x.mul_, 1.0), 8.0 * elements
