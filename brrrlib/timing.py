"""Honest timing: warm-up, sync, repeats by time budget, disturbed samples dropped.

Timing code on an accelerator goes wrong in a few classic ways: the clock is
read before the device has finished (CUDA is asynchronous, so ``time.time()``
around a kernel launch measures the launch), the first call pays for
compilation or memory allocation, a single run is at the mercy of the
operating system, and a 1 µs operation is as long as the timer call itself.
:func:`benchmark` deals with each of them and returns a :class:`Timing` that
keeps every sample, so the spread is reported along with the median.

The algorithm is triton's ``do_bench`` (``python/triton/testing.py``): run
once, estimate the cost, derive the number of warm-up runs and timed runs from
time budgets rather than fixed counts, time with device events on CUDA, and
report quantiles. On the CPU it adds what ``torch.utils.benchmark.Timer``
does for tiny operations: time *blocks* of calls, so the timer's own cost is
amortised. And it drops samples the operating system disturbed (another
program took the core) and measures replacements, so a busy laptop gives the
number a quiet one would.

A number on its own answers "how long?"; most lessons ask "how much longer?":
:mod:`brrrlib.comparison` answers that with the same pieces. Chapter 00
introduces both; every later chapter measures through them.
"""

from __future__ import annotations

import functools
import gc
import inspect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, devices

__all__ = ["Timing", "benchmark"]

# A timing whose interquartile range exceeds this fraction of its median is
# flagged as noisy: the same 10% threshold torch.utils.benchmark warns at
# (``_IQR_WARN_THRESHOLD`` in torch/utils/benchmark/utils/common.py).
NOISY_IQR_RATIO = 0.1

# On the CPU each sample times a block of calls lasting at least this long, so
# the clock's own cost (~50-100 ns for time.perf_counter) is below 1e-4 of it.
_MIN_BLOCK_S = 1e-3

# At least this many samples, so median and IQR mean something, even when one
# call is longer than the budget (a 1 s call then takes ~5 s to benchmark).
_MIN_SAMPLES = 5

# Never more samples than this (keeps memory and CUDA event counts bounded).
_MAX_SAMPLES = 10_000

# The estimate keeps doubling the number of calls until they take this long.
_ESTIMATE_S = 1e-3

# A sample is disturbed when the OS took the CPU away from it. Two signs:
# 1. its CPU share (this thread's CPU seconds / wall seconds) fell below
#    this fraction of the typical sample's: the thread sat descheduled for a
#    while (only checked when the workload keeps the thread busy: a sample
#    that mostly waits, on a sleep or a GPU, has a low share by nature). The
#    calling thread takes part in every parallel op, so its share drops when
#    the OS takes its core; a *worker* thread's lost time shows instead as a
#    longer sample, caught by sign 2 when large. (This thread's own clock is
#    exact; the whole process's is updated in scheduler ticks of ~4 ms.)
_DISTURBED_CPU_SHARE = 0.85
_BUSY_WORKLOAD_SHARE = 0.5
# 2. it lasted more than this many times the median sample (a whole time
#    slice given to another program: 4 ms on top of a 1 ms block).
_DISTURBED_TIME_FACTOR = 3.0
# Replacements for dropped samples are measured for at most this many times
# the budget, after the budget itself.
_REPLACE_BUDGET_FACTOR = 2.0

# The clocks: wall time and this thread's CPU time. Tests replace them with
# fake clocks to check the method without a real machine.
_CLOCKS: tuple[Callable[[], float], Callable[[], float]] = (time.perf_counter, time.thread_time)


@dataclass(frozen=True, repr=False)
class Timing:
    """The result of :func:`benchmark`: every sample, plus robust summaries.

    ``samples_s`` holds *per-call* seconds. When calls were timed in blocks
    (``calls_per_sample > 1``, the usual case for operations under ~1 ms on
    the CPU) each sample is one block's time divided by its number of calls,
    so its spread is the spread of block means, smaller than the spread of
    single calls; this is what ``torch.utils.benchmark`` reports too.

    Read ``median_s`` first: the median ignores the occasional run that the
    operating system interrupted, where the mean does not. ``iqr_s`` (the
    75th minus the 25th percentile) measures the spread, and ``noisy`` says
    whether that spread is more than ``NOISY_IQR_RATIO`` (10%) of the median,
    in which case close the other programs and measure again before drawing
    conclusions from a small difference. ``min_s`` is the best the machine
    did; it is a good estimate of the cost when nothing interferes, but a
    poor one of what a user sees. ``dropped_s`` holds the samples that were
    measured while another program had the CPU (see :func:`benchmark`, step
    5): they were replaced and are not in ``samples_s``.
    """

    samples_s: tuple[float, ...]
    device: str
    label: str | None = None
    calls_per_sample: int = 1
    flush_cache: bool = False
    cuda_graph: bool = False
    dropped_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        samples = tuple(float(s) for s in self.samples_s)
        if not samples:
            raise ValueError("samples_s is empty: a Timing needs at least one sample")
        if not all(math.isfinite(s) and s >= 0 for s in samples):
            raise ValueError(f"samples_s must be finite seconds >= 0, got {samples[:5]}...")
        if int(self.calls_per_sample) < 1:
            raise ValueError(f"calls_per_sample must be >= 1, got {self.calls_per_sample}")
        object.__setattr__(self, "samples_s", samples)
        object.__setattr__(self, "dropped_s", tuple(float(s) for s in self.dropped_s))

    # -- summaries ---------------------------------------------------------
    def quantile(self, q: float) -> float:
        """The ``q``-quantile of the samples (0 <= q <= 1), linearly interpolated.

        Same convention as ``numpy.quantile``'s default and ``torch.quantile``:
        ``quantile(0.5)`` is the median, ``quantile(0.2)`` and
        ``quantile(0.8)`` are the band triton's ``do_bench`` reports.
        """
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
    def max_s(self) -> float:
        """Slowest per-call seconds kept (often an interruption)."""
        return max(self.samples_s)

    @property
    def mean_s(self) -> float:
        """Mean per-call seconds (pulled up by outliers; prefer the median)."""
        return sum(self.samples_s) / len(self.samples_s)

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

    # -- rendering ---------------------------------------------------------
    def _summary(self) -> tuple[str, str]:
        s = _fmt.seconds
        head = f"{s(self.median_s)} median"
        spread = (
            f"IQR {s(self.iqr_s)} ({self.relative_iqr:.0%}), min {s(self.min_s)}, "
            f"{len(self.samples_s)} samples x {self.calls_per_sample} call"
            f"{'s' if self.calls_per_sample > 1 else ''}, {self.device}"
        )
        extras = [
            x
            for x, on in (
                ("cache flushed", self.flush_cache),
                ("CUDA graph", self.cuda_graph),
                (f"{self.dropped} disturbed sample(s) dropped", self.dropped > 0),
            )
            if on
        ]
        if extras:
            spread += ", " + ", ".join(extras)
        if self.noisy:
            spread += (
                f"; NOISY: the spread is {self.relative_iqr:.0%} of the median (over 10%), "
                "so differences smaller than that mean nothing"
            )
        return head, spread

    def __repr__(self) -> str:
        head, spread = self._summary()
        label = f"{self.label}: " if self.label else ""
        return f"Timing({label}{head}; {spread})"

    def _repr_html_(self) -> str:
        from html import escape

        head, spread = self._summary()
        label = f"<b>{escape(self.label)}</b>: " if self.label else ""
        style = "color:var(--jp-error-color1,#b00)" if self.noisy else "opacity:0.75"
        return (
            f"<div>{label}<span style='font-size:1.2em'>{escape(head)}</span> "
            f"<span style='{style}'>{escape(spread)}</span></div>"
        )


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

    1. **First call**, untimed: it may compile (``torch.compile``), allocate
       or load libraries; none of that is the steady-state cost.
    2. **Estimate**: time 1, 2, 4, ... calls until they take ~1 ms (twice,
       keeping the smaller). This gives the cost of one call and is already
       warm-up.
    3. **Warm-up** for ``warmup_s`` seconds more (caches, clocks, allocator).
    4. **Measure** for ``budget_s`` seconds: ``budget_s / estimate`` runs,
       but at least 5. Each sample times a *block* of calls lasting about
       1 ms or more, so on a 1 µs operation the clock's own ~0.1 µs cost is
       amortised (``torch.utils.benchmark`` does the same). On CUDA a pair of
       ``torch.cuda.Event`` s brackets each block and the device is
       synchronised once at the end, never inside the timed region; on the
       CPU the clock is ``time.perf_counter``. The garbage collector is off
       while timing, as in ``timeit``.
    5. **Drop disturbed samples** and measure replacements (for at most
       twice the budget): a sample during which this thread got much less
       CPU time than usual (another program had the core), or that took
       more than 3x the median (a whole time slice went elsewhere). They are
       kept apart in ``Timing.dropped_s``.

    A block measures the *throughput* of back-to-back calls: on a GPU, if
    Python launches kernels faster than they run, the queue fills and the
    time is the kernels' time; if not (tiny kernels), the time is Python's
    and the launch overhead shows, which is chapter 03's lesson.

    Args:
        fn: the callable to time; its result is discarded.
        *args, **kwargs: passed to ``fn``. The keywords below are taken by
            ``benchmark`` itself; to pass one of them to ``fn`` use
            ``functools.partial(fn, device=...)``.
        budget_s: seconds spent in timed runs (default 0.2).
        warmup_s: seconds of warm-up runs after the estimate (default 0.05).
        flush_cache: write a buffer larger than the last-level cache before
            every call (time excluded), so each call starts with cold caches
            as in a real model where the previous layer evicted your data.
            Forces one call per sample, so below ~10 µs per call the
            clock's own ~0.1 µs starts to show in the samples.
        cuda_graph: CUDA only. Capture ``fn`` in a ``torch.cuda.CUDAGraph``
            (after warm-up on a side stream, as the torch docs prescribe) and
            time graph replays, which removes Python and launch overhead.
            ``fn`` must be capturable: static shapes, no host sync.
        device: where ``fn`` runs, for synchronisation and the report;
            default: the device of the first tensor argument, else
            :func:`brrrlib.device`.
        label: a name shown in the repr.
        min_samples: at least this many samples whatever the budget (default
            5); lower it for calls that take seconds.

    Returns:
        Timing with per-call ``samples_s``, ``median_s``, ``iqr_s``, ...

    Example::

        >>> a = torch.randn(1024, 1024)
        >>> bl.benchmark(torch.mm, a, a, label="mm 1024")     # doctest: +SKIP
        Timing(mm 1024: 11.5 ms median; IQR 0.2 ms (2%), ...)
    """
    _checks.function("fn", fn)
    budget_s = _checks.seconds("budget_s", budget_s, zero_ok=False)
    warmup_s = _checks.seconds("warmup_s", warmup_s, zero_ok=True)
    if label is not None and not isinstance(label, str):
        raise TypeError(f"label must be a str or None, got {type(label).__name__}")
    if isinstance(min_samples, bool) or not isinstance(min_samples, int) or min_samples < 1:
        raise ValueError(f"min_samples must be a whole number >= 1, got {min_samples!r}")
    dev = devices.of(args, kwargs) if device is None else devices.resolve(device)
    devices.check_available(dev, "device")
    if cuda_graph and dev.type != "cuda":
        raise ValueError(
            f"cuda_graph=True needs a CUDA device, but fn runs on {dev.type!r}; "
            "CUDA graphs exist only on NVIDIA/ROCm GPUs: drop cuda_graph=True here"
        )
    buffer = _flush_buffer(dev) if flush_cache else None
    # functools.partial calls fn from C: no extra Python frame per call, so a
    # 1 µs op costs what it costs in the learner's own loop.
    call = functools.partial(fn, *args, **kwargs)

    # 1. first call (compilation, allocation) and 2. the estimate.
    _first_call(call, dev)
    if cuda_graph:
        call = _capture_cuda_graph(call, dev)
    per_call_s, spent_s = _estimate(call, dev, buffer)
    # Calls per sample: enough for a ~1 ms block, 1 when flushing caches.
    number = 1 if flush_cache else max(1, math.ceil(_MIN_BLOCK_S / per_call_s))
    n_samples = int(min(_MAX_SAMPLES, max(min_samples, budget_s // (per_call_s * number))))
    with _NoGC():
        # 3. warm-up for what is left of warmup_s.
        for _ in range(max(0, math.ceil((warmup_s - spent_s) / per_call_s))):
            _flush(buffer)
            call()
        devices.sync(dev)
        # 4. measure, and 5. replace disturbed samples.
        kept, dropped = _measure_until_undisturbed(
            lambda n: _measure_blocks(call, dev, buffer, number, n),
            n_samples,
            min(min_samples, n_samples),
            deadline=_CLOCKS[0]() + (1 + _REPLACE_BUDGET_FACTOR) * budget_s,
        )
    return Timing(kept, str(dev), label, number, flush_cache, cuda_graph, tuple(dropped))


def _measure_until_undisturbed(
    measure: Callable[[int], list[tuple[float, float | None]]],
    n_samples: int,
    min_kept: int,
    deadline: float,
) -> tuple[list[float], list[float]]:
    """Measure ``n_samples``, then replace disturbed ones until the deadline.

    ``measure(n)`` returns ``n`` pairs ``(seconds per call, cpu share or
    None)``. Disturbance is judged against all samples so far (see
    :func:`_disturbed`), so a replacement can be dropped too.
    """
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
    kept = [s for (s, _share), bad in zip(samples, flags, strict=True) if not bad]
    dropped = [s for (s, _share), bad in zip(samples, flags, strict=True) if bad]
    return kept, dropped


def _disturbed(samples: Sequence[tuple[float, float | None]]) -> list[bool]:
    """Which samples the OS disturbed (see the constants at the top of this module).

    Disturbance only ever lowers a sample's CPU share and raises its time, so
    the reference for an undisturbed share is a high one (the 90th
    percentile: right even when most samples were disturbed), and for the
    time the median.
    """
    shares = [share for _s, share in samples if share is not None]
    quiet_share = _fmt.quantile(shares, 0.9) if shares else 0.0
    check_share = quiet_share > _BUSY_WORKLOAD_SHARE
    typical_s = _fmt.median([s for s, _share in samples])
    return [
        (check_share and share is not None and share < _DISTURBED_CPU_SHARE * quiet_share)
        or s > _DISTURBED_TIME_FACTOR * typical_s
        for s, share in samples
    ]


def _measure_blocks(call, dev, buffer, number, n_samples) -> list[tuple[float, float | None]]:
    """Time ``n_samples`` blocks of ``number`` calls: device events on CUDA, clocks elsewhere."""
    if dev.type == "cuda":
        return [(s, None) for s in _measure_cuda(call, dev, buffer, number, n_samples)]
    return _measure_host(call, dev, buffer, number, n_samples)


def _measure_host(call, dev, buffer, number, n_samples) -> list[tuple[float, float]]:
    """Blocks timed with the wall clock, each with this thread's CPU share.

    Sync at each block's end (a no-op on the CPU). The CPU share is this
    thread's CPU seconds over wall seconds: ~1 while it computes, lower when
    the OS gave its core to another program for part of the block.
    """
    wall, cpu = _CLOCKS
    samples = []
    for _ in range(n_samples):
        _flush(buffer)
        devices.sync(dev)
        c0, t0 = cpu(), wall()
        for _ in range(number):
            call()
        devices.sync(dev)
        t1, c1 = wall(), cpu()
        elapsed = max(t1 - t0, 1e-12)
        samples.append((elapsed / number, (c1 - c0) / elapsed))
    return samples


def _measure_cuda(call, dev, buffer, number, n_samples) -> list[float]:
    """Blocks bracketed by CUDA events; one synchronize after all of them.

    Events are recorded on the stream, so they time the device's work without
    stopping the host; ``elapsed_time`` is read only after the final sync.
    """
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_samples)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_samples)]
    for i in range(n_samples):
        _flush(buffer)
        starts[i].record()
        for _ in range(number):
            call()
        ends[i].record()
    torch.cuda.synchronize(dev)
    return [s.elapsed_time(e) / 1e3 / number for s, e in zip(starts, ends, strict=True)]


def _estimate(
    call: Callable[[], None], dev: torch.device, buffer: torch.Tensor | None
) -> tuple[float, float]:
    """Per-call seconds from doubling blocks of calls; also returns time spent.

    Synchronises at both ends so asynchronous devices are measured too; the
    flush (if any) is inside the loop, so the estimate covers the full cost
    of one timed run and the budget bounds the wall time. The doubling runs
    twice and the smaller estimate wins: a single slow call (lazy
    initialisation, a preempted time slice) must not make a 1 µs op look
    like a 1 ms op, or it would be timed one call at a time.
    """
    clock = _CLOCKS[0]
    best, spent = math.inf, 0.0
    for _ in range(2):
        n = 1
        while True:
            devices.sync(dev)
            t0 = clock()
            for _ in range(n):
                _flush(buffer)
                call()
            devices.sync(dev)
            elapsed = clock() - t0
            spent += elapsed
            if elapsed >= _ESTIMATE_S or n >= 2**20:
                break
            n *= 2
        best = min(best, max(elapsed / n, 1e-9))
    return best, spent


def _capture_cuda_graph(call: Callable[[], None], dev: torch.device) -> Callable[[], None]:
    """Capture ``call`` in a CUDA graph and return a function that replays it.

    Follows the torch docs (``torch.cuda.graphs``, "Whole-network capture"):
    warm up on a side stream so lazy initialisation happens outside the
    capture, then capture on that stream. Replaying launches every captured
    kernel with one call, without Python or per-kernel launch overhead.
    """
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
    """The first, untimed call; a lost CUDA context is said in words, not as a raw error.

    After a device-side assert (an index out of range inside a kernel, say)
    every later CUDA call fails too: the only way on is a fresh process.
    """
    try:
        result = call()
        devices.sync(dev)
    except Exception as err:
        text = str(err)
        if type(err).__name__ == "AcceleratorError" or "device-side assert" in text:
            raise RuntimeError(
                "the function hit a device-side assert (e.g. an index out of range inside a "
                "kernel): the CUDA context is now lost and every later GPU call will fail. "
                "Restart the kernel (Kernel > Restart), fix the index, and run again. "
                f"The original error: {text.strip().splitlines()[0] if text.strip() else err!r}"
            ) from err
        raise
    if inspect.isgenerator(result) or inspect.iscoroutine(result):
        kind = "generator" if inspect.isgenerator(result) else "coroutine"
        result.close()
        raise TypeError(
            f"{name} returned a {kind}: calling it runs nothing until it is iterated or awaited, "
            "so there would be nothing to time. Time the work itself, e.g. "
            "lambda: list(gen(...)) for a generator."
        )


def _flush_buffer(dev: torch.device) -> torch.Tensor:
    """A byte buffer larger than the last-level cache (256 MB on CUDA, as triton)."""
    if dev.type == "cuda":
        nbytes = 256 * 2**20
    else:
        nbytes = max(4 * devices.last_level_cache_bytes(dev), 32 * 2**20)
    return torch.empty(nbytes, dtype=torch.uint8, device=dev)


def _flush(buffer: torch.Tensor | None) -> None:
    # Writing every byte evicts whatever fn left in the caches.
    if buffer is not None:
        buffer.fill_(1)


class _NoGC:
    """Disable the garbage collector while timing (timeit does the same)."""

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()
