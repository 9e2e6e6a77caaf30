"""Honest timing: warm-up, sync, repeats by time budget, disturbed samples dropped."""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, machine

__all__ = ["Comparison", "Timing", "benchmark", "compare", "settle_threads"]

#: A timing whose IQR is over this fraction of its median is noisy (torch's _IQR_WARN_THRESHOLD).
NOISY_IQR_RATIO = 0.1
# A CPU sample times a block of calls at least this long: the clock's ~0.1 µs is below 1e-4.
_MIN_BLOCK_S = 1e-3
# At least this many samples (a 1 s call then takes ~5 s), never more than the second.
_MIN_SAMPLES, _MAX_SAMPLES = 5, 10_000
# The estimate doubles its calls until they take this long; a call this long (second) is
# estimated once: a time slice lost to another program (a few ms) cannot make it that slow.
_ESTIMATE_S, _SLOW_ESTIMATE_S = 1e-3, 0.1
# The one disturbance check: a sample is disturbed when the OS took the CPU away from it,
# 1. its thread's CPU seconds over wall seconds fell below WAITED_SHARE of a quiet sample's
#    (only where quiet samples run above it: below, the calls waited anyway and say so),
# 2. or it lasted more than this many times the median (a 4 ms slice on top of a 1 ms block).
_DISTURBED_TIME_FACTOR = 3.0
#: On a CPU, the calling thread running less than this share of the time means it waited.
WAITED_SHARE = 0.8
#: A parallel op this many times slower on k threads than on one (and 1 ms or more) stalls.
STALL_RATIO = 4.0
# Replacements for dropped samples take at most this many times the budget, after it.
_REPLACE_BUDGET_FACTOR = 2.0
# Wall time and this thread's CPU time (tests put fake clocks here).
_CLOCKS: tuple[Callable[[], float], Callable[[], float]] = (time.perf_counter, time.thread_time)


@dataclass(frozen=True, repr=False)
class Timing:
    """The result of :func:`benchmark`: every per-call sample in seconds, and robust summaries."""

    samples_s: tuple[float, ...]  # per call: a block's time over its calls_per_sample
    device: str
    label: str | None = None
    calls_per_sample: int = 1
    flush_cache: bool = False
    cuda_graph: bool = False
    dropped_s: tuple[float, ...] = ()  # disturbed samples (step 5), replaced: not in samples_s
    cpu_share: float | None = None  # the calling thread's CPU seconds over wall seconds (CPU)

    def __post_init__(self) -> None:
        samples = tuple(_checks.seconds("samples_s", s, zero_ok=True) for s in self.samples_s)
        _checks.some("samples_s", samples, "(1e-3,)")
        _checks.positive_int("calls_per_sample", self.calls_per_sample)
        object.__setattr__(self, "samples_s", samples)
        object.__setattr__(self, "dropped_s", tuple(map(float, self.dropped_s)))

    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the samples (0 <= q <= 1), interpolated as ``numpy.quantile``."""
        return _fmt.quantile(self.samples_s, q)

    @property
    def median_s(self) -> float:
        """Median per-call seconds: the number to quote."""
        return self.quantile(0.5)

    @property
    def min_s(self) -> float:
        """Fastest per-call seconds seen (best case, nothing interfering)."""
        return min(self.samples_s)

    @property
    def iqr_s(self) -> float:
        """Interquartile range in seconds: the 75th minus the 25th percentile."""
        return _fmt.iqr(self.samples_s)

    @property
    def relative_iqr(self) -> float:
        """``iqr_s / median_s``: spread as a fraction of the typical value."""
        return self.iqr_s / self.median_s if self.median_s > 0 else math.inf

    @property
    def noisy(self) -> bool:
        """True when the IQR is more than ``NOISY_IQR_RATIO`` of the median."""
        return self.relative_iqr > NOISY_IQR_RATIO

    @property
    def calls(self) -> int:
        """Total number of timed calls kept (samples x calls per sample)."""
        return len(self.samples_s) * self.calls_per_sample

    @property
    def dropped(self) -> int:
        """How many disturbed samples were dropped and replaced."""
        return len(self.dropped_s)

    def _row(self) -> tuple[str, ...]:
        s, flags = _fmt.seconds, ("flush_cache", "cuda_graph")  # the arguments it was timed with
        iqr = f"{s(self.iqr_s)} ({self.relative_iqr:.0%}){' NOISY' if self.noisy else ''}"
        n = f"{len(self.samples_s)} x {self.calls_per_sample}"
        where = ", ".join([self.device, *(f for f in flags if getattr(self, f))])
        return (self.label or "", s(self.median_s), iqr, s(self.min_s), n, str(self.dropped), where)

    def __repr__(self) -> str:
        return _fmt.text_table(_TIMING_HEADER, [self._row()], align="lrrrrr")

    def _repr_html_(self) -> str:
        return _fmt.html_table(_TIMING_HEADER, [self._row()], align="lrrrrr")


_TIMING_HEADER = ("timing", "median", "IQR", "min", "samples x calls", "dropped", "device")


# ------------------------------------------------------------------ benchmark


def benchmark(
    fn: Callable[..., Any],
    *args: Any,
    budget_s: float = 0.2,
    warmup_s: float = 0.05,
    flush_cache: bool = False,
    cuda_graph: bool = False,
    device: str | torch.device | None = None,
    label: str | None = None,
    min_samples: int = _MIN_SAMPLES,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)`` honestly and return a :class:`Timing`.

    The method (triton's ``do_bench``, plus blocks of calls on the CPU):

    1. **First call**, untimed: it may compile, allocate or load libraries.
    2. **Estimate**: time 1, 2, 4, ... calls until they take ~1 ms (twice, keeping the
       smaller): the cost of one call, and already warm-up.
    3. **Warm-up** for ``warmup_s`` seconds more (caches, clocks, allocator).
    4. **Measure** for ``budget_s`` seconds, 5 samples at least. Each sample times a *block*
       of calls lasting ~1 ms, so the clock's own ~0.1 µs is amortised (as in
       ``torch.utils.benchmark``). On CUDA ``torch.cuda.Event`` pairs bracket the blocks and
       the device is synchronised once, after them all; on the CPU ``time.perf_counter``
       brackets each. The garbage collector is off, as in ``timeit``.
    5. **Drop disturbed samples** and measure replacements (for at most twice the budget):
       one during which this thread got much less CPU time than usual, or that took over 3x
       the median (a time slice went to another program). They are kept in ``dropped_s``.

    A block measures the *throughput* of back-to-back calls: on a GPU the kernels' time if
    Python queues them faster than they run, else Python's (chapter 03's launch overhead).

    Keywords (pass one meant for ``fn`` with ``functools.partial``): ``budget_s`` and
    ``warmup_s``, as above; ``flush_cache``: write a buffer larger than the last-level cache
    before every call (untimed; one call per sample); ``cuda_graph``: time replays of ``fn``
    captured in a ``torch.cuda.CUDAGraph`` (no Python or launch overhead); ``device``: where
    ``fn`` runs (default: its first tensor argument's, else :func:`brrrlib.device`);
    ``label``: its name in the table; ``min_samples``: lower it for calls of seconds.

    Example::

        >>> a = torch.randn(1024, 1024)
        >>> bl.benchmark(torch.mm, a, a, label="mm 1024").median_s     # doctest: +SKIP
        0.0115
    """
    _checks.function("fn", fn)
    budget_s = _checks.seconds("budget_s", budget_s, zero_ok=False)
    warmup_s = _checks.seconds("warmup_s", warmup_s, zero_ok=True)
    _checks.kind("label", label, (str, type(None)), "a str or None")
    min_samples = _checks.positive_int("min_samples", min_samples)
    dev = machine.of(args, kwargs) if device is None else machine.resolve(device)
    machine.check_available(dev, "device")
    if cuda_graph:
        _need_cuda(dev)
    flush = _no_flush
    if flush_cache:  # fill a buffer over the last-level cache (256 MB on CUDA, as triton)
        llc = 2**28 if dev.type == "cuda" else max(4 * machine.last_level_cache_bytes(dev), 2**25)
        flush = functools.partial(torch.empty(llc, dtype=torch.uint8, device=dev).fill_, 1)
    # functools.partial calls fn from C: no extra Python frame per call, so a
    # 1 µs op costs what it costs in the learner's own loop.
    call = functools.partial(fn, *args, **kwargs)
    # 1. first call (compilation, allocation) and 2. the estimate.
    _first_call(call, dev)
    if cuda_graph:
        call = _capture_cuda_graph(call, dev)
    per_call_s, spent_s = _estimate(call, dev, flush)
    # Calls per sample: enough for a ~1 ms block, 1 when flushing caches.
    number = 1 if flush_cache else max(1, math.ceil(_MIN_BLOCK_S / per_call_s))
    n_samples = int(min(_MAX_SAMPLES, max(min_samples, budget_s // (per_call_s * number))))
    with _no_gc():
        # 3. warm-up for what is left of warmup_s.
        for _ in range(max(0, math.ceil((warmup_s - spent_s) / per_call_s))):
            flush()
            call()
        machine.sync(dev)
        # 4. measure, and 5. replace disturbed samples.
        kept, dropped = _measure_until_undisturbed(
            lambda n: _measure_blocks(call, dev, flush, number, n),
            n_samples,
            min(min_samples, n_samples),
            deadline=_CLOCKS[0]() + (1 + _REPLACE_BUDGET_FACTOR) * budget_s,
        )
    shares = [share for _, share in kept if share is not None]
    samples, dropped_s = [s for s, _ in kept], tuple(s for s, _ in dropped)
    share = _fmt.median(shares) if shares else None
    return Timing(samples, str(dev), label, number, flush_cache, cuda_graph, dropped_s, share)


def quick_s(call: Callable[[], Any], device: torch.device, budget_s=0.03, graph=False) -> float:
    """A short benchmark's median; ``graph``: on CUDA, of ~1 ms of calls in one graph (no gaps)."""
    time = functools.partial(benchmark, budget_s=budget_s, warmup_s=0, device=device, min_samples=3)
    if not graph or device.type != "cuda":
        return time(call).median_s
    once = time(call, budget_s=1e-6, min_samples=1).median_s
    calls = max(1, min(1000, int(1e-3 / max(once, 1e-9))))

    def batch() -> None:
        for _ in range(calls):
            call()

    return time(batch, cuda_graph=True).median_s / calls


def _measure_until_undisturbed(measure, n_samples: int, min_kept: int, deadline: float):
    """5.: ``n_samples`` samples, disturbed ones replaced until the deadline; (kept, dropped)."""
    samples = measure(n_samples)
    while True:
        flags = _disturbed(samples)
        missing = n_samples - (len(samples) - sum(flags))
        if missing <= 0 or _CLOCKS[0]() >= deadline or len(samples) >= _MAX_SAMPLES:
            break
        samples += measure(missing)
    if len(samples) - sum(flags) < min_kept:  # a machine busy all along: keep the fastest
        fastest = sorted(range(len(samples)), key=lambda i: samples[i][0])[:min_kept]
        flags = [i not in fastest for i in range(len(samples))]
    kept = [x for x, bad in zip(samples, flags, strict=True) if not bad]
    return kept, [x for x, bad in zip(samples, flags, strict=True) if bad]


def _disturbed(samples: Sequence[tuple[float, float | None]]) -> list[bool]:
    """The one disturbance check: which samples the OS disturbed (the constants at the top)."""
    shares = [share for _s, share in samples if share is not None]
    # disturbance only lowers a share: the undisturbed reference is a high one
    quiet_share = _fmt.quantile(shares, 0.9) if shares else 0.0
    check_share = quiet_share >= WAITED_SHARE
    typical_s = _fmt.median([s for s, _share in samples])
    return [
        (check_share and share is not None and share < WAITED_SHARE * quiet_share)
        or s > _DISTURBED_TIME_FACTOR * typical_s
        for s, share in samples
    ]


def rounds(
    calls: Mapping[str, Callable[[], Any]],
    device: torch.device,
    n: int,
    samples: int = 3,
    *,
    warm: bool = False,
    warmup_s: float = 0.0,
    until: Callable[[dict, dict, float], bool] | None = None,
) -> tuple[dict[str, list[tuple[float, float | None]]], dict[str, int]]:
    """Alternating rounds: per call, each round's (seconds, CPU share); its calls per block."""
    plans = {}  # steps 1 and 2 for each call: (calls per ~1 ms block, seconds a call)
    for name, call in calls.items():
        if not warm:
            _first_call(call, device, name)
        per_call_s, _ = _estimate(call, device, _no_flush)
        plans[name] = (max(1, math.ceil(_MIN_BLOCK_S / per_call_s)), per_call_s)
    got, numbers = {k: [] for k in calls}, {k: number for k, (number, _) in plans.items()}
    order = list(calls)  # reversed each round (A B, B A, ...): a slow phase meets all alike
    with _no_gc():
        for name, (_, per_call_s) in plans.items():  # warm-up (none for calls longer than it)
            for _ in range(int(warmup_s / len(plans) / per_call_s)):
                calls[name]()
        machine.sync(device)
        start = _CLOCKS[0]()
        for _ in range(n):
            for name in order:  # a round's value: its undisturbed blocks' median
                blocks = _measure_blocks(calls[name], device, _no_flush, plans[name][0], samples)
                quiet = [b for b, bad in zip(blocks, _disturbed(blocks), strict=True) if not bad]
                shares = [share for _, share in quiet if share is not None]
                share = min(1.0, _fmt.median(shares)) if shares else None
                got[name].append((_fmt.median([s for s, _ in quiet]), share))
            order.reverse()
            if until is not None and until(got, numbers, _CLOCKS[0]() - start):
                break
    return got, numbers


@functools.cache
def settle_threads() -> str:
    """Run on as many threads as do not stall, once per process; what it printed, or ""."""
    threads = torch.get_num_threads()
    if threads < 2:
        return ""
    add = functools.partial(torch.ones(2**19).add_, torch.zeros(1))  # 2 MiB: 16 of torch's grains
    on = {k: lambda k=k: (torch.set_num_threads(k), add()) for k in range(threads, 0, -1)}
    got, _ = rounds(on, torch.device("cpu"), n=3, samples=1)
    took = {k: _fmt.median([s for s, _ in v]) for k, v in got.items()}
    keep = next(k for k, s in took.items() if s < max(1e-3, STALL_RATIO * took[1]))  # 1 passes
    torch.set_num_threads(keep)
    if keep == threads:
        return ""
    took = ", ".join(f"{_fmt.seconds(took[k])} on {k}" for k in (threads, 1))
    print(said := f"a core is busy (a 2 MiB add took {took} threads): running on {keep}")
    return said


def _measure_blocks(call, dev, flush, number, n_samples) -> list[tuple[float, float | None]]:
    """``n_samples`` blocks of ``number`` calls as (seconds per call, CPU share or None on CUDA)."""
    if dev.type == "cuda":  # events around each block, one synchronize after them all
        events = [[torch.cuda.Event(enable_timing=True) for _ in "se"] for _ in range(n_samples)]
        for start, end in events:
            flush()
            start.record()
            for _ in range(number):
                call()
            end.record()
        torch.cuda.synchronize(dev)
        return [(start.elapsed_time(end) / 1e3 / number, None) for start, end in events]
    wall, cpu = _CLOCKS
    samples = []
    for _ in range(n_samples):
        flush()
        machine.sync(dev)
        c0, t0 = cpu(), wall()
        for _ in range(number):
            call()
        machine.sync(dev)
        elapsed = max(wall() - t0, 1e-12)
        samples.append((elapsed / number, (cpu() - c0) / elapsed))
    return samples


def _estimate(
    call: Callable[[], None], dev: torch.device, flush: Callable[[], Any]
) -> tuple[float, float]:
    """Per-call seconds (flush included) from doubling blocks of calls, and the time spent."""
    clock = _CLOCKS[0]
    best, spent = math.inf, 0.0
    for attempt in range(2):
        if attempt and best >= _SLOW_ESTIMATE_S:  # one call of 0.1 s is no preempted slice
            break
        n = 1
        while True:
            machine.sync(dev)
            t0 = clock()
            for _ in range(n):
                flush()
                call()
            machine.sync(dev)
            elapsed = clock() - t0
            spent += elapsed
            if elapsed >= _ESTIMATE_S or n >= 2**20:
                break
            n *= 2
        best = min(best, max(elapsed / n, 1e-9))
    return best, spent


def _need_cuda(dev: torch.device) -> None:
    if dev.type != "cuda":
        raise ValueError(f"cuda_graph=True needs a CUDA device, fn runs on {dev.type!r}: drop it")


def _capture_cuda_graph(call: Callable[[], None], dev: torch.device) -> Callable[[], None]:
    """``call``'s CUDA graph replay, warmed up on a side stream (as the torch docs say)."""
    stream = torch.cuda.Stream(device=dev)
    stream.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream(dev).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    torch.cuda.synchronize(dev)
    return graph.replay


# ------------------------------------------------------------------ helpers


def _first_call(call: Callable[[], Any], dev: torch.device, name: str = "fn") -> None:
    """The first, untimed call; a lost CUDA context (a device-side assert) is said in words."""
    try:
        _checks.ran(name, call())
        machine.sync(dev)
    except Exception as err:
        if type(err).__name__ == "AcceleratorError" or "device-side assert" in str(err):
            why = "a device-side assert lost the CUDA context: restart the kernel, fix the index"
            raise RuntimeError(f"{why} ({_fmt.error_line(err)})") from err
        raise


def _no_flush() -> None:
    pass


@contextlib.contextmanager
def _no_gc():
    """The garbage collector off while timing (timeit does the same)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ------------------------------------------------------------------ compare

#: A comparison's interval is "narrow" when it lies within this factor of its
#: ratio on both sides (x1.93 in [x1.80, x2.05] passes at 10%).
COMPARE_TOLERANCE = 0.1
#: Fewer undisturbed rounds than this never decide: 6 is the least for a 95% interval.
_MIN_DECIDING_ROUNDS = 6
#: A comparison takes at least this many rounds: with 10, the 95% interval of
#: the median is the 2nd smallest to the 2nd largest ratio.
_MIN_ROUNDS = 10
#: What ``direction`` and ``versus`` answer when the interval cannot decide.
CANT_TELL = "can't tell"


@dataclass(frozen=True, repr=False)
class Comparison:
    """How much longer B takes than A, from rounds measured alternately (made by :func:`compare`)."""

    a: Timing  # one sample per kept round
    b: Timing
    ratios: tuple[float, ...]  # B time / A time, one per round
    confidence: float = 0.95
    tolerance: float = COMPARE_TOLERANCE
    rounds_dropped: int = 0
    cpu_share: float | None = None
    all_disturbed: bool = False

    @property
    def waited(self) -> bool:
        """True when the calls waited for cores another program held, or no round was quiet."""
        return self.all_disturbed or (self.cpu_share is not None and self.cpu_share < WAITED_SHARE)

    @property
    def ratio(self) -> float:
        """B's time over A's: the median of the per-round ratios."""
        return _fmt.median(self.ratios)

    @property
    def interval(self) -> tuple[float, float]:
        """``(low, high)``: where the true ratio lies, at ``confidence``."""
        return _fmt.median_interval(self.ratios, self.confidence)

    low = property(lambda self: self.interval[0], doc="``interval[0]``")
    high = property(lambda self: self.interval[1], doc="``interval[1]``")

    @property
    def speedup(self) -> float:
        """A's time over B's (``1 / ratio``): how many times faster B is."""
        return 1.0 / self.ratio

    @property
    def enough_rounds(self) -> bool:
        """At least 6 undisturbed rounds: the fewest for a 95% interval of a median."""
        return len(self.ratios) >= _MIN_DECIDING_ROUNDS

    @property
    def narrow(self) -> bool:
        """True when the interval lies within ``tolerance`` of the ratio: the size is known."""
        lo, hi, r = *self.interval, self.ratio
        return (
            self.enough_rounds and lo >= r / (1 + self.tolerance) and hi <= r * (1 + self.tolerance)
        )

    def excludes(self, x: float) -> bool:
        """True when the whole interval lies on one side of ``x`` (and enough rounds back it)."""
        return self.enough_rounds and (self.low > x or self.high < x)

    @property
    def decided(self) -> bool:
        """True when the interval excludes x1: B is known to be slower, or faster, than A."""
        return self.excludes(1.0)

    @property
    def direction(self) -> str:
        """``"slower"`` (B takes longer), ``"faster"`` (B takes less), or ``"can't tell"``."""
        if not self.decided:
            return CANT_TELL
        return "slower" if self.low > 1 else "faster"

    def versus(self, x: float) -> str:
        """``"above"``, ``"below"`` or ``"can't tell"``: ``versus(2.0)`` asks "did it double?"."""
        if not self.excludes(x):
            return CANT_TELL
        return "above" if self.low > x else "below"

    def above(self, x: float) -> bool:
        """True when the whole interval lies above ``x``: B takes more than x times A."""
        return self.low > x

    def below(self, x: float) -> bool:
        """True when the whole interval lies below ``x``."""
        return self.high < x

    def says(self, what: str = "time") -> str:
        """The result in words, as far as the interval allows: ``"x16.2 time (...): B is ..."``."""
        lo, hi = self.interval
        span = f"{self.confidence:.0%} interval {_x(lo)}-{_x(hi)}"
        caveats = []
        if self.decided and not self.narrow:
            caveats.append("a wide interval: the direction is clear, the size less so")
        if self.all_disturbed:
            caveats.append("every round was disturbed by another program")
        elif self.waited:
            caveats.append(waited_caveat(self.cpu_share))
        tail = "".join(f"; {c}" for c in caveats if c)
        if not self.enough_rounds:
            n = len(self.ratios)
            return f"can't tell from {n} round{'s' * (n != 1)} ({_x(lo)}-{_x(hi)}){tail}"
        if not self.decided:
            return f"can't tell: {_x(self.ratio)} {what} ({span} contains x1){tail}"
        slower = self.low > 1
        how = f"{_fmt.times(self.ratio if slower else self.speedup)} {('faster', 'slower')[slower]}"
        return f"{_x(self.ratio)} {what} ({span}): {self.b.label or 'B'} is {how}{tail}"

    def _rows(self) -> list[tuple[str, ...]]:
        n = str(len(self.ratios))
        return [
            (t.label or side, _fmt.seconds(t.median_s), n, str(self.rounds_dropped), t.device)
            for side, t in (("A", self.a), ("B", self.b))
        ]

    def __repr__(self) -> str:
        return self.says() + "\n" + _fmt.text_table(_COMPARISON_HEADER, self._rows(), "lrrr")

    def _repr_html_(self) -> str:
        return _fmt.html_table(_COMPARISON_HEADER, self._rows(), caption=self.says(), align="lrrr")


def waited_caveat(cpu_share: float | None) -> str:
    """What a CPU share under ``WAITED_SHARE`` means, in words ("" above it, or off the CPU)."""
    if cpu_share is None or cpu_share >= WAITED_SHARE:
        return ""
    return f"the calls waited for cores another program holds (this thread ran {cpu_share:.0%})"


_COMPARISON_HEADER = ("", "median", "rounds", "dropped", "device")


def _x(r: float) -> str:
    """A ratio as "x2.00", "x0.52", "x16.2", "x101"."""
    return f"x{r:.2f}" if r < 9.995 else f"x{r:.3g}" if r < 999.5 else f"x{r:,.0f}"


def compare(
    a: Callable[[], Any],
    b: Callable[[], Any],
    *,
    budget_s: float = 2.0,
    warmup_s: float = 0.05,
    device: str | torch.device | None = None,
    labels: tuple[str, str] | None = None,
    min_rounds: int = _MIN_ROUNDS,
    warm: bool = False,
) -> Comparison:
    """Time ``b()`` against ``a()`` in alternating rounds: the ratio with an interval.

    Two separate benchmarks can disagree by more than the effect you look for: the machine
    was busier during one. In rounds that alternate (A B, B A, A B ...) both sides meet the
    same machine, and each round's ratio cancels what they share. The method:

    1. **First call and estimate** of each side, as :func:`benchmark` does, and calls per
       block so that a block lasts ~1 ms or more.
    2. **Warm-up** both for ``warmup_s``.
    3. **Rounds**: one block of each, the first side alternating. A round in which either
       side was disturbed (:func:`benchmark`, step 5) is dropped.
    4. **Stop** after at least ``min_rounds`` kept rounds once the 95% interval of the median
       ratio lies within 10% of it (``COMPARE_TOLERANCE``), or when ``budget_s`` is spent. A
       busy machine may leave the interval wide (``narrow`` False) or around x1 ("can't
       tell": ``decided`` False); then draw no conclusion.

    ``a`` and ``b`` take no arguments (``lambda: f(x)`` or ``functools.partial(f, x)``).
    ``device``: where they run (default: a ``partial``'s tensors', else
    :func:`brrrlib.device`). Lower ``min_rounds`` for calls of seconds; under 6 rounds the
    interval is (min, max) and never decides. ``warm=True``: both already ran, so step 1's
    first call is skipped.

    Example::

        >>> c = bl.compare(lambda: model(x[:16]), lambda: model(x[:32]))  # doctest: +SKIP
        >>> c.ratio, c.interval, c.decided                                 # doctest: +SKIP
        (1.08, (1.05, 1.11), True)
    """
    _checks.function("a", a)
    _checks.function("b", b)
    budget_s = _checks.seconds("budget_s", budget_s, zero_ok=False)
    warmup_s = _checks.seconds("warmup_s", warmup_s, zero_ok=True)
    if device is None:  # the device of a partial's first tensor argument, else bl.device()
        parts = [f for f in (a, b) if isinstance(f, functools.partial)]
        device = machine.of([v for f in parts for v in (f.func, *f.args, *f.keywords.values())])
    dev = machine.resolve(device)
    labels = labels if labels is not None else ("A", "B")
    _checks.positive_int("min_rounds", min_rounds, low=2)
    on = {"a": a, "b": b}

    def measured(got: dict, numbers: Mapping[str, int]) -> Comparison:  # 3.
        flags = [x or y for x, y in zip(*(_disturbed(got[k]) for k in on), strict=True)]
        kept = [i for i, bad in enumerate(flags) if not bad] or list(range(len(flags)))
        shares = [min(got["a"][i][1], got["b"][i][1]) for i in kept if dev.type == "cpu"]
        share = _fmt.median(shares) if shares else None  # the thread's, on the CPU only
        t = {k: [got[k][i][0] for i in kept] for k in on}
        ratios = tuple(y / x if x > 0 else math.inf for x, y in zip(*t.values(), strict=True))
        ta, tb = (
            Timing(t[k], str(dev), n, numbers[k], cpu_share=share)
            for k, n in zip(on, labels, strict=True)
        )
        return Comparison(
            ta, tb, ratios, 0.95, COMPARE_TOLERANCE, len(flags) - len(kept), share, all(flags)
        )

    def enough(got: dict, numbers: Mapping[str, int], spent_s: float) -> bool:
        i = len(got["a"])  # 4., asked every 4 rounds; a comparison that waited tries more
        if i < min_rounds or (i - min_rounds) % 4:
            return False
        c = measured(got, numbers)
        return (len(c.ratios) >= min_rounds and c.narrow and not c.waited) or spent_s >= budget_s

    return measured(*rounds(on, dev, _MAX_SAMPLES, 1, warm=warm, warmup_s=warmup_s, until=enough))
