"""Keep torch.profiler's C++ log lines out of notebooks (used by ``trace`` and ``counting``).

Every profiler start in brrrlib goes through :func:`quiet_profiler`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

__all__ = ["quiet_profiler"]

# Kineto's own log lines ("STAGE:2026-... ActivityProfiler...", "USDT:...", its
# config dump). Only these are dropped from what the profiler writes to stderr.
_KINETO_LINE = re.compile(
    r"^(?:(?:INFO|STAGE|USDT|WARNING|ERROR|VERBOSE):\d{4}-\d\d-\d\d .*\.cpp:\d+\]"
    r"|\s+(?:Log file|Trace start time|Trace duration|Warmup duration|Max GPU buffer size"
    r"|Enabled activities|Trace window|Warmup start time|Active start time|Max CPU buffer)"
    r".*:)"
)


@contextlib.contextmanager
def quiet_profiler():
    """Keep kineto's log lines (``STAGE:...``, ``USDT:...``) out of stderr.

    Kineto, the C++ profiler under ``torch.profiler``, writes straight to file
    descriptor 2, below Python, so ``contextlib.redirect_stderr`` cannot catch
    it. Two layers: ``KINETO_LOG_LEVEL=6`` silences it if set before the
    profiler first starts (kineto reads it once), and, for the case where it
    already started, fd 2 is pointed at a temporary file while the profiler
    starts/stops; afterwards every captured line that is *not* a kineto log
    line is written back to stderr, so nothing else is swallowed.
    """
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
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
