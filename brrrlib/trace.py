"""Where the time goes: a profiler trace cut into a host lane and a device lane.

``bl.profile(fn, *args)`` runs ``fn`` under ``torch.profiler`` and keeps two
lanes of intervals (chapter 03, "Python vs the device"; chapter 04 uses it
through ``bl.diagnose``):

* the **host lane**: what the calling thread did, one interval per top-level
  ``aten::`` op (plus CUDA runtime calls made outside any op, such as
  ``cudaDeviceSynchronize``). Time on no host interval is Python between ops.
* the **device lane**: the work the device did. On a GPU, the kernels,
  memcpys and memsets the profiler saw. On a CPU the same core dispatches and
  computes; there the device lane holds the outermost ``aten::`` op that does
  each piece of work (``aten::matmul`` only wraps ``aten::mm``; views and
  ``empty`` move no data and are left out), so an op's dispatch cost cannot be
  separated from its math and tiny ops look busier than they are. (On Apple's
  MPS the profiler records no GPU work: the lanes are the CPU's.)

From the lanes it derives what a learner asks first:

* ``wall_s``: wall time of each recorded run (each ends with a device sync);
* ``busy_fraction``: the union of device intervals over the run spans, as
  HolisticTraceAnalysis computes idle time (span minus union). A device busy
  30% of the time is waiting on the host: overhead;
* ``gaps``: the idle stretches of the device, each with a cause told from the
  host lane (inside an op dispatching, or in Python between ops);
* ``outside_ops_s``: host time per run outside any op (Python, module calls,
  hooks), which no per-op model counts;
* ``launch_delays_s`` (CUDA): how long each kernel waited between its launch
  call and its start, split into ``queued_s`` (the GPU was busy with earlier
  work: the host ran ahead) and ``device_waited_s`` (the GPU sat idle until
  the launch arrived: it waited on the host);
* ``steady_runs``: the runs to read. The first recorded run can carry the
  profiler's own set-up; ``bl.profile`` pays that before run 0, but traces
  recorded elsewhere may not have.

Parsing the profiler's chrome-trace JSON lives in :mod:`brrrlib._chrome` (so
``Trace.from_chrome_trace`` also reads traces recorded elsewhere), the timeline
drawing and the summary's words in :mod:`brrrlib._timeline`, the capture in
:mod:`brrrlib._profiler`. :func:`recorded` opens the traces shipped with
brrrlib (an H100, 2026-11-22).
:func:`time_by_category` and :func:`breakdown` time a function per op category
from the same profiler capture (chapter 01's BERT table).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brrrlib import _chrome, _fmt, _profiler, _timeline
from brrrlib._aten_ops import CATEGORIES, categorize
from brrrlib._profiler import RUN_MARKER, quiet_profiler
from brrrlib.counting import CategoryTimes, Counts, count

__all__ = [
    "Gap", "Interval", "OpTime", "Trace", "breakdown", "profile", "quiet_profiler", "recorded",
    "recorded_names", "time_by_category",
]  # fmt: skip

#: A gap is blamed on dispatch when the host lane was inside an op for at least this
#: fraction of it; otherwise the host was running Python between ops.
DISPATCH_BLAME_FRACTION = 0.5
#: Run 0 is "inflated" when it took this many times the median of the later runs: it paid
#: set-up (the profiler's, first launches), not the workload.
FIRST_RUN_INFLATED = 1.5
#: A kernel that sat this long behind earlier work shows the host ran ahead of the GPU;
#: below it, the wait is launch jitter.
RAN_AHEAD_MIN_S = 10e-6

_RECORDINGS = Path(__file__).parent / "recordings"


@dataclass(frozen=True)
class Interval:
    """One op on one lane: ``name`` ran from ``start_s`` to ``end_s``.

    Times are seconds from the start of the first recorded run. ``lane`` is
    ``"host"``, ``"device"``, or ``"launch"`` (a CUDA runtime call that carries
    a correlation id: kept to measure launch-to-kernel delays, not drawn);
    ``category`` is the op family (``"matmul"``, ``"normalization"``,
    ``"pointwise"``, ``"reduction"``, ``"other"`` as in ``bl.count``, plus
    ``"memcpy"`` for GPU copies, ``"fused"`` for a torch.compile'd graph and
    ``"runtime"`` for CUDA runtime calls); ``run`` is the index of the recorded
    run it belongs to; ``correlation`` links a CUDA launch to its kernel.
    """

    name: str
    start_s: float
    end_s: float
    lane: str
    category: str = "other"
    run: int = 0
    correlation: int | None = None

    @property
    def duration_s(self) -> float:
        """Length of the interval in seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Gap:
    """A stretch where the device lane was idle inside a run.

    ``cause`` is told from the host lane during the gap: ``"dispatch"`` when the
    host was inside an op (the dispatcher, argument checks, allocation, the
    kernel launch) for most of it, ``"python"`` when the host lane was empty too,
    i.e. the interpreter was running your code between ops. ``host_busy_fraction``
    is the part of the gap covered by host-lane ops. Either way the device had
    nothing queued: it waited for the host.
    """

    start_s: float
    end_s: float
    run: int
    cause: str
    host_busy_fraction: float

    @property
    def duration_s(self) -> float:
        """Length of the gap in seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class OpTime:
    """Device time of one op name summed over all recorded runs (a row of ``top_ops``)."""

    name: str
    category: str
    calls: int
    total_s: float
    share: float  # of all device time


@dataclass(frozen=True)
class Trace:
    """A profiled function: host and device intervals over ``len(runs)`` recorded runs.

    Build one with ``bl.profile(fn, *args)``, ``Trace.from_chrome_trace(path)``
    or :func:`recorded`. Fields keep the raw intervals; everything else is
    derived. ``device_name`` is the GPU's name when the trace file carries it;
    ``recorded_on`` says where and when a shipped recording was made
    ("NVIDIA H100 80GB HBM3, 2026-11-22, torch 2.11.0+cu130"), empty for a
    trace profiled here.
    """

    intervals: tuple[Interval, ...]
    runs: tuple[tuple[float, float], ...]  # (start_s, end_s) of each recorded run
    device: str  # "cuda" when the device lane holds GPU kernels, else "cpu"
    label: str | None = None
    chrome_trace: str = field(default="", repr=False, compare=False)
    device_name: str = ""
    recorded_on: str = ""

    # -- lanes
    @property
    def host(self) -> tuple[Interval, ...]:
        """Host-lane intervals, by start time."""
        return tuple(i for i in self.intervals if i.lane == "host")

    @property
    def device_intervals(self) -> tuple[Interval, ...]:
        """Device-lane intervals, by start time."""
        return tuple(i for i in self.intervals if i.lane == "device")

    # -- time
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
        """Run 0's wall time over the median of the later runs (NaN with one run).

        Well above 1 means run 0 paid set-up, not the workload: the first
        CUDA kernel under the profiler sets up CUPTI (1-40 ms on an H100). The
        traces shipped in ``brrrlib/recordings`` show 2-40x.
        """
        later = self.wall_s[1:]
        return self.wall_s[0] / _fmt.median(later) if later and _fmt.median(later) > 0 else math.nan

    @property
    def steady_runs(self) -> tuple[int, ...]:
        """The runs to read: all of them, or runs 1 and later when run 0 is inflated."""
        skip = self.first_run_inflation > FIRST_RUN_INFLATED  # NaN compares False
        return tuple(range(1 if skip else 0, len(self.runs)))

    def busy_s(self, run: int | None = None) -> float:
        """Seconds the device lane was busy (union of its intervals) in ``run`` or all runs."""
        return sum(
            _union_length(_clip(self._lane_in("device", r), *self.runs[r]))
            for r in self._run_ids(run)
        )

    @property
    def busy_fraction(self) -> float:
        """Device busy time over wall time, all runs pooled: 1.0 means never idle."""
        total = sum(self.wall_s)
        return self.busy_s() / total if total > 0 else 0.0

    @property
    def busy_fraction_per_run(self) -> tuple[float, ...]:
        """``busy_fraction`` of each run separately."""
        return tuple(self.busy_s(r) / w if w > 0 else 0.0 for r, w in enumerate(self.wall_s))

    @property
    def outside_ops_s(self) -> tuple[float, ...]:
        """Per run, host time outside any op: wall time minus the union of the host lane.

        That is Python between ops and module machinery (``nn.Module.__call__``,
        hooks, argument handling), the overhead a per-op model misses. The
        profiler's own bookkeeping between ops lands here too, so it is an
        upper bound for tiny ops.
        """
        return tuple(
            (end - start) - _union_length(_clip(self._lane_in("host", r), start, end))
            for r, (start, end) in enumerate(self.runs)
        )

    @property
    def outside_ops_fraction(self) -> float:
        """``outside_ops_s`` over wall time, all runs pooled."""
        total = sum(self.wall_s)
        return sum(self.outside_ops_s) / total if total > 0 else 0.0

    @property
    def gaps(self) -> tuple[Gap, ...]:
        """Every idle stretch of the device lane inside a run, with its cause."""
        out: list[Gap] = []
        for r, (start, end) in enumerate(self.runs):
            busy = _merge(_clip(self._lane_in("device", r), start, end))
            host_busy = _merge(_clip(self._lane_in("host", r), start, end))
            cursor = start
            for b0, b1 in [*busy, (end, end)]:
                if b0 > cursor:
                    covered = _overlap(host_busy, cursor, b0) / (b0 - cursor)
                    cause = "dispatch" if covered >= DISPATCH_BLAME_FRACTION else "python"
                    out.append(Gap(cursor, b0, r, cause, covered))
                cursor = max(cursor, b1)
        return tuple(out)

    def idle_by_cause(self) -> dict[str, float]:
        """Idle seconds per gap cause, e.g. ``{"python": 0.8e-3, "dispatch": 0.2e-3}``."""
        out: dict[str, float] = {}
        for g in self.gaps:
            out[g.cause] = out.get(g.cause, 0.0) + g.duration_s
        return out

    def top_ops(self, n: int = 10) -> tuple[OpTime, ...]:
        """The ``n`` op names with the most device time, summed over runs."""
        acc: dict[str, list] = {}
        for i in self.device_intervals:
            row = acc.setdefault(i.name, [i.category, 0, 0.0])
            row[1] += 1
            row[2] += i.duration_s
        total = sum(r[2] for r in acc.values()) or 1.0
        rows = [OpTime(k, c, n_, t, t / total) for k, (c, n_, t) in acc.items()]
        rows.sort(key=lambda r: -r.total_s)
        return tuple(rows[:n])

    # -- launches (CUDA)
    def _launched(self) -> list[tuple[float, Interval]]:
        """(launch call start, kernel) for every kernel matched to its launch."""
        launches = {
            i.correlation: i.start_s
            for i in self.intervals
            if i.lane == "launch" and i.correlation is not None
        }
        return [(launches[i.correlation], i) for i in self.device_intervals if i.correlation in launches]

    @property
    def launch_delays_s(self) -> tuple[float, ...]:
        """CUDA only: per kernel, its start on the GPU minus the start of its launch call.

        Matched through correlation ids (a CUDA graph's kernels all share their
        ``cudaGraphLaunch``). Each delay is ``queued_s + device_waited_s``.
        Empty on a CPU.
        """
        return tuple(k.start_s - launch for launch, k in self._launched())

    @property
    def queued_s(self) -> tuple[float, ...]:
        """Per kernel (as ``launch_delays_s``): the part of its delay the GPU spent on earlier work.

        A kernel queued behind others because the host launched it early: the
        host ran ahead and the GPU had work waiting. Milliseconds of it mean
        a device-bound run; zeros mean every kernel met an idle GPU.
        """
        busy = _merge((i.start_s, i.end_s) for i in self.device_intervals)
        return tuple(_overlap(busy, launch, k.start_s) for launch, k in self._launched())

    @property
    def device_waited_s(self) -> tuple[float, ...]:
        """Per kernel: the part of its delay the GPU sat idle, waiting for the launch to arrive."""
        return tuple(d - q for d, q in zip(self.launch_delays_s, self.queued_s, strict=True))

    RAN_AHEAD_MIN_S = RAN_AHEAD_MIN_S

    @property
    def host_ran_ahead(self) -> bool:
        """Whether some kernel queued behind earlier work for at least ``RAN_AHEAD_MIN_S``."""
        return max(self.queued_s, default=0.0) >= RAN_AHEAD_MIN_S

    @property
    def run_ahead_s(self) -> float:
        """Largest launch-to-start delay (0 on a CPU); ``queued_s`` says how much was a queue."""
        return max(self.launch_delays_s, default=0.0)

    def _run_ids(self, run: int | None) -> range:
        if run is None:
            return range(len(self.runs))
        if not 0 <= run < len(self.runs):
            raise ValueError(f"run={run} is out of range: this trace has {len(self.runs)} runs")
        return range(run, run + 1)

    def _lane_in(self, lane: str, run: int) -> list[Interval]:
        return [i for i in self.intervals if i.lane == lane and i.run == run]

    # -- building and writing
    @classmethod
    def from_chrome_trace(
        cls, source: str | os.PathLike | Mapping | Sequence, *, label: str | None = None
    ) -> Trace:
        """Parse a ``torch.profiler`` chrome trace (a path, a JSON dict, or an event list).

        Runs are the ``record_function`` markers named ``brrr_run_<i>`` that
        ``bl.profile`` writes; a trace without them is one run spanning all its
        events. Timestamps (``ts``, ``dur``) are microseconds in the file.
        """
        events, raw_text, meta = _chrome.load(source)
        rows, runs, device = _chrome.parse(events)
        intervals = tuple(Interval(*row) for row in rows)
        return cls(intervals, tuple(runs), device, label, raw_text, _chrome.device_name(meta))

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write the trace as chrome-trace JSON; open it in https://ui.perfetto.dev or chrome://tracing."""
        import json

        path = Path(path)
        tid = {"host": 1, "device": 2, "launch": 1}
        events = [
            {"ph": "X", "name": i.name, "cat": i.category, "pid": 0, "tid": tid[i.lane],
             "ts": i.start_s * 1e6, "dur": i.duration_s * 1e6}
            for i in self.intervals
        ]  # fmt: skip
        path.write_text(self.chrome_trace or json.dumps({"traceEvents": events}))
        return path

    # -- reading (drawn and worded by brrrlib._timeline)
    def plot(self, ax=None, *, run: int | None = None):
        """Draw the timeline: host lane over device lane, idle gaps shaded, ops labelled.

        ``run`` picks one recorded run (default: all of them, separated by dashed
        lines). Returns the matplotlib ``Axes``.
        """
        return _timeline.plot(self, ax, runs=list(self._run_ids(run)))

    def summary(self) -> str:
        """A few lines: runs and wall time, device busy, launches, time outside ops, top ops."""
        return "\n".join(_timeline.summary_lines(self))

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        return _timeline.html(self)


# ----------------------------------------------------------------------------- capture


def profile(
    fn: Callable, *args, runs: int = 3, warmup: int = 1, label: str | None = None, **kwargs
) -> Trace:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler`` and return its ``Trace``.

    Method (:func:`brrrlib._profiler.record`): call ``fn`` ``warmup`` times
    unrecorded; start the profiler and put a device kernel and one more call
    of ``fn`` through it, so the profiler's own set-up (CUPTI's, on a GPU) is
    paid before run 0 and outside every run; then record ``runs`` calls, each
    inside a ``record_function("brrr_run_<i>")`` marker that ends with a
    device sync so the run's wall time includes the device's work. The
    profiler's chrome trace is parsed into lanes (see the module docstring).
    The profiler adds a few microseconds per op, so traces of tiny ops look
    slower than ``bl.benchmark`` says; use traces for *where* time goes and
    ``bl.benchmark`` for *how much*. Kineto's log lines and the profiler's
    warnings are kept out of your notebook (see ``quiet_profiler``).
    """
    _check(fn, runs, warmup)
    prof = _profiler.record(fn, args, kwargs, runs=runs, warmup=warmup)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        with quiet_profiler():
            prof.export_chrome_trace(str(path))
        trace = Trace.from_chrome_trace(path, label=label or getattr(fn, "__name__", None))
    if not trace.device_intervals and all(i.category == "runtime" for i in trace.host):
        raise ValueError(
            f"fn={getattr(fn, '__name__', fn)!r} ran no torch operators: the trace is empty. "
            "Profile a function that does tensor work (and call it, don't pass its result)."
        )
    return trace


def _check(fn: Any, runs: Any, warmup: Any) -> None:
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}; pass the function itself")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")


def time_by_category(
    fn: Callable[..., Any], *args: Any, runs: int = 5, warmup: int = 1, **kwargs: Any
) -> CategoryTimes:
    """Time ``fn(*args, **kwargs)`` with the profiler, split by op category (chapter 01).

    The method: the same capture as :func:`profile` (warm-up, the profiler's
    own set-up before run 0, ``runs`` marked runs). Within each run every op's
    *self* time (its time minus the ops it called, so nothing is counted
    twice) is added to :func:`~brrrlib.counting.categorize` of its name; each
    category reports the median over runs (robust to a busy machine). With
    CUDA present and kernels recorded, the clock is the kernels' device time,
    charged to the aten op that launched them; otherwise the CPU self time,
    which includes each op's dispatch overhead and the profiler's own small
    cost per op, so tiny ops look a little slower than they are. Profiler
    events that are not aten ops (autograd engine bookkeeping, the final
    device sync) land in ``"other"``.
    """
    import torch

    if not callable(fn):
        raise TypeError(f"time_by_category(fn, ...): fn must be callable, got {type(fn).__name__}")
    _check(fn, runs, warmup)
    prof = _profiler.record(fn, args, kwargs, runs=runs, warmup=warmup)
    use_device = torch.cuda.is_available()
    samples = [_category_seconds(events, use_device) for events in _runs_of(prof.events(), runs)]
    on_device = use_device and all(sum(device.values()) > 0 for _, device in samples)
    chosen = [device if on_device else cpu for cpu, device in samples]
    return CategoryTimes(
        times_s=tuple((c, _fmt.median([s[c] for s in chosen])) for c in CATEGORIES),
        source="device self time" if on_device else "cpu self time",
        device="cuda" if on_device else "cpu",
        runs=runs,
    )


def _runs_of(events: Iterable[Any], runs: int) -> list[list[Any]]:
    """Profiler events (``prof.events()``) grouped by the run marker whose span holds their start."""
    events = list(events)
    spans = {
        int(e.name[len(RUN_MARKER) :]): (e.time_range.start, e.time_range.end)
        for e in events
        if e.name.startswith(RUN_MARKER)
    }
    out: list[list[Any]] = [[] for _ in range(runs)]
    for e in events:
        if e.name.startswith(("brrr_", "[")):  # our markers, the profiler's memory rows
            continue
        for r, (start, end) in spans.items():
            if start <= e.time_range.start <= end:
                out[r].append(e)
                break
    return out


def _category_seconds(
    events: Iterable[Any], use_device: bool
) -> tuple[dict[str, float], dict[str, float]]:
    """Sum profiler rows by category: ({category: CPU self s}, {category: device self s}).

    Kernels appear as their own rows (device type CUDA) *and* inside the aten
    op that launched them (the profiler links them by correlation id, and an
    op's ``self_device_time_total`` is its kernels minus its child ops'
    kernels); reading only the CPU rows counts each kernel once, under the op
    that launched it.
    """
    import torch

    cpu = dict.fromkeys(CATEGORIES, 0.0)
    device = dict.fromkeys(CATEGORIES, 0.0)
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CPU:
            continue
        category = categorize(event.key)
        cpu[category] += event.self_cpu_time_total * 1e-6
        if use_device:
            device[category] += event.self_device_time_total * 1e-6
    return cpu, device


def breakdown(fn: Callable[..., Any], *args: Any, runs: int = 5, **kwargs: Any) -> Counts:
    """Count ``fn`` and time it by category: the essay's BERT table in one call (chapter 01).

    ``bl.trace.breakdown(lambda: layer(x).sum().backward())`` returns a
    :class:`~brrrlib.counting.Counts` whose table shows, per category, the
    share of FLOPs next to the share of runtime (:func:`time_by_category`).
    Matmuls do nearly all the FLOPs; the other categories take a share of the
    time out of proportion to their FLOPs because they are bound by memory
    bandwidth or overhead.

    Note: ``nn.TransformerEncoderLayer`` in ``eval()`` under ``no_grad`` with
    ``batch_first=True`` runs one fused op; its count is one matmul row, while
    the profiler still splits its time over the ops it calls inside.
    """
    counts = count(fn, *args, **kwargs)
    return counts.with_times(time_by_category(fn, *args, runs=runs, **kwargs))


# ----------------------------------------------------------------------------- recordings


def recorded_names(folder: str = "h100-2026-11-22") -> tuple[str, ...]:
    """The traces shipped in ``brrrlib/recordings/<folder>/traces`` (see its README)."""
    return tuple(sorted(p.stem for p in (_RECORDINGS / folder / "traces").glob("*.json")))


def recorded(name: str, *, folder: str = "h100-2026-11-22") -> Trace:
    """A trace recorded on a GPU and shipped with brrrlib: what a learner without one can open.

    ``bl.trace.recorded("short_chain_1k")`` is 32 tiny ops on an H100
    (:func:`recorded_names` lists the rest; the folder's README says what each
    workload is). The trace's ``recorded_on`` says where and when
    ("NVIDIA H100 80GB HBM3, 2026-11-22, torch 2.11.0+cu130"). These
    recordings predate the profiler warm-up of :func:`profile`: their run 0
    is inflated, so read ``trace.steady_runs``.
    """
    names = recorded_names(folder)
    stem = str(name).removesuffix(".json")
    if stem not in names:
        known = ", ".join(names) if names else f"none (no folder recordings/{folder}/traces)"
        raise ValueError(f"name={name!r} is not a recorded trace; recorded traces: {known}")
    trace = Trace.from_chrome_trace(_RECORDINGS / folder / "traces" / f"{stem}.json", label=stem)
    readme = _RECORDINGS / folder / "README.md"
    text = readme.read_text() if readme.is_file() else ""
    date = re.search(r"\d{4}-\d\d-\d\d", folder)
    torch_version = re.search(r"torch (\d[\w.+]*)", text)
    parts = [trace.device_name or "a GPU", date.group(0) if date else "",
             f"torch {torch_version.group(1)}" if torch_version else ""]  # fmt: skip
    return dataclasses.replace(trace, recorded_on=", ".join(p for p in parts if p))


# ----------------------------------------------------------------------------- interval math


def _clip(intervals: Iterable[Interval], start: float, end: float) -> list[tuple[float, float]]:
    spans = ((max(i.start_s, start), min(i.end_s, end)) for i in intervals)
    return [(a, b) for a, b in spans if b > a]


def _merge(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of spans as sorted, disjoint spans."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _union_length(spans: Iterable[tuple[float, float]]) -> float:
    return sum(b - a for a, b in _merge(spans))


def _overlap(merged: list[tuple[float, float]], start: float, end: float) -> float:
    """Length of ``[start, end]`` covered by ``merged`` (sorted, disjoint spans)."""
    i = max(bisect.bisect_right(merged, (start, math.inf)) - 1, 0)
    total = 0.0
    for a, b in merged[i:]:
        if a >= end:
            break
        total += max(0.0, min(b, end) - max(a, start))
    return total
