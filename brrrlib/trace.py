"""Where the time goes: a profiler trace cut into a host lane and a device lane (chapter 03)."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch.profiler import ProfilerActivity  # the profiler itself is read at call time

from brrrlib import _checks, _fmt, machine
from brrrlib._aten_ops import (
    CATEGORIES,
    COMPILED_GRAPH,
    categorize,
    has_matmul_formula,
    moves_no_data,
    profiler_category,
)
from brrrlib.counting import CategoryTimes, Counts, count

__all__ = ["Trace", "breakdown", "profile", "quiet_profiler", "recorded", "time_by_category"]

#: Prefix of the ``record_function`` marker around each recorded run.
RUN_MARKER = "brrr_run_"
#: Marker around the profiler's own warm-up, before run 0: not a run.
WARMUP_MARKER = "brrr_profiler_warmup"
#: A gap is blamed on dispatch when the host lane was inside an op for at least this
#: fraction of it; otherwise the host was running Python between ops.
DISPATCH_BLAME_FRACTION = 0.5
#: Run 0 is "inflated" when it took this many times the median of the later runs: it paid
#: set-up (the profiler's, first launches), not the workload.
FIRST_RUN_INFLATED = 1.5
#: A kernel that sat this long behind earlier work shows the host ran ahead of the GPU;
#: below it, the wait is launch jitter.
RAN_AHEAD_MIN_S = 10e-6
#: The traces shipped with brrrlib, recorded on an H100 (the folder's README says what each is).
_RECORDED = Path(__file__).parent / "recordings" / "h100-2026-11-22"
#: Colour of each op family on the timeline (matplotlib's tab10 names).
COLORS = {
    "matmul": "tab:blue",
    "pointwise": "tab:orange",
    "reduction": "tab:green",
    "normalization": "tab:purple",
    "memcpy": "tab:brown",
    "fused": "tab:olive",
    "other": "tab:gray",
}

# ------------------------------------------------------------------ running the profiler

# Kineto's own log lines: "STAGE:2026-11-27 ... .cpp:51] ...", and its indented config dump
# ("  Trace duration: 500ms"); only lines written while the profiler starts or stops are read.
_KINETO_LINE = re.compile(r"^(?:[A-Z]+:\d{4}-\d\d-\d\d\s|\s+[A-Z][\w\s]*:\s)")
# torch.profiler's warnings about its own machinery (acc_events, kineto), not about your code.
_PROFILER_WARNINGS = r".*(?:acc_events|kineto|CUPTI)"


def _record(fn: Callable, args: tuple, kwargs: dict, *, runs: int, warmup: int) -> Any:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler``; return the stopped profiler."""
    _checks.function("fn", fn)
    _checks.positive_int("runs", runs)
    if warmup != 0:  # 0: no warmup
        _checks.positive_int("warmup", warmup)
    cuda = torch.cuda.is_available()
    # each sync waits for queued device work, so a run's marker ends when its work ends
    device = "cuda" if cuda else "mps" if torch.backends.mps.is_available() else "cpu"
    for _ in range(warmup):  # 1. first calls pay allocation, lazy init, compilation
        fn(*args, **kwargs)
    machine.sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = torch.profiler.profile(activities=activities, acc_events=True)
    with quiet_profiler():
        prof.start()
    try:
        # 2. CUPTI sets itself up on the first kernel it sees (1-40 ms on an H100), and first
        # launches are slower under the profiler: both paid here, outside every run
        with torch.profiler.record_function(WARMUP_MARKER):
            if cuda:
                torch.ones(1, device="cuda").add_(1)
            if warmup:
                fn(*args, **kwargs)
            machine.sync(device)
        for r in range(runs):  # 3. each run's marker ends with a sync: its span holds its work
            with torch.profiler.record_function(f"{RUN_MARKER}{r}"):
                fn(*args, **kwargs)
                machine.sync(device)
    finally:
        with quiet_profiler():  # 4. stopped even if fn raised
            prof.stop()
    return prof


@contextlib.contextmanager
def quiet_profiler():
    """Keep kineto's log lines and the profiler's warnings about itself out of sight."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # read once, when the profiler first starts
    try:
        fd = sys.__stderr__.fileno()
    except (AttributeError, OSError, ValueError):  # no real fd (embedded interpreters)
        fd = None
    # kineto writes to fd 2 below Python (redirect_stderr cannot catch it): capture the fd,
    # then write back every line that is not kineto's
    with warnings.catch_warnings(), tempfile.TemporaryFile(mode="w+b") as sink:
        warnings.filterwarnings("ignore", message=_PROFILER_WARNINGS)
        if fd is None:
            yield
            return
        sys.__stderr__.flush()
        saved = os.dup(fd)
        os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            lines = sink.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not _KINETO_LINE.match(line)))


# ------------------------------------------------------------------ events in, lane intervals out


class _Event(NamedTuple):
    """One chrome-trace event, in µs."""

    name: str
    kind: str  # "op", "runtime" (a CUDA API call), "kernel", "memcpy" or "marker" (a run)
    start: float
    end: float
    thread: Any
    correlation: int | None  # a CUDA launch and the kernels it launched share it


#: Chrome-trace categories by the kind of event they are.
_CHROME_KINDS = {
    "cpu_op": "op",
    **dict.fromkeys(("cuda_runtime", "cuda_driver"), "runtime"),
    "kernel": "kernel",
    **dict.fromkeys(("gpu_memcpy", "gpu_memset"), "memcpy"),
}
# CUDA runtime and driver calls by name (cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernel).
_CUDA_CALL = re.compile(r"cu(?:da)?[A-Z]")
#: Op families that do arithmetic: an op that calls one of these only wraps it.
_COMPUTE = frozenset({"matmul", "pointwise", "reduction", "normalization"})
# What CUDA kernel names contain (regular expressions), by family (cuBLAS/CUTLASS GEMMs, cuDNN,
# flash attention, ATen's elementwise and reduce kernels, inductor's triton_poi/_red/_per kernels).
_KERNEL_WORDS = (
    ("matmul", "gemm|gemv|cutlass|xmma|cublas|conv|wgrad|dgrad|flash|fmha|sm[89]0_|ampere_|volta_"),
    ("normalization", "softmax|layer_?norm|batch_?norm|rms_norm|group_norm"),
    ("reduction", "reduce|triton_red|triton_per"),
    ("pointwise", "elementwise|vectorized|pointwise|unrolled|triton_poi"),
)


def _profiler_events(prof: Any) -> list[dict]:
    """The API's events as chrome-trace events; a launch and its kernels share an ``id``."""
    return [
        {"ph": "X", "name": e.name, "tid": e.thread, "args": {"correlation": e.id}}
        | {"cat": _category(e, e.device_type == torch.autograd.DeviceType.CPU)}
        | {"ts": e.time_range.start, "dur": e.time_range.end - e.time_range.start}
        for e in prof.events()
        if not e.is_async
    ]


def _category(e: Any, on_cpu: bool) -> str:
    """An API event's chrome-trace category: its ``activity_type`` (torch 2.12+), else guessed."""
    if getattr(e, "activity_type", None):
        return e.activity_type
    if not on_cpu:  # a kernel, a copy, or the device-lane copy of a run's marker
        copy = "gpu_memcpy" if e.name.startswith(("Memcpy", "Memset")) else "kernel"
        return "gpu_user_annotation" if e.name.startswith("brrr_") else copy
    if e.is_user_annotation:
        return "user_annotation"
    return "cuda_runtime" if _CUDA_CALL.match(e.name) else "cpu_op"


def _chrome_events(events: list[Mapping]) -> list[_Event]:
    """A chrome trace's complete events; a kernel without a correlation gets its ac2g flow's."""
    flows = {
        (e.get("pid"), e.get("tid"), float(e["ts"])): int(e["id"])
        for e in events
        if e.get("ph") == "f" and e.get("cat") == "ac2g" and "id" in e and "ts" in e
    }
    out = []
    for e in (e for e in events if e.get("ph") == "X" and "ts" in e):
        name, cat, ts = str(e.get("name", "?")), e.get("cat"), float(e["ts"])
        marker = name.startswith(RUN_MARKER) and cat == "user_annotation"
        kind = "marker" if marker else _CHROME_KINDS.get(cat)
        thread = (e.get("pid"), e.get("tid"))
        corr = (e.get("args") or {}).get("correlation", flows.get((*thread, ts)))
        if kind:
            end = ts + float(e.get("dur", 0.0))
            out.append(_Event(name, kind, ts, end, thread, None if corr is None else int(corr)))
    return out


def _lanes(events: list[_Event]) -> tuple[list[Interval], list[tuple], str]:
    """Events -> intervals in seconds from run 0's start, run spans, and the device."""
    host = [e for e in events if e.kind in ("op", "runtime")]
    kernels = [e for e in events if e.kind in ("kernel", "memcpy")]
    markers = sorted((e for e in events if e.kind == "marker"), key=lambda e: e.start)
    spans = [(m.start, m.end) for m in markers]
    if not markers and host + kernels:  # no markers: one run over everything, busiest thread
        spans = [(min(e.start for e in host + kernels), max(e.end for e in host + kernels))]
    threads = Counter(e.thread for e in [e for e in host if e.kind == "op"] or host)
    thread = markers[0].thread if markers else next(iter(threads.most_common(1)), (None,))[0]

    def run_of(t: float) -> int | None:
        return next((r for r, (a, b) in enumerate(spans) if a <= t <= b), None)

    def sec(t: float) -> float:
        return (t - spans[0][0]) * 1e-6

    # kernels inside a run, not the profiler's set-up kernel: CPU work stays CPU work
    device = "cuda" if any(run_of(k.start) is not None for k in kernels) else "cpu"
    rows, nesting = [], _nesting(host)
    for e in (e for e in host if run_of(e.start) is not None):
        span, r = (e.name, sec(e.start), sec(e.end)), run_of(e.start)
        top, does_work = nesting[id(e)]
        category = "runtime" if e.kind == "runtime" else profiler_category(e.name)
        if e.kind == "runtime" and e.correlation is not None:  # to time launch -> kernel
            rows.append(Interval(*span, "launch", "runtime", r, e.correlation))
        if top and e.thread == thread:
            rows.append(Interval(*span, "host", category, r))
        if device == "cpu" and does_work and e.kind == "op":
            rows.append(Interval(*span, "device", category, r))
    launched = {e.correlation: e.start for e in host if e.kind == "runtime"}
    for k in kernels if device == "cuda" else ():
        r = run_of(launched.get(k.correlation, k.start))  # the run that launched it
        if r is not None:
            category = "memcpy" if k.kind == "memcpy" else _kernel_category(k.name)
            rows.append(
                Interval(k.name, sec(k.start), sec(k.end), "device", category, r, k.correlation)
            )
    rows.sort(key=lambda i: (i.start_s, -i.end_s))
    return rows, [(sec(a), sec(b)) for a, b in spans], device


def _kernel_category(name: str) -> str:
    """Op family of a CUDA kernel from its (mangled or demangled) name."""
    return next((c for c, words in _KERNEL_WORDS if re.search(words, name.lower())), "other")


def _nesting(events: list[_Event]) -> dict[int, tuple[bool, bool]]:
    """For each event: (top level on its thread, does the work), by time containment."""
    out: dict[int, tuple[bool, bool]] = {}
    by_thread: dict[Any, list[_Event]] = {}
    for e in sorted(events, key=lambda e: (e.start, -e.end)):
        by_thread.setdefault(e.thread, []).append(e)
    for evs in by_thread.values():
        wrappers: set[int] = set()  # ops that enclose an op of a compute family: they wrap it
        for e, around in _enclosing(evs):
            if profiler_category(e.name) in _COMPUTE or e.name.startswith(COMPILED_GRAPH):
                # an op with a FLOP formula of its own (an LSTM layer) is the work, even when it
                # encloses a helper op (its bias add): only true wrappers hand their time down
                wrappers.update(id(a) for a in around if not has_matmul_formula(a.name))
        working: set[int] = set()
        for e, around in _enclosing(evs):
            work = e.name.startswith(COMPILED_GRAPH) or (
                id(e) not in wrappers and e.name.startswith("aten::") and not moves_no_data(e.name)
            )
            if work and not any(id(a) in working for a in around):
                working.add(id(e))
            out[id(e)] = (not around, id(e) in working)
    return out


def _enclosing(evs: list[_Event]) -> Iterable[tuple[_Event, tuple[_Event, ...]]]:
    """Each event (sorted by start) with the events that enclose it."""
    stack: list[_Event] = []
    for e in evs:
        while stack and e.start >= stack[-1].end:
            stack.pop()
        yield e, tuple(stack)
        stack.append(e)


# ------------------------------------------------------------------ results


class _Span:
    """A stretch of time from ``start_s`` to ``end_s``."""

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Interval(_Span):
    """One op on one lane, in seconds from the start of the first recorded run."""

    name: str
    start_s: float
    end_s: float
    lane: str  # "host", "device", or "launch" (a CUDA call kept to match kernels, not drawn)
    category: str = "other"  # bl.count's categories, or "memcpy", "fused", "runtime"
    run: int = 0
    correlation: int | None = None  # links a CUDA launch to its kernel


@dataclass(frozen=True)
class Gap(_Span):
    """A stretch where the device lane was idle inside a run: it waited for the host."""

    start_s: float
    end_s: float
    run: int
    cause: str  # "dispatch" (host inside an op for most of it) or "python" (between ops)
    host_busy_fraction: float


@dataclass(frozen=True)
class OpTime:
    """Device time of one op name summed over all recorded runs (a row of ``top_ops``)."""

    name: str
    category: str
    calls: int
    total_s: float
    share: float  # of all device time


@dataclass(frozen=True, repr=False)
class Trace(_fmt.Table):
    """A profiled function: host and device intervals over ``len(runs)`` recorded runs."""

    intervals: tuple[Interval, ...]
    runs: tuple[tuple[float, float], ...]  # (start_s, end_s) of each recorded run
    device: str  # "cuda" when the device lane holds GPU kernels, else "cpu"
    label: str | None = None
    chrome_trace: str = field(default="", repr=False, compare=False)
    device_name: str = ""
    recorded_on: str = ""  # where and when a shipped recording was made; "" when profiled here

    @property
    def host(self) -> tuple[Interval, ...]:
        """Host-lane intervals, by start time."""
        return tuple(i for i in self.intervals if i.lane == "host")

    @property
    def device_intervals(self) -> tuple[Interval, ...]:
        """Device-lane intervals, by start time."""
        return tuple(i for i in self.intervals if i.lane == "device")

    @property
    def wall_s(self) -> tuple[float, ...]:
        """Wall time of each recorded run in seconds (profiler on, so a little slower)."""
        return tuple(end - start for start, end in self.runs)

    @property
    def median_wall_s(self) -> float:
        """Median of ``wall_s``."""
        return _fmt.median(self.wall_s)

    @property
    def first_run_inflation(self) -> float:
        """Run 0's wall time over the median of the later runs (NaN with one run)."""
        later = _fmt.median(self.wall_s[1:]) if len(self.runs) > 1 else 0.0
        return self.wall_s[0] / later if later > 0 else math.nan

    @property
    def steady_runs(self) -> tuple[int, ...]:
        """The runs to read: all of them, or runs 1 and later when run 0 is inflated."""
        skip = self.first_run_inflation > FIRST_RUN_INFLATED  # NaN compares False
        return tuple(range(1 if skip else 0, len(self.runs)))

    def busy_s(self, run: int | None = None) -> float:
        """Seconds the device lane was busy (union of its intervals) in ``run`` or all runs."""
        return sum(self._covered_s("device")[r] for r in self._run_ids(run))

    @property
    def busy_fraction(self) -> float:
        """Device busy time over wall time, all runs pooled: 1.0 means never idle."""
        return _fmt.share(self.busy_s(), sum(self.wall_s))

    @property
    def busy_fraction_per_run(self) -> tuple[float, ...]:
        """``busy_fraction`` of each run separately."""
        return tuple(map(_fmt.share, self._covered_s("device"), self.wall_s))

    @property
    def outside_ops_s(self) -> tuple[float, ...]:
        """Per run, host seconds outside any op (Python between ops; profiler bookkeeping too)."""
        return tuple(w - h for w, h in zip(self.wall_s, self._covered_s("host"), strict=True))

    @property
    def outside_ops_fraction(self) -> float:
        """``outside_ops_s`` over wall time, all runs pooled."""
        return _fmt.share(sum(self.outside_ops_s), sum(self.wall_s))

    @property
    def gaps(self) -> tuple[Gap, ...]:
        """Every idle stretch of the device lane inside a run, with its cause."""
        out: list[Gap] = []
        for r, (start, end) in enumerate(self.runs):
            cursor = start
            for b0, b1 in [*self._merged["device", r], (end, end)]:
                if b0 > cursor:
                    covered = _overlap(self._merged["host", r], cursor, b0) / (b0 - cursor)
                    cause = "dispatch" if covered >= DISPATCH_BLAME_FRACTION else "python"
                    out.append(Gap(cursor, b0, r, cause, covered))
                cursor = max(cursor, b1)
        return tuple(out)

    def idle_by_cause(self) -> dict[str, float]:
        """Idle seconds per gap cause, e.g. ``{"python": 0.8e-3, "dispatch": 0.2e-3}``."""
        out: Counter[str] = Counter()
        for g in self.gaps:
            out[g.cause] += g.duration_s
        return dict(out)

    def top_ops(self, n: int = 10) -> tuple[OpTime, ...]:
        """The ``n`` op names with the most device time, summed over runs."""
        seconds, calls = Counter(), Counter(i.name for i in self.device_intervals)
        category = {i.name: i.category for i in self.device_intervals}
        for i in self.device_intervals:
            seconds[i.name] += i.duration_s
        total = sum(seconds.values()) or 1.0
        return tuple(
            OpTime(k, category[k], calls[k], t, t / total) for k, t in seconds.most_common(n)
        )

    @property
    def launch_delays_s(self) -> tuple[float, ...]:
        """Per kernel, its start minus its launch call's start in seconds (CUDA; empty on a CPU)."""
        return tuple(k.start_s - launch for launch, k in self._launched())

    @property
    def queued_s(self) -> tuple[float, ...]:
        """Per kernel, the seconds of its launch delay the GPU spent on earlier work."""
        busy = _merge((i.start_s, i.end_s) for i in self.device_intervals)
        return tuple(_overlap(busy, launch, k.start_s) for launch, k in self._launched())

    @property
    def host_ran_ahead(self) -> bool:
        """Whether some kernel queued behind earlier work for at least ``RAN_AHEAD_MIN_S``."""
        return max(self.queued_s, default=0.0) >= RAN_AHEAD_MIN_S

    def _launched(self) -> list[tuple[float, Interval]]:
        """(launch call start, kernel) for every kernel matched to its launch."""
        launches = {i.correlation: i.start_s for i in self.intervals if i.lane == "launch"}
        return [
            (launches[k.correlation], k) for k in self.device_intervals if k.correlation in launches
        ]

    def _run_ids(self, run: int | None) -> range:
        if run is not None:
            _checks.one_of("run", run, range(len(self.runs)))
        return range(len(self.runs)) if run is None else range(run, run + 1)

    @functools.cached_property
    def _merged(self) -> dict[tuple[str, int], list[tuple[float, float]]]:
        """Per (lane, run): the lane's intervals in the run, clipped to its span and merged."""
        out = {(lane, r): [] for lane in ("host", "device") for r in range(len(self.runs))}
        for i in (i for i in self.intervals if (i.lane, i.run) in out):
            start, end = self.runs[i.run]
            out[i.lane, i.run].append((max(i.start_s, start), min(i.end_s, end)))
        return {key: _merge((a, b) for a, b in spans if b > a) for key, spans in out.items()}

    def _covered_s(self, lane: str) -> tuple[float, ...]:
        """Per run, the seconds ``lane`` spent inside an interval: busy, or in an op."""
        return tuple(sum(b - a for a, b in self._merged[lane, r]) for r in range(len(self.runs)))

    @classmethod
    def from_chrome_trace(
        cls, source: str | os.PathLike | Mapping | Sequence, *, label: str | None = None
    ) -> Trace:
        """Read a chrome trace (a path, a JSON dict, or an event list); no run markers: one run."""
        text = Path(source).read_text() if isinstance(source, (str, os.PathLike)) else ""
        data = json.loads(text) if text else source
        events = data.get("traceEvents", []) if isinstance(data, Mapping) else data
        if not isinstance(events, (list, tuple)):
            raise TypeError(f"source must be a chrome-trace path, dict or list, got {events!r}")
        props = (data.get("deviceProperties") if isinstance(data, Mapping) else None) or [{}]
        rows, runs, device = _lanes(_chrome_events(list(events)))
        text = text or json.dumps({"traceEvents": list(events)})
        return cls(tuple(rows), tuple(runs), device, label, text, str(props[0].get("name", "")))

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write the trace as chrome-trace JSON; open it in https://ui.perfetto.dev or chrome://tracing."""
        events = [
            dict(ph="X", name=i.name, cat=i.category, pid=0, tid=2 if i.lane == "device" else 1)
            | dict(ts=i.start_s * 1e6, dur=i.duration_s * 1e6)
            for i in self.intervals
        ]
        Path(path).write_text(self.chrome_trace or json.dumps({"traceEvents": events}))
        return Path(path)

    def plot(self, ax=None, *, run: int | None = None):
        """Host lane over device lane for ``run`` (default: all), idle hatched; returns the Axes."""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        ax = ax or plt.subplots(figsize=(10, 2.8), layout="constrained")[1]
        runs = list(self._run_ids(run))
        t0, t1 = (self.runs[runs[0]][0], self.runs[runs[-1]][1]) if runs else (0.0, 1.0)
        span = max(t1 - t0, 1e-9)
        scale, unit = (1e3, "ms") if span >= 1e-3 else (1e6, "µs")
        lanes = {"host": 1.0, "device": 0.0}
        for i in (i for i in self.intervals if i.lane in lanes and i.run in runs):
            x, w, y = (i.start_s - t0) * scale, i.duration_s * scale, lanes[i.lane]
            name, color = _short(i.name, 18), COLORS.get(i.category, "tab:gray")
            ax.broken_barh([(x, w)], (y - 0.35, 0.7), facecolors=color, edgecolors="white", lw=0.3)
            if w > 0.007 * len(name) * span * scale:  # label only where it fits
                ax.text(x + w / 2, y, name, ha="center", va="center", fontsize=7, clip_on=True)
        idle = dict(fc="none", ec="tab:red", hatch="////", lw=0.0, alpha=0.5)
        gaps = [(g.start_s - t0, g.duration_s) for g in self.gaps if g.run in runs]
        ax.broken_barh([(x * scale, w * scale) for x, w in gaps], (-0.35, 0.7), **idle)
        for r in runs[1:]:
            ax.axvline((self.runs[r][0] - t0) * scale, color="k", ls="--", lw=0.8)
        ax.set_yticks([0.0, 1.0], ["device", "host"])
        ax.set(ylim=(-0.6, 1.6), xlim=(0, span * scale), xlabel=f"time since run start ({unit})")
        busy = _fmt.share(sum(self.busy_s(r) for r in runs), sum(self.wall_s[r] for r in runs))
        on = self.recorded_on.split(",")[0] if self.recorded_on else self.device
        title = [self.label or "trace", on, *[f"run {r}" for r in runs if run is not None]]
        ax.set_title(", ".join([*title, f"busy {busy:.0%}"]), loc="left", fontsize=9)
        used = sorted({i.category for i in self.intervals if i.lane in lanes})
        keys = [Patch(color=COLORS.get(c, "tab:gray"), label=c) for c in used]
        keys.append(Patch(label="idle", **idle))  # the keys right of the lanes: never over a bar
        _fmt.legend_beside(ax, handles=keys, fontsize=7)
        return ax

    def _table(self) -> tuple[list[str], list[str], list[list[str]], str]:
        """The trace's numbers, and its top eight ops by device time."""
        wall, on = sum(self.wall_s), [self.device, self.recorded_on or self.device_name]
        numbers = {
            "runs": str(len(self.runs)),
            "median": _fmt.seconds(self.median_wall_s) if self.runs else "-",
            "busy": _fmt.percent(self.busy_s(), wall),
            **{f"idle_{k}": _fmt.percent(v, wall) for k, v in sorted(self.idle_by_cause().items())},
            "outside_ops": _fmt.percent(self.outside_ops_fraction, 1.0),
            "max_queued": _fmt.seconds(max(self.queued_s)) if self.queued_s else "",
            "run_0": _fmt.times(self.first_run_inflation) if self.steady_runs[:1] == (1,) else "",
        }
        head = ", ".join([self.label or "trace", *filter(None, on)]) + ": "
        head += ", ".join(f"{k} {v}" for k, v in numbers.items() if v)
        rows = [
            [_short(o.name), o.category, str(o.calls), _fmt.seconds(o.total_s), f"{o.share:.0%}"]
            for o in self.top_ops(8)
        ]
        return [head], ["op", "category", "calls", "time", "share"], rows, "llrrr"


def _short(name: str, n: int = 60) -> str:
    """A label that fits: ``aten::`` dropped; a kernel's C++ signature cut to its bare name."""
    name = "CompiledFxGraph" if name.startswith(COMPILED_GRAPH) else name.replace("aten::", "")
    if len(name) > n and ("<" in name or "(" in name):
        bare = re.split(r"[<(]", name.removeprefix("void "), maxsplit=1)[0].strip()
        bare = bare.split("::")[-1] or name
        # room to spare: name the functor too (CUDAFunctor_add, MulFunctor, sum_functor)
        functors = re.findall(r"\w*(?:Functor|functor)\w*", name)
        with_functor = f"{bare}<{functors[-1]}>" if functors else bare
        name = with_functor if len(with_functor) <= n else bare
    return name if len(name) <= n else name[: n - 1] + "…"


# ------------------------------------------------------------------ capture


def profile(
    fn: Callable, *args, runs: int = 3, warmup: int = 1, label: str | None = None, **kwargs
) -> Trace:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler`` and return its ``Trace``."""
    prof = _record(fn, args, kwargs, runs=runs, warmup=warmup)
    rows, spans, device = _lanes(_chrome_events(_profiler_events(prof)))
    label = label or getattr(fn, "__name__", None)
    if all(i.category == "runtime" for i in rows):  # CUDA calls only, or nothing
        raise ValueError(f"fn={label!r} ran no torch operators: pass one that does tensor work")
    with tempfile.TemporaryDirectory() as tmp, quiet_profiler():
        prof.export_chrome_trace(f"{tmp}/trace.json")  # the API has no whole trace for Perfetto
        text = Path(f"{tmp}/trace.json").read_text()
    name = torch.cuda.get_device_name() if device == "cuda" else ""
    return Trace(tuple(rows), tuple(spans), device, label, text, name)


def time_by_category(
    fn: Callable[..., Any], *args: Any, runs: int = 5, warmup: int = 1, **kwargs: Any
) -> CategoryTimes:
    """Median self time per op category over ``runs`` profiled calls (chapter 01)."""
    events = _record(fn, args, kwargs, runs=runs, warmup=warmup).events()
    on_cpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU]
    markers = [e for e in on_cpu if e.name.startswith(RUN_MARKER)]
    spans = {int(e.name.removeprefix(RUN_MARKER)): e.time_range for e in markers}
    # self seconds per (run, category), on the CPU and on the device (a kernel under its op's row)
    cpu_s, device_s = Counter(), Counter()
    for e in on_cpu:  # the markers and the profiler's memory rows ("[memory]") aside
        r = next((r for r, t in spans.items() if t.start <= e.time_range.start <= t.end), None)
        if r is not None and not e.name.startswith(("brrr_", "[")):
            cpu_s[r, categorize(e.key)] += e.self_cpu_time_total * 1e-6
            device_s[r, categorize(e.key)] += e.self_device_time_total * 1e-6
    ran = [sum(device_s[r, c] for c in CATEGORIES) > 0 for r in range(runs)]
    on_device = torch.cuda.is_available() and all(ran)
    seconds = device_s if on_device else cpu_s
    times_s = tuple((c, _fmt.median([seconds[r, c] for r in range(runs)])) for c in CATEGORIES)
    return CategoryTimes(times_s, "cuda" if on_device else "cpu", runs)


def breakdown(fn: Callable[..., Any], *args: Any, runs: int = 5, **kwargs: Any) -> Counts:
    """``bl.count`` with :func:`time_by_category` attached: the essay's BERT table (chapter 01)."""
    # a fused op (nn.TransformerEncoderLayer in eval under no_grad) counts as one matmul row,
    # while the profiler still splits its time over the ops it calls
    counts = count(fn, *args, **kwargs)
    return dataclasses.replace(counts, times=time_by_category(fn, *args, runs=runs, **kwargs))


def recorded_names() -> tuple[str, ...]:
    """The traces shipped in ``brrrlib/recordings/h100-2026-11-22/traces`` (see its README)."""
    return tuple(sorted(p.stem for p in (_RECORDED / "traces").glob("*.json")))


def recorded(name: str) -> Trace:
    """A trace recorded on an H100 and shipped with brrrlib; read its ``steady_runs``."""
    stem = str(name).removesuffix(".json")
    _checks.one_of("name", stem, recorded_names())
    trace = Trace.from_chrome_trace(_RECORDED / "traces" / f"{stem}.json", label=stem)
    sweeps = json.loads(next((_RECORDED / "sweeps").glob("*.json")).read_text())  # its torch
    date = _RECORDED.name.removeprefix("h100-")
    on = ", ".join((trace.device_name, date, "torch " + sweeps["torch"]))
    return dataclasses.replace(trace, recorded_on=on)


# ------------------------------------------------------------------ interval math


def _merge(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of spans as sorted, disjoint spans."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(merged: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of ``[start, end]`` covered by ``merged`` (sorted, disjoint spans)."""
    i = max(bisect.bisect_right(merged, (start, math.inf)) - 1, 0)
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in merged[i:] if a < end)
