"""How much longer does B take than A? Paired, interleaved rounds, with an interval.

Two separate benchmarks can disagree by more than the effect you are looking
for: the machine was busier during one of them. :func:`compare` times two
workloads in alternating rounds (A B, then B A, then A B ...) so that whatever
the machine does meanwhile hits both alike, takes the ratio round by round,
and reports the median ratio with a distribution-free confidence interval
(:func:`brrrlib._fmt.median_interval`). While the interval is too wide it
measures more rounds, within a time budget; if it stays too wide it says
"too noisy to tell" and draws no conclusion. Every ratio the course shows a
learner comes from here: batch x2, eager vs fused, a remedy's speed-up.

It is built from :mod:`brrrlib.timing`'s pieces: the same first call,
estimate, blocks of calls, and dropping of samples the OS disturbed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, devices, timing
from brrrlib.timing import (
    _MAX_SAMPLES,
    _MIN_BLOCK_S,
    Timing,
    _disturbed,
    _estimate,
    _first_call,
    _measure_blocks,
    _NoGC,
)

__all__ = ["COMPARE_TOLERANCE", "Comparison", "compare"]

#: The interval of a comparison is "decided" when it lies within this factor
#: of its ratio on both sides (x1.93 in [x1.80, x2.05] passes at 10%).
COMPARE_TOLERANCE = 0.1
#: Fewer undisturbed rounds than this never decide: 6 is the least for a 95% interval.
_MIN_DECIDING_ROUNDS = 6
#: On a CPU, the calling thread running less than this share of the time means it waited.
WAITED_SHARE = 0.8
#: A comparison takes at least this many rounds: with 10, the 95% interval of
#: the median is the 2nd smallest to the 2nd largest ratio.
_MIN_ROUNDS = 10


@dataclass(frozen=True, repr=False)
class Comparison:
    """How much longer B takes than A, from rounds measured alternately.

    Made by :func:`compare`. ``ratios`` holds one ``B time / A time`` per
    round; ``ratio`` is their median and ``low``/``high`` the distribution-free
    confidence interval of that median (:func:`brrrlib._fmt.median_interval`,
    95% by default). ``decided`` says whether the interval is narrow enough
    (within ``tolerance`` of the ratio on each side) to draw a conclusion
    from; when it is not, :meth:`says` does not pretend: "too noisy to tell".
    ``a`` and ``b`` are each side's :class:`Timing` (one sample per kept
    round), for plotting them as points.

    Ask it questions with the interval, not the point estimate:
    ``above(1.7)`` is true only when the whole interval is above 1.7.
    """

    a: Timing
    b: Timing
    ratios: tuple[float, ...]
    confidence: float = 0.95
    tolerance: float = COMPARE_TOLERANCE
    rounds_dropped: int = 0
    cpu_share: float | None = None
    all_disturbed: bool = False

    @property
    def waited(self) -> bool:
        """True when the calls spent their time waiting for cores another program held.

        On a CPU, ``cpu_share`` is the share of the wall time the calling thread
        ran (median over the rounds): a parallel op whose other thread was
        descheduled waits at a barrier for whole scheduler slices, so its time
        says nothing about the op. Also true when every round was disturbed.
        """
        return self.all_disturbed or (self.cpu_share is not None and self.cpu_share < WAITED_SHARE)

    @property
    def ratio(self) -> float:
        """B's time over A's: the median of the per-round ratios."""
        return _fmt.median(self.ratios)

    @property
    def interval(self) -> tuple[float, float]:
        """``(low, high)``: where the true ratio lies, at ``confidence``."""
        return _fmt.median_interval(self.ratios, self.confidence)

    @property
    def low(self) -> float:
        """The lower end of :attr:`interval`."""
        return self.interval[0]

    @property
    def high(self) -> float:
        """The upper end of :attr:`interval`."""
        return self.interval[1]

    @property
    def speedup(self) -> float:
        """A's time over B's (``1 / ratio``): how many times faster B is."""
        return 1.0 / self.ratio

    @property
    def decided(self) -> bool:
        """True when the interval lies within ``tolerance`` of the ratio on both sides,
        at least 6 undisturbed rounds back it, and the calls did not wait for cores."""
        r, (lo, hi) = self.ratio, self.interval
        narrow = lo >= r / (1 + self.tolerance) and hi <= r * (1 + self.tolerance)
        return narrow and len(self.ratios) >= _MIN_DECIDING_ROUNDS and not self.waited

    def above(self, x: float) -> bool:
        """True when the whole interval lies above ``x``: B takes more than x times A."""
        return self.low > x

    def below(self, x: float) -> bool:
        """True when the whole interval lies below ``x``."""
        return self.high < x

    def says(self, what: str = "time") -> str:
        """The ratio in words: "x1.93 time (95% interval x1.88-x2.01)", or "too noisy to tell"."""
        lo, hi = self.interval
        span = f"x{lo:.2f}-x{hi:.2f}"
        if self.waited:
            return (
                f"too noisy to tell ({span}): the calls waited for cores another program "
                "holds; close other programs or press re-measure"
            )
        if not self.decided:
            return f"too noisy to tell ({span}); close other programs or press re-measure"
        return f"x{self.ratio:.2f} {what} ({self.confidence:.0%} interval {span})"

    def __repr__(self) -> str:
        la, lb = self.a.label or "A", self.b.label or "B"
        return (
            f"Comparison({lb} / {la}: {self.says()}; {len(self.ratios)} rounds, "
            f"{self.rounds_dropped} disturbed dropped; A {_fmt.seconds(self.a.median_s)}, "
            f"B {_fmt.seconds(self.b.median_s)}, {self.a.device})"
        )


def compare(
    a: Callable[[], Any],
    b: Callable[[], Any],
    *,
    budget_s: float = 2.0,
    tolerance: float = COMPARE_TOLERANCE,
    confidence: float = 0.95,
    warmup_s: float = 0.05,
    device: str | torch.device | None = None,
    labels: tuple[str, str] | None = None,
    min_rounds: int = _MIN_ROUNDS,
) -> Comparison:
    """Time ``b()`` against ``a()`` in alternating rounds: the ratio with an interval.

    Two separate benchmarks can disagree by more than the effect you are
    looking for: the machine was busier during one of them. Measured in
    rounds that alternate (A B, then B A, then A B ...), both sides meet the
    same machine, and the per-round ratio cancels what they share. The method:

    1. **First call and estimate** of each side, as :func:`benchmark` does;
       calls per block so that each block lasts about 1 ms or more.
    2. **Warm-up** both for ``warmup_s``.
    3. **Rounds**: one block of each, alternating which goes first. Rounds in
       which either side was disturbed (see :func:`benchmark`, step 5) are
       dropped.
    4. **Stop** after at least 10 kept rounds once the 95% interval of the
       median ratio lies within ``tolerance`` (10%) of it, or when
       ``budget_s`` is spent. A quiet machine decides in a few dozen
       milliseconds; a busy one uses the budget and may still say "too noisy
       to tell" (``Comparison.decided`` is False): then no conclusion.

    ``a`` and ``b`` are called without arguments: pass ``lambda: f(x)`` or
    ``functools.partial(f, x)``. ``device`` is where they run (default: the
    device of a ``partial``'s tensor arguments, else :func:`brrrlib.device`).
    ``min_rounds`` (default 10) can be lowered for calls that take seconds;
    with fewer than 6 rounds the interval is (min, max), which covers less
    than 95%.

    Example::

        >>> c = bl.compare(lambda: model(x[:16]), lambda: model(x[:32]))  # doctest: +SKIP
        >>> c.ratio, c.interval, c.decided                                 # doctest: +SKIP
        (1.08, (1.05, 1.11), True)
    """
    _checks.function("a", a)
    _checks.function("b", b)
    budget_s = _checks.seconds("budget_s", budget_s, zero_ok=False)
    warmup_s = _checks.seconds("warmup_s", warmup_s, zero_ok=True)
    if not (isinstance(tolerance, (int, float)) and 0 < tolerance < 10):
        raise ValueError(f"tolerance must be a fraction such as 0.1, got {tolerance!r}")
    if not (isinstance(confidence, (int, float)) and 0.5 <= confidence < 1):
        raise ValueError(f"confidence must be between 0.5 and 1 (e.g. 0.95), got {confidence!r}")
    dev = _infer_callable_device(a, b) if device is None else devices.resolve(device)
    devices.check_available(dev, "device")
    la, lb = labels if labels is not None else ("A", "B")
    if isinstance(min_rounds, bool) or not isinstance(min_rounds, int) or min_rounds < 2:
        raise ValueError(f"min_rounds must be a whole number >= 2, got {min_rounds!r}")

    sides = []
    for name, call in (("a", a), ("b", b)):  # 1. first call and estimate
        _first_call(call, dev, name)
        per_call_s, _spent = _estimate(call, dev, None)
        sides.append((call, per_call_s, max(1, math.ceil(_MIN_BLOCK_S / per_call_s))))
    with _NoGC():
        for call, per_call_s, _number in sides:  # 2. warm-up
            for _ in range(math.ceil(warmup_s / 2 / per_call_s)):
                call()
        devices.sync(dev)
        rounds_a, rounds_b = _rounds(sides, dev, budget_s, tolerance, confidence, min_rounds)
    flags = [x or y for x, y in zip(_disturbed(rounds_a), _disturbed(rounds_b), strict=True)]
    kept = [i for i, bad in enumerate(flags) if not bad] or list(range(len(flags)))
    ta = [rounds_a[i][0] for i in kept]
    tb = [rounds_b[i][0] for i in kept]
    shares = [min(rounds_a[i][1], rounds_b[i][1]) for i in kept if rounds_a[i][1] is not None]
    return Comparison(
        a=Timing(samples_s=ta, device=str(dev), label=la, calls_per_sample=sides[0][2]),
        b=Timing(samples_s=tb, device=str(dev), label=lb, calls_per_sample=sides[1][2]),
        ratios=tuple(y / x if x > 0 else math.inf for x, y in zip(ta, tb, strict=True)),
        confidence=confidence,
        tolerance=tolerance,
        rounds_dropped=len(flags) - len(kept),
        cpu_share=_fmt.median(shares) if shares and dev.type == "cpu" else None,
        all_disturbed=all(flags),
    )


def _rounds(sides, dev, budget_s, tolerance, confidence, min_rounds):
    """3. and 4.: alternate one block of each side until decided or out of budget."""
    deadline = timing._CLOCKS[0]() + budget_s
    rounds_a: list[tuple[float, float | None]] = []
    rounds_b: list[tuple[float, float | None]] = []
    (call_a, _, n_a), (call_b, _, n_b) = sides
    while True:
        for _ in range(min_rounds if not rounds_a else 4):
            first_a = len(rounds_a) % 2 == 0
            for is_a in (first_a, not first_a):
                call, n, out = (call_a, n_a, rounds_a) if is_a else (call_b, n_b, rounds_b)
                out += _measure_blocks(call, dev, None, n, 1)
        flags = [x or y for x, y in zip(_disturbed(rounds_a), _disturbed(rounds_b), strict=True)]
        ratios = [
            rb[0] / ra[0]
            for ra, rb, bad in zip(rounds_a, rounds_b, flags, strict=True)
            if not bad and ra[0] > 0
        ]
        shares = [min(ra[1], rb[1]) for ra, rb in zip(rounds_a, rounds_b, strict=True)
                  if ra[1] is not None and dev.type == "cpu"]  # fmt: skip
        ran = not shares or _fmt.median(shares) >= WAITED_SHARE  # else: waited, try more
        done = len(ratios) >= min_rounds and ran and _narrow(ratios, tolerance, confidence)
        if done or timing._CLOCKS[0]() >= deadline or len(rounds_a) >= _MAX_SAMPLES:
            return rounds_a, rounds_b


def _narrow(ratios: Sequence[float], tolerance: float, confidence: float) -> bool:
    r = _fmt.median(ratios)
    lo, hi = _fmt.median_interval(ratios, confidence)
    return lo >= r / (1 + tolerance) and hi <= r * (1 + tolerance)


def _infer_callable_device(*fns: Any) -> torch.device:
    """The device of a ``functools.partial``'s first tensor argument, else bl.device()."""
    for fn in fns:
        if isinstance(fn, functools.partial):
            for v in (fn.func, *fn.args, *fn.keywords.values()):
                if isinstance(v, (torch.Tensor, torch.nn.Module, list, tuple)):
                    return devices.of((v,))
    return devices.device()
