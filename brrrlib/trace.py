"""Where the time goes: a profiler trace cut into a host lane and a device lane.

``bl.profile(fn, *args)`` runs ``fn`` under ``torch.profiler`` and keeps two
lanes of intervals (chapter 03, "Python vs the device"; chapter 04 uses it
through ``bl.diagnose``):

* the **host lane**: the operators as Python dispatched them, one interval per
  top-level ``aten::`` op on the calling thread (plus CUDA runtime calls made
  outside any op, such as ``cudaDeviceSynchronize``);
* the **device lane**: the work the device did. On a GPU these are the CUDA
  kernels, memcpys and memsets the profiler saw on the GPU. On a CPU there is no
  separate device: the same core dispatches and computes. There the device lane
  holds, for each piece of work, the outermost ``aten::`` op that does it: an op
  that calls no other *computing* op. ``aten::matmul`` calls ``aten::mm``, so it
  is a wrapper and ``mm`` is the device op; ``aten::add(x, 1)`` calls only
  ``aten::to`` (to wrap the scalar), so ``add`` is the device op and its inner
  calls are part of it. Pure metadata ops (views, ``empty``) move no data and
  are left out. Ops on other threads (the autograd engine's) count too. So, on a
  CPU, time on neither lane is your Python between ops, and time on the host
  lane alone is wrapper dispatch; an op's own dispatch cost cannot be separated
  from its math, so tiny ops look busier than they are. (On Apple's MPS the
  profiler records no GPU work: the lanes are the CPU's.)

From the lanes it derives what a learner asks first:

* ``wall_s``: wall time of each recorded run (each run ends with a device sync,
  so it includes the device's work);
* ``busy_fraction``: the union of device intervals over the run spans, as
  HolisticTraceAnalysis computes idle time (span minus union). A device that
  is busy 30% of the time is waiting on the host: overhead;
* ``gaps``: the idle stretches of the device, each with a cause told from the
  host lane (the host was inside an op dispatching, or in Python between ops);
* ``top_ops``: device time per op name, largest first;
* ``launch_delays_s`` (CUDA): how long each kernel waited between its launch
  call on the host and its start on the GPU, found through the profiler's
  correlation ids. Large delays mean the host ran far ahead of the device and
  the GPU always had a queue of work: the opposite of overhead-bound.

Parsing works on the profiler's chrome-trace JSON, so ``Trace.from_chrome_trace``
also reads traces recorded elsewhere (a GPU machine, ``tests/data``).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brrrlib._profiler import quiet_profiler

__all__ = ["Gap", "Interval", "OpTime", "Trace", "profile", "quiet_profiler"]

#: Prefix of the ``record_function`` marker around each recorded run.
RUN_MARKER = "brrr_run_"

#: Chrome-trace categories that are work done by the GPU.
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Chrome-trace categories of host-side CUDA API calls (launches, syncs, copies).
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver"})
#: CPU ops that move no data (views, allocation, metadata); not "device work" on a CPU.
_METADATA_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::as_strided",
        "aten::view",
        "aten::_unsafe_view",
        "aten::reshape",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::detach",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::select",
        "aten::slice",
        "aten::alias",
        "aten::lift_fresh",
    }
)
#: Profiler name of the call into a torch.compile'd (inductor) graph: on a CPU, the fused
#: kernels run inside it. Around it, "Torch-Compiled Region" and "TorchDynamo Cache Lookup"
#: are the compiled function's own host-side overhead.
_COMPILED_GRAPH = "## Call CompiledFxGraph"
#: A gap is blamed on dispatch when the host lane was inside an op for at least this
#: fraction of it; otherwise the host was running Python between ops.
_DISPATCH_BLAME_FRACTION = 0.5

# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Interval:
    """One op on one lane: ``name`` ran from ``start_s`` to ``end_s``.

    Times are seconds from the start of the first recorded run. ``lane`` is
    ``"host"``, ``"device"``, or ``"launch"`` (a CUDA runtime call that carries
    a correlation id: kept to measure launch-to-kernel delays, not drawn);
    ``category`` is the op family (``"matmul"``, ``"normalization"``,
    ``"pointwise"``, ``"reduction"``, ``"other"`` as in ``bl.count``, plus
    ``"memcpy"`` for GPU copies and ``"fused"`` for a torch.compile'd graph);
    ``run`` is the index of the recorded run it belongs to; ``correlation``
    links a CUDA launch on the host to its kernel.
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

    Build one with ``bl.profile(fn, *args)`` or ``Trace.from_chrome_trace(path)``.
    Fields keep the raw intervals; everything else is derived. See the module
    docstring for what the lanes mean on a CPU and on a GPU.
    """

    intervals: tuple[Interval, ...]
    runs: tuple[tuple[float, float], ...]  # (start_s, end_s) of each recorded run
    device: str  # "cuda" when the device lane holds GPU kernels, else "cpu"
    label: str | None = None
    chrome_trace: str = field(default="", repr=False, compare=False)

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
        return _median(self.wall_s)

    def busy_s(self, run: int | None = None) -> float:
        """Seconds the device lane was busy (union of its intervals) in ``run`` or all runs."""
        return sum(
            _union_length(_clip(self._device_in(r), *self.runs[r])) for r in self._run_ids(run)
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
    def gaps(self) -> tuple[Gap, ...]:
        """Every idle stretch of the device lane inside a run, with its cause."""
        out: list[Gap] = []
        host = self.host
        for r, (start, end) in enumerate(self.runs):
            busy = _merge(_clip(self._device_in(r), start, end))
            host_busy = _merge(_clip([i for i in host if i.run == r], start, end))
            cursor = start
            for b0, b1 in [*busy, (end, end)]:
                if b0 > cursor:
                    covered = _overlap(host_busy, cursor, b0) / (b0 - cursor)
                    cause = "dispatch" if covered >= _DISPATCH_BLAME_FRACTION else "python"
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

    @property
    def launch_delays_s(self) -> tuple[float, ...]:
        """CUDA only: per kernel, its start on the GPU minus the start of its launch call.

        Matched through correlation ids. A few microseconds is the bare launch
        latency: the GPU started the kernel as soon as it was asked, so it was
        waiting on the host. Delays of milliseconds mean the host ran that far
        ahead and the GPU had a queue of work. Empty on a CPU.
        """
        launches = {
            i.correlation: i.start_s
            for i in self.intervals
            if i.lane == "launch" and i.correlation is not None
        }
        return tuple(
            i.start_s - launches[i.correlation]
            for i in self.device_intervals
            if i.correlation in launches
        )

    @property
    def run_ahead_s(self) -> float:
        """Largest launch-to-start delay: how far the host got ahead of the GPU (0 on CPU)."""
        d = self.launch_delays_s
        return max(d) if d else 0.0

    def _run_ids(self, run: int | None) -> range:
        if run is None:
            return range(len(self.runs))
        if not 0 <= run < len(self.runs):
            raise ValueError(f"run={run} is out of range: this trace has {len(self.runs)} runs")
        return range(run, run + 1)

    def _device_in(self, run: int) -> list[Interval]:
        return [i for i in self.intervals if i.lane == "device" and i.run == run]

    # -- building
    @classmethod
    def from_chrome_trace(
        cls, source: str | os.PathLike | Mapping | Sequence, *, label: str | None = None
    ) -> Trace:
        """Parse a ``torch.profiler`` chrome trace (a path, a JSON dict, or an event list).

        Runs are the ``record_function`` markers named ``brrr_run_<i>`` that
        ``bl.profile`` writes; a trace without them is one run spanning all its
        events. Timestamps (``ts``, ``dur``) are microseconds in the file.
        """
        raw_text = ""
        if isinstance(source, (str, os.PathLike)):
            raw_text = Path(source).read_text()
            data: Any = json.loads(raw_text)
        else:
            data = source
        events = data.get("traceEvents", []) if isinstance(data, Mapping) else data
        if not isinstance(events, (list, tuple)):
            raise TypeError(
                "source must be a chrome-trace path, a dict with 'traceEvents', or a list of "
                f"events; got {type(source).__name__}"
            )
        if not raw_text:
            raw_text = json.dumps({"traceEvents": list(events)})
        intervals, runs, device = _parse(events)
        return cls(tuple(intervals), tuple(runs), device, label, raw_text)

    # -- output
    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write the trace as chrome-trace JSON; open it in https://ui.perfetto.dev or chrome://tracing."""
        path = Path(path)
        text = self.chrome_trace or json.dumps({"traceEvents": self._synthetic_events()})
        path.write_text(text)
        return path

    def _synthetic_events(self) -> list[dict]:
        tid = {"host": 1, "device": 2, "launch": 1}
        return [
            {
                "ph": "X",
                "name": i.name,
                "cat": i.category,
                "pid": 0,
                "tid": tid[i.lane],
                "ts": i.start_s * 1e6,
                "dur": i.duration_s * 1e6,
            }
            for i in self.intervals
        ]

    def plot(self, ax=None, *, run: int | None = None):
        """Draw the timeline: host lane over device lane, idle gaps shaded, ops labelled.

        ``run`` picks one recorded run (default: all of them, separated by dashed
        lines). Returns the matplotlib ``Axes``.
        """
        from matplotlib.patches import Rectangle

        created = ax is None
        if ax is None:
            import matplotlib.pyplot as plt

            _, ax = plt.subplots(figsize=(10, 2.8))
        runs = list(self._run_ids(run))
        t0 = self.runs[runs[0]][0] if runs else 0.0
        t1 = self.runs[runs[-1]][1] if runs else 1.0
        span = max(t1 - t0, 1e-9)
        scale, unit = (1e3, "ms") if span >= 1e-3 else (1e6, "µs")
        colors = {
            "matmul": "tab:blue",
            "pointwise": "tab:orange",
            "reduction": "tab:green",
            "normalization": "tab:purple",
            "memcpy": "tab:brown",
            "fused": "tab:olive",
            "other": "tab:gray",
        }
        lanes = {"host": 1.0, "device": 0.0}
        for i in self.intervals:
            if i.lane not in lanes or i.run not in runs:
                continue
            x = (i.start_s - t0) * scale
            w = i.duration_s * scale
            y = lanes[i.lane]
            ax.broken_barh(
                [(x, w)],
                (y - 0.35, 0.7),
                facecolors=colors.get(i.category, "tab:gray"),
                edgecolors="white",
                linewidth=0.3,
            )
            text = _short(i.name)
            if w > 0.007 * len(text) * span * scale:  # label only where it fits
                ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=7, clip_on=True)
        gaps = [g for g in self.gaps if g.run in runs]
        for g in gaps:
            ax.broken_barh(
                [((g.start_s - t0) * scale, g.duration_s * scale)],
                (-0.35, 0.7),
                facecolors="none",
                edgecolors="tab:red",
                hatch="////",
                linewidth=0.0,
                alpha=0.5,
            )
        for r in runs[1:]:
            ax.axvline((self.runs[r][0] - t0) * scale, color="k", ls="--", lw=0.8)
        ax.set_yticks([0.0, 1.0])
        device_name = "GPU kernels" if self.device == "cuda" else "CPU op bodies"
        ax.set_yticklabels([f"device\n({device_name})", "host\n(dispatched ops)"])
        ax.set_ylim(-0.6, 1.6)
        ax.set_xlim(0, span * scale)
        ax.set_xlabel(f"time since run start ({unit})")
        title = self.label or "trace"
        ax.set_title(
            f"{title}: device busy {self.busy_fraction:.0%} (hatched = device idle)", loc="left"
        )
        used = sorted({i.category for i in self.intervals if i.lane in lanes})
        handles = [Rectangle((0, 0), 1, 1, color=colors.get(c, "tab:gray")) for c in used]
        if handles:
            ax.legend(
                handles,
                used,
                loc="lower right",
                bbox_to_anchor=(1.0, 1.0),
                fontsize=7,
                ncol=len(used),
                frameon=False,
            )
        if created:
            ax.figure.tight_layout()
        return ax

    def _timeline_img(self) -> str:
        """The first run's timeline as an inline PNG, on a pyplot-free Figure (no stray plots)."""
        import base64
        import io

        from matplotlib.figure import Figure

        if not self.runs:
            return ""
        fig = Figure(figsize=(9, 2.4), dpi=80)
        ax = fig.add_subplot()
        self.plot(ax=ax, run=0)
        ax.set_title(ax.get_title(loc="left") + " (run 0)", loc="left")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        data = base64.b64encode(buf.getvalue()).decode()
        return f"<img src='data:image/png;base64,{data}' alt='timeline' style='max-width:100%'>"

    def summary(self) -> str:
        """A few lines: runs and wall time, device busy, idle by cause, run-ahead, top ops."""
        lines = []
        what = f" of {self.label}" if self.label else ""
        w = self.wall_s
        lines.append(
            f"Trace{what} on {self.device}: {len(w)} run(s), wall {_fmt_s(self.median_wall_s)} "
            f"median (min {_fmt_s(min(w) if w else 0.0)}, max {_fmt_s(max(w) if w else 0.0)})"
        )
        idle = self.idle_by_cause()
        total = sum(w) or 1.0
        causes = ", ".join(
            f"{k} {v / total:.0%}" for k, v in sorted(idle.items(), key=lambda kv: -kv[1])
        )
        lines.append(
            f"  device busy {self.busy_fraction:.0%} of wall time; idle {sum(idle.values()) / total:.0%}"
            + (f" ({causes})" if causes else "")
        )
        d = self.launch_delays_s
        if d:
            lines.append(
                f"  host ran ahead: launch -> kernel start median {_fmt_s(_median(d))}, "
                f"max {_fmt_s(max(d))} over {len(d)} kernels"
            )
        for op in self.top_ops(5):
            lines.append(
                f"  {op.share:5.0%}  {_fmt_s(op.total_s):>9}  {op.calls:4d}x  {_short(op.name, 60)}  [{op.category}]"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        import html

        rows = "".join(
            f"<tr><td title='{html.escape(op.name)}'>{html.escape(_short(op.name, 60))}</td><td>{op.category}</td><td>{op.calls}</td>"
            f"<td>{_fmt_s(op.total_s)}</td><td>{op.share:.0%}</td></tr>"
            for op in self.top_ops(8)
        )
        head = html.escape(self.summary().splitlines()[0])
        idle = self.idle_by_cause()
        total = sum(self.wall_s) or 1.0
        causes = ", ".join(f"{k} {v / total:.0%}" for k, v in idle.items())
        extra = ""
        if self.launch_delays_s:
            d = self.launch_delays_s
            extra = (
                f"<br>host ran ahead: launch &rarr; kernel start median {_fmt_s(_median(d))}, "
                f"max {_fmt_s(max(d))}"
            )
        return (
            f"<div><b>{head}</b><br>{self._timeline_img()}<br>"
            f"device busy <b>{self.busy_fraction:.0%}</b> of wall time"
            f"{'; idle: ' + causes if causes else ''}{extra}"
            "<table><tr><th>op</th><th>category</th><th>calls</th><th>device time</th>"
            f"<th>share</th></tr>{rows}</table>"
            "<small>trace.plot() draws the timeline; trace.export_chrome_trace(path) opens in "
            "Perfetto.</small></div>"
        )


# ----------------------------------------------------------------------------- capture


def profile(
    fn: Callable, *args, runs: int = 3, warmup: int = 1, label: str | None = None, **kwargs
) -> Trace:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler`` and return its ``Trace``.

    Method: call ``fn`` ``warmup`` times unrecorded (first calls pay one-off
    costs: allocator growth, lazy init, autotuning), then record ``runs`` calls,
    each inside a ``record_function("brrr_run_<i>")`` marker that ends with a
    device sync so the run's wall time includes the device's work. The
    profiler's chrome trace is parsed into lanes (see the module docstring).
    The profiler adds a few microseconds per op, so traces of tiny ops look
    slower than ``bl.benchmark`` says; use traces for *where* time goes and
    ``bl.benchmark`` for *how much*.

    Kineto's log lines are kept out of your notebook (see ``quiet_profiler``).
    """
    import torch
    from torch.profiler import ProfilerActivity, record_function

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}; pass the function itself")
    if not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be a positive integer, got {runs!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative integer, got {warmup!r}")

    cuda = torch.cuda.is_available()
    for _ in range(warmup):
        fn(*args, **kwargs)
    _sync(cuda)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = torch.profiler.profile(activities=activities)
    with quiet_profiler():
        prof.start()
    try:
        # The profiler's first recorded event pays its lazy set-up (~0.5 ms on a CPU);
        # pay it here, outside the runs, so run 0 is not charged for it.
        with record_function("brrr_profiler_warmup"):
            torch.empty(0)
        for r in range(runs):
            with record_function(f"{RUN_MARKER}{r}"):
                fn(*args, **kwargs)
                _sync(cuda)
    finally:
        with quiet_profiler():
            prof.stop()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        with quiet_profiler():
            prof.export_chrome_trace(str(path))
        trace = Trace.from_chrome_trace(path, label=label or getattr(fn, "__name__", None))
    if not trace.host and not trace.device_intervals:
        raise ValueError(
            f"fn={getattr(fn, '__name__', fn)!r} ran no torch operators: the trace is empty. "
            "Profile a function that does tensor work (and call it, don't pass its result)."
        )
    return trace


def _sync(cuda: bool) -> None:
    """Wait for queued device work, so a run's marker ends when its work ends."""
    import torch

    if cuda:
        torch.cuda.synchronize()
    elif torch.backends.mps.is_available():
        torch.mps.synchronize()


# ----------------------------------------------------------------------------- parsing


def _parse(events: Iterable[Mapping]) -> tuple[list[Interval], list[tuple[float, float]], str]:
    """Chrome-trace events -> (intervals in seconds from the first run, run spans, device)."""
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    markers = sorted(
        (
            e
            for e in xs
            if str(e.get("name", "")).startswith(RUN_MARKER)
            and e.get("cat") != "gpu_user_annotation"
        ),
        key=lambda e: float(e["ts"]),
    )
    cpu_ops = [e for e in xs if e.get("cat") == "cpu_op"]
    kernels = [e for e in xs if e.get("cat") in _DEVICE_CATS]
    runtime = [e for e in xs if e.get("cat") in _RUNTIME_CATS]
    device = "cuda" if kernels else "cpu"

    if markers:
        spans_us = [(float(m["ts"]), float(m["ts"]) + float(m.get("dur", 0.0))) for m in markers]
        host_tid = (markers[0].get("pid"), markers[0].get("tid"))
    else:
        timed = cpu_ops + kernels + runtime
        if not timed:
            return [], [], device
        spans_us = [
            (
                min(float(e["ts"]) for e in timed),
                max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in timed),
            )
        ]
        host_tid = _busiest_thread(cpu_ops or runtime)
    origin = spans_us[0][0]

    def run_of(ts: float) -> int | None:
        for r, (a, b) in enumerate(spans_us):
            if a <= ts <= b:
                return r
        return None

    def sec(ts: float) -> float:
        return (ts - origin) * 1e-6

    intervals: list[Interval] = []
    # Nesting of CPU ops per thread: top-level ops form the host lane; on CPU the leaves
    # (ops that call no other op) form the device lane.
    depth_info = _nesting(cpu_ops + [e for e in runtime])
    for e in cpu_ops + runtime:
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        r = run_of(ts)
        if r is None:
            continue
        name = str(e.get("name", "?"))
        corr = _correlation(e)
        top, leaf = depth_info[id(e)]
        on_host_thread = (e.get("pid"), e.get("tid")) == host_tid
        if e.get("cat") in _RUNTIME_CATS:
            if corr is not None:  # keep launches for launch -> kernel delay
                intervals.append(Interval(name, sec(ts), sec(ts + dur), "launch", "other", r, corr))
            if top and on_host_thread:
                intervals.append(Interval(name, sec(ts), sec(ts + dur), "host", "other", r, None))
            continue
        cat = _category(name)
        if top and on_host_thread:
            intervals.append(Interval(name, sec(ts), sec(ts + dur), "host", cat, r, None))
        if device == "cpu" and leaf:
            intervals.append(Interval(name, sec(ts), sec(ts + dur), "device", cat, r, None))

    if device == "cuda":
        launch_ts = {c: float(e["ts"]) for e in runtime if (c := _correlation(e)) is not None}
        flow_corr = _flow_correlations(events)
        for e in kernels:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
            corr = _correlation(e)
            if corr is None:
                corr = flow_corr.get((e.get("pid"), e.get("tid"), ts))
            # A kernel belongs to the run whose marker contains its launch (or, failing
            # that, its start): with the sync at the end of each run both agree.
            r = run_of(launch_ts[corr]) if corr in launch_ts else run_of(ts)
            if r is None:
                continue
            name = str(e.get("name", "?"))
            cat = "memcpy" if e.get("cat") != "kernel" else _kernel_category(name)
            intervals.append(Interval(name, sec(ts), sec(ts + dur), "device", cat, r, corr))

    intervals.sort(key=lambda i: (i.start_s, -i.end_s))
    runs = [(sec(a), sec(b)) for a, b in spans_us]
    return intervals, runs, device


def _nesting(events: list[Mapping]) -> dict[int, tuple[bool, bool]]:
    """For each event: (top level on its thread, is a CPU "device" op), by time containment.

    "Computes" means an op of a compute family (matmul, pointwise, reduction,
    normalization). ``aten::matmul`` -> ``aten::mm`` makes ``matmul`` a wrapper;
    ``aten::add(x, 1)`` -> ``aten::to`` (wrapping the scalar) leaves ``add`` doing the work.
    """
    out: dict[int, tuple[bool, bool]] = {}
    by_thread: dict[tuple, list[Mapping]] = {}
    for e in events:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0))))
        stack: list[tuple[Mapping, float]] = []
        wraps: set[int] = set()
        for e in evs:
            ts = float(e["ts"])
            end = ts + float(e.get("dur", 0.0))
            while stack and ts >= stack[-1][1]:
                stack.pop()
            name = str(e.get("name", ""))
            if _local_category(name) in _COMPUTE_FAMILIES or name.startswith(_COMPILED_GRAPH):
                wraps.update(id(a) for a, _ in stack)
            out[id(e)] = (not stack, False)
            stack.append((e, end))
        # Second pass: the device op is the outermost op that is neither a wrapper nor a
        # metadata op; ops nested inside it (scalar wrapping, output allocation) are its own
        # setup, not separate device work.
        stack = []
        for e in evs:
            ts = float(e["ts"])
            while stack and ts >= stack[-1][1]:
                stack.pop()
            inside_device_op = any(flag for _, _, flag in stack)
            name = str(e.get("name", ""))
            is_device = not inside_device_op and (
                # a torch.compile'd graph is one unit of work, whatever it calls inside
                name.startswith(_COMPILED_GRAPH)
                or (id(e) not in wraps and name.startswith("aten::") and name not in _METADATA_OPS)
            )
            out[id(e)] = (out[id(e)][0], is_device)
            stack.append((e, ts + float(e.get("dur", 0.0)), is_device))
    return out


def _correlation(e: Mapping) -> int | None:
    args = e.get("args") or {}
    c = args.get("correlation")
    return int(c) if c is not None else None


def _flow_correlations(events: Iterable[Mapping]) -> dict[tuple, int]:
    """Flow-event fallback: ``ac2g`` flow ends ("f") sit on the kernel they point at."""
    return {
        (e.get("pid"), e.get("tid"), float(e["ts"])): int(e["id"])
        for e in events
        if e.get("ph") == "f" and e.get("cat") == "ac2g" and "id" in e and "ts" in e
    }


def _busiest_thread(events: list[Mapping]) -> tuple:
    counts: dict[tuple, int] = {}
    for e in events:
        k = (e.get("pid"), e.get("tid"))
        counts[k] = counts.get(k, 0) + 1
    return max(counts, key=counts.get) if counts else (None, None)


_MATMUL_OPS = (
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "matmul",
    "linear",
    "conv",
    "einsum",
    "dot",
    "mv",
    "addmv",
    "_scaled_dot_product",
    "scaled_dot_product",
    "convolution",
    "addbmm",
)
_NORM_OPS = (
    "softmax",
    "log_softmax",
    "layer_norm",
    "batch_norm",
    "group_norm",
    "rms_norm",
    "native_layer_norm",
    "native_batch_norm",
    "instance_norm",
)
_REDUCE_OPS = (
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "prod",
    "norm",
    "var",
    "std",
    "argmax",
    "argmin",
    "cumsum",
    "logsumexp",
    "all",
    "any",
)
_OTHER_OPS = (
    "copy_",
    "clone",
    "contiguous",
    "cat",
    "stack",
    "index",
    "gather",
    "scatter",
    "fill_",
    "zero_",
    "zeros",
    "ones",
    "full",
    "arange",
    "randn",
    "rand",
    "to",
    "_to_copy",
    "item",
    "_local_scalar_dense",
    "embedding",
    "cumprod",
    "sort",
    "topk",
    "where",
    "masked_fill",
)


def _category(name: str) -> str:
    """Op family of an ``aten::`` name: ``bl.count``'s categorizer when it has one."""
    from brrrlib import counting

    if name.startswith(_COMPILED_GRAPH):
        return "fused"
    local = _local_category(name)
    categorize = getattr(counting, "categorize", None)
    if not callable(categorize) or not name.startswith("aten::"):
        return local
    shared = str(categorize(name))
    # A bare profiler name has no overload; where bl.count cannot tell (it says "other"),
    # the name table decides (e.g. "aten::add" resolves to the Python-int overload there).
    return local if shared == "other" else shared


_COMPUTE_FAMILIES = frozenset({"matmul", "pointwise", "reduction", "normalization"})


def _local_category(name: str) -> str:
    """Op family of an ``aten::`` name from a small name table (views/copies are "other")."""
    base = name.split("::")[-1].split(".")[0]
    if base in _MATMUL_OPS or base.startswith(
        ("conv", "_convolution", "cudnn_conv", "mkldnn_conv")
    ):
        return "matmul"
    if base.lstrip("_") in _NORM_OPS or base.endswith("_norm"):
        return "normalization"
    if base in _REDUCE_OPS:
        return "reduction"
    if base in _OTHER_OPS or base in _METADATA_OPS or name in _METADATA_OPS:
        return "other"
    return "pointwise" if name.startswith("aten::") else "other"


def _kernel_category(name: str) -> str:
    """Op family of a CUDA kernel from its (mangled or demangled) name."""
    n = name.lower()
    if any(
        k in n
        for k in (
            "gemm",
            "gemv",
            "cutlass",
            "xmma",
            "sgemm",
            "hgemm",
            "cublas",
            "conv",
            "wgrad",
            "dgrad",
            "flash",
            "fmha",
            "sm90_",
            "sm80_",
            "ampere_",
            "volta_",
            "turing_",
        )
    ):
        return "matmul"
    if any(
        k in n
        for k in (
            "softmax",
            "layer_norm",
            "layernorm",
            "batch_norm",
            "batchnorm",
            "rms_norm",
            "group_norm",
        )
    ):
        return "normalization"
    if "reduce" in n:
        return "reduction"
    if any(k in n for k in ("elementwise", "vectorized", "pointwise", "unrolled", "triton_poi")):
        return "pointwise"
    if "triton_red" in n or "triton_per" in n:
        return "reduction"
    return "other"


# ----------------------------------------------------------------------------- interval math


def _clip(intervals: Iterable[Interval], start: float, end: float) -> list[tuple[float, float]]:
    out = []
    for i in intervals:
        a, b = max(i.start_s, start), min(i.end_s, end)
        if b > a:
            out.append((a, b))
    return out


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
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in merged)


def _median(xs: Sequence[float]) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _fmt_s(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    seconds = float(f"{seconds:.3g}")  # round first so 999.99 µs prints as 1 ms
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.3g} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if a >= 1e-6:
        return f"{seconds * 1e6:.3g} µs"
    return f"{seconds * 1e9:.3g} ns"


def _short(name: str, n: int = 18) -> str:
    """A label that fits: ``aten::`` dropped; a kernel's C++ signature cut to its bare name."""
    if name.startswith(_COMPILED_GRAPH):
        name = "compiled graph"
    name = name.replace("aten::", "")
    if len(name) > n and ("<" in name or "(" in name):
        bare = re.split(r"[<(]", name.removeprefix("void "), maxsplit=1)[0].strip()
        bare = bare.split("::")[-1] or name
        # Room to spare: name the functor too (CUDAFunctor_add, MulFunctor, sum_functor).
        functors = re.findall(r"\w*(?:Functor|functor)\w*", name)
        with_functor = f"{bare}<{functors[-1]}>" if functors else bare
        name = with_functor if len(with_functor) <= n else bare
    return name if len(name) <= n else name[: n - 1] + "…"
