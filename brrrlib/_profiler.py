"""The one way brrrlib runs ``torch.profiler``: warmed up, marked per run, and quiet.

:func:`record` is the capture behind both ``bl.profile`` (a timeline) and
``bl.trace.time_by_category`` (seconds per op category); :func:`quiet_profiler`
keeps the profiler's own log lines and warnings out of notebooks.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["RUN_MARKER", "WARMUP_MARKER", "quiet_profiler", "record"]

#: Prefix of the ``record_function`` marker around each recorded run.
RUN_MARKER = "brrr_run_"
#: Marker around the profiler's own warm-up, before run 0: not a run.
WARMUP_MARKER = "brrr_profiler_warmup"

# Kineto's own log lines ("STAGE:2026-... ActivityProfiler...", "USDT:...", its
# config dump). Only these are dropped from what the profiler writes to stderr.
_KINETO_LINE = re.compile(
    r"^(?:(?:INFO|STAGE|USDT|WARNING|ERROR|VERBOSE):\d{4}-\d\d-\d\d .*\.cpp:\d+\]"
    r"|\s+(?:Log file|Trace start time|Trace duration|Warmup duration|Max GPU buffer size"
    r"|Enabled activities|Trace window|Warmup start time|Active start time|Max CPU buffer)"
    r".*:)"
)
# torch.profiler's Python warnings about its own machinery, not about your code.
_PROFILER_WARNINGS = (
    r".*Profiler clears events at the end of each cycle",
    r".*(?:kineto|Kineto|CUPTI)",
)


def record(fn: Callable, args: tuple, kwargs: dict, *, runs: int, warmup: int) -> Any:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler``; return the stopped profiler.

    The method, step by step:

    1. Call ``fn`` ``warmup`` times unrecorded (first calls pay one-off costs:
       allocator growth, lazy init, autotuning, compilation), then sync.
    2. Start the profiler and put work through it before any run: a device
       kernel (CUPTI sets itself up on the first one it sees, 1-40 ms on an
       H100) and, when ``warmup`` > 0, one more call of ``fn`` (first launches of
       each kernel and of a CUDA graph are slower under the profiler), all
       inside a ``brrr_profiler_warmup`` marker that is not a run.
    3. Record ``runs`` calls, each inside a ``record_function("brrr_run_<i>")``
       marker that ends with a device sync, so a run's span holds its work.
    4. Stop the profiler, even if ``fn`` raised (its error surfaces as it is).
    """
    import torch
    from torch.profiler import ProfilerActivity, record_function

    cuda = torch.cuda.is_available()
    for _ in range(warmup):  # 1.
        fn(*args, **kwargs)
    _sync(cuda)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    options = {"acc_events": True} if _accepts("acc_events") else {}
    prof = torch.profiler.profile(activities=activities, **options)
    with quiet_profiler():
        prof.start()
    try:
        with record_function(WARMUP_MARKER):  # 2.
            torch.ones(1, device="cuda").add_(1) if cuda else torch.empty(0)
            if warmup:
                fn(*args, **kwargs)
            _sync(cuda)
        for r in range(runs):  # 3.
            with record_function(f"{RUN_MARKER}{r}"):
                fn(*args, **kwargs)
                _sync(cuda)
    finally:
        with quiet_profiler():  # 4.
            prof.stop()
    return prof


def _sync(cuda: bool) -> None:
    """Wait for queued device work (CUDA, else MPS), so a run's marker ends when its work ends."""
    import torch

    from brrrlib.devices import sync

    if cuda:
        sync(torch.device("cuda"))
    elif torch.backends.mps.is_available():
        sync(torch.device("mps"))


def _accepts(option: str) -> bool:
    import torch

    return option in inspect.signature(torch.profiler.profile.__init__).parameters


@contextlib.contextmanager
def quiet_profiler():
    """Keep kineto's log lines (``STAGE:...``, ``USDT:...``) and profiler warnings out of sight.

    Kineto, the C++ profiler under ``torch.profiler``, writes straight to file
    descriptor 2, below Python, so ``contextlib.redirect_stderr`` cannot catch
    it. Two layers: ``KINETO_LOG_LEVEL=6`` silences it if set before the
    profiler first starts (kineto reads it once), and, for the case where it
    already started, fd 2 is pointed at a temporary file while the profiler
    starts/stops; afterwards every captured line that is *not* a kineto log
    line is written back to stderr, so nothing else is swallowed. The
    profiler's Python warnings about itself ("Profiler clears events at the
    end of each cycle") are filtered for the same span.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with warnings.catch_warnings():
        for message in _PROFILER_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        with _kineto_lines_dropped():
            yield


@contextlib.contextmanager
def _kineto_lines_dropped():
    try:
        fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
    except (AttributeError, OSError, ValueError):  # no real fd (embedded interpreters)
        yield
        return
    with tempfile.TemporaryFile(mode="w+b") as sink:
        if sys.__stderr__ is not None:
            sys.__stderr__.flush()
        saved = os.dup(fd)
        os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            kept = [
                line
                for line in sink.read().decode(errors="replace").splitlines(keepends=True)
                if not _KINETO_LINE.match(line)
            ]
            if kept:
                sys.stderr.write("".join(kept))
