"""Where the time goes: a profiler trace cut into a host lane and a device lane (chapter 03)."""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import html as _html
import inspect
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
from typing import Any

from brrrlib import _fmt
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


# ------------------------------------------------------------------ running the profiler (warmed up, marked per run, quiet)

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


def _record(fn: Callable, args: tuple, kwargs: dict, *, runs: int, warmup: int) -> Any:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler``; return the stopped profiler."""
    import torch
    from torch.profiler import ProfilerActivity, record_function

    cuda = torch.cuda.is_available()
    for _ in range(warmup):  # 1. first calls pay allocation, lazy init, compilation
        fn(*args, **kwargs)
    _sync(cuda)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    options = {"acc_events": True} if _accepts("acc_events") else {}
    prof = torch.profiler.profile(activities=activities, **options)
    with quiet_profiler():
        prof.start()
    try:
        # 2. CUPTI sets itself up on the first kernel it sees (1-40 ms on an H100), and first
        # launches are slower under the profiler: both paid here, outside every run
        with record_function(WARMUP_MARKER):
            torch.ones(1, device="cuda").add_(1) if cuda else torch.empty(0)
            if warmup:
                fn(*args, **kwargs)
            _sync(cuda)
        for r in range(runs):  # 3. each run's marker ends with a sync: its span holds its work
            with record_function(f"{RUN_MARKER}{r}"):
                fn(*args, **kwargs)
                _sync(cuda)
    finally:
        with quiet_profiler():  # 4. stopped even if fn raised
            prof.stop()
    return prof


def _sync(cuda: bool) -> None:
    """Wait for queued device work (CUDA, else MPS), so a run's marker ends when its work ends."""
    import torch

    from brrrlib.machine import sync

    if cuda:
        sync(torch.device("cuda"))
    elif torch.backends.mps.is_available():
        sync(torch.device("mps"))


def _accepts(option: str) -> bool:
    import torch

    return option in inspect.signature(torch.profiler.profile.__init__).parameters


@contextlib.contextmanager
def quiet_profiler():
    """Keep kineto's log lines and the profiler's warnings about itself out of sight."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # read once, when the profiler first starts
    with warnings.catch_warnings():
        for message in _PROFILER_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        with _kineto_lines_dropped():
            yield


@contextlib.contextmanager
def _kineto_lines_dropped():
    # kineto writes to fd 2 below Python (redirect_stderr cannot catch it): capture the fd,
    # then write back every line that is not kineto's
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


# ------------------------------------------------------------------ reading chrome traces: events in, lane intervals out

#: Chrome-trace categories that are work done by the GPU.
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Chrome-trace categories of host-side CUDA API calls (launches, syncs, copies).
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver"})
#: Op families that do arithmetic: an op that calls one of these only wraps it.
_COMPUTE = frozenset({"matmul", "pointwise", "reduction", "normalization"})
# What CUDA kernel names contain (regular expressions), by family (cuBLAS/CUTLASS GEMMs, cuDNN, flash attention,
# ATen's elementwise and reduce kernels, inductor's triton_poi/_red/_per kernels).
_KERNEL_WORDS = (
    (
        "matmul",
        "gemm|gemv|cutlass|xmma|cublas|conv|wgrad|dgrad|flash|fmha|sm[89]0_|ampere_|volta_|turing_",
    ),
    ("normalization", "softmax|layer_?norm|batch_?norm|rms_norm|group_norm"),
    ("reduction", "reduce|triton_red|triton_per"),
    ("pointwise", "elementwise|vectorized|pointwise|unrolled|triton_poi"),
)


def _kernel_category(name: str) -> str:
    """Op family of a CUDA kernel from its (mangled or demangled) name."""
    lowered = name.lower()
    return next((c for c, words in _KERNEL_WORDS if re.search(words, lowered)), "other")


def _load_chrome(source: str | os.PathLike | Mapping | Sequence) -> tuple[list, str, dict]:
    """(events, the JSON text, the trace's other top-level fields) from a path, dict or list."""
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
    meta = (
        {k: v for k, v in data.items() if k != "traceEvents"} if isinstance(data, Mapping) else {}
    )
    return list(events), raw_text or json.dumps({"traceEvents": list(events)}), meta


def _chrome_device_name(meta: Mapping) -> str:
    """The GPU's name from a trace's ``deviceProperties`` ("NVIDIA H100 80GB HBM3"), else ""."""
    props = meta.get("deviceProperties") or []
    return str(props[0].get("name", "")) if props and isinstance(props[0], Mapping) else ""


def _parse_chrome(events: Iterable[Mapping]) -> tuple[list[Interval], list[tuple], str]:
    """Chrome-trace events -> intervals in seconds from run 0's start, run spans, device."""
    events = list(events)
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    cpu_ops = [e for e in xs if e.get("cat") == "cpu_op"]
    kernels = [e for e in xs if e.get("cat") in _DEVICE_CATS]
    runtime = [e for e in xs if e.get("cat") in _RUNTIME_CATS]
    spans_us, host_thread = _run_spans(xs, cpu_ops, kernels, runtime)
    # Kernels inside a run, not the profiler's set-up kernel before run 0: CPU work
    # profiled on a machine with a GPU is still CPU work.
    in_runs = any(a <= float(k["ts"]) <= b for k in kernels for a, b in spans_us)
    device = "cuda" if in_runs else "cpu"
    if not spans_us:
        return [], [], device
    clock = _Clock(spans_us)
    rows = _host_rows(cpu_ops, runtime, clock, host_thread, device)
    if device == "cuda":
        rows += _kernel_rows(kernels, runtime, events, clock)
    rows.sort(key=lambda r: (r.start_s, -r.end_s))
    return rows, [(clock.sec(a), clock.sec(b)) for a, b in spans_us], device


def _run_spans(xs: list[Mapping], cpu_ops, kernels, runtime) -> tuple[list, tuple]:
    """Each run's (start, end) in µs and the thread that ran it (the markers', or the busiest)."""
    markers = sorted(
        (
            e
            for e in xs
            if str(e.get("name", "")).startswith(RUN_MARKER)
            and e.get("cat") != "gpu_user_annotation"
        ),
        key=lambda e: float(e["ts"]),
    )
    if markers:
        spans = [(float(m["ts"]), float(m["ts"]) + float(m.get("dur", 0.0))) for m in markers]
        return spans, (markers[0].get("pid"), markers[0].get("tid"))
    timed = cpu_ops + kernels + runtime
    if not timed:
        return [], (None, None)
    start = min(float(e["ts"]) for e in timed)
    end = max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in timed)
    return [(start, end)], _busiest_thread(cpu_ops or runtime)


class _Clock:
    """Microsecond timestamps -> seconds since run 0's start, and the run that holds them."""

    def __init__(self, spans_us: list[tuple[float, float]]) -> None:
        self.spans_us = spans_us
        self.origin = spans_us[0][0]

    def sec(self, ts: float) -> float:
        return (ts - self.origin) * 1e-6

    def run_of(self, ts: float) -> int | None:
        return next((r for r, (a, b) in enumerate(self.spans_us) if a <= ts <= b), None)


def _host_rows(cpu_ops, runtime, clock: _Clock, host_thread: tuple, device: str) -> list[Interval]:
    """Host lane (top-level ops and runtime calls on the run's thread), launches, CPU device ops."""
    rows: list[Interval] = []
    nesting = _nesting(cpu_ops + runtime)
    for e in cpu_ops + runtime:
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        r = clock.run_of(ts)
        if r is None:
            continue
        name = str(e.get("name", "?"))
        span = (name, clock.sec(ts), clock.sec(ts + dur))
        top, does_work = nesting[id(e)]
        on_host = top and (e.get("pid"), e.get("tid")) == host_thread
        if e.get("cat") in _RUNTIME_CATS:
            corr = _correlation(e)
            if corr is not None:  # kept to measure launch -> kernel delays, not drawn
                rows.append(Interval(*span, "launch", "runtime", r, corr))
            if on_host:
                rows.append(Interval(*span, "host", "runtime", r, None))
            continue
        category = profiler_category(name)
        if on_host:
            rows.append(Interval(*span, "host", category, r, None))
        if device == "cpu" and does_work:
            rows.append(Interval(*span, "device", category, r, None))
    return rows


def _kernel_rows(kernels, runtime, events, clock: _Clock) -> list[Interval]:
    """Device lane on CUDA: each kernel, memcpy and memset, in the run that launched it."""
    launch_ts = {c: float(e["ts"]) for e in runtime if (c := _correlation(e)) is not None}
    flows = _flow_correlations(events)
    rows = []
    for e in kernels:
        ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        corr = _correlation(e)
        if corr is None:
            corr = flows.get((e.get("pid"), e.get("tid"), ts))
        # A kernel belongs to the run whose marker contains its launch (or, failing
        # that, its start): with the sync at the end of each run both agree.
        r = clock.run_of(launch_ts[corr]) if corr in launch_ts else clock.run_of(ts)
        if r is None:
            continue
        name = str(e.get("name", "?"))
        category = "memcpy" if e.get("cat") != "kernel" else _kernel_category(name)
        rows.append(Interval(name, clock.sec(ts), clock.sec(ts + dur), "device", category, r, corr))
    return rows


def _nesting(events: list[Mapping]) -> dict[int, tuple[bool, bool]]:
    """For each event: (top level on its thread, does the work), by time containment."""
    out: dict[int, tuple[bool, bool]] = {}
    by_thread: dict[tuple, list[Mapping]] = {}
    for e in events:
        by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0.0))))
        wrappers = _wrappers(evs)
        stack: list[tuple[float, bool]] = []  # (end, does the work) of enclosing events
        for e in evs:
            ts = float(e["ts"])
            while stack and ts >= stack[-1][0]:
                stack.pop()
            name = str(e.get("name", ""))
            does_work = not any(work for _, work in stack) and (
                name.startswith(COMPILED_GRAPH)
                or (id(e) not in wrappers and name.startswith("aten::") and not moves_no_data(name))
            )
            out[id(e)] = (not stack, does_work)
            stack.append((ts + float(e.get("dur", 0.0)), does_work))
    return out


def _wrappers(evs: list[Mapping]) -> set[int]:
    """Ids of the events (sorted by start) that enclose an op of a compute family."""
    wraps: set[int] = set()
    stack: list[tuple[Mapping, float]] = []
    for e in evs:
        ts = float(e["ts"])
        while stack and ts >= stack[-1][1]:
            stack.pop()
        name = str(e.get("name", ""))
        if profiler_category(name) in _COMPUTE or name.startswith(COMPILED_GRAPH):
            # an op with a FLOP formula of its own (an LSTM layer) is the work, even when it
            # encloses a helper op (its bias add): only true wrappers hand their time down
            wraps.update(id(a) for a, _ in stack if not has_matmul_formula(str(a.get("name", ""))))
        stack.append((e, ts + float(e.get("dur", 0.0))))
    return wraps


def _correlation(e: Mapping) -> int | None:
    c = (e.get("args") or {}).get("correlation")
    return int(c) if c is not None else None


def _flow_correlations(events: Iterable[Mapping]) -> dict[tuple, int]:
    """Flow-event fallback: ``ac2g`` flow ends ("f") sit on the kernel they point at."""
    return {
        (e.get("pid"), e.get("tid"), float(e["ts"])): int(e["id"])
        for e in events
        if e.get("ph") == "f" and e.get("cat") == "ac2g" and "id" in e and "ts" in e
    }


def _busiest_thread(events: list[Mapping]) -> tuple:
    busiest = Counter((e.get("pid"), e.get("tid")) for e in events).most_common(1)
    return busiest[0][0] if busiest else (None, None)


# ------------------------------------------------------------------ showing a trace: the timeline drawing and the summary

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


def _timeline_plot(trace: Any, ax=None, *, runs: list[int]):
    """Draw ``runs`` of ``trace`` on ``ax`` (a new figure when None); return the Axes."""
    created = ax is None
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(10, 2.8))
    t0 = trace.runs[runs[0]][0] if runs else 0.0
    t1 = trace.runs[runs[-1]][1] if runs else 1.0
    span = max(t1 - t0, 1e-9)
    scale, unit = (1e3, "ms") if span >= 1e-3 else (1e6, "µs")
    lanes = {"host": 1.0, "device": 0.0}
    for i in trace.intervals:
        if i.lane not in lanes or i.run not in runs:
            continue
        x, w, y = (i.start_s - t0) * scale, i.duration_s * scale, lanes[i.lane]
        ax.broken_barh(
            [(x, w)],
            (y - 0.35, 0.7),
            facecolors=COLORS.get(i.category, "tab:gray"),
            edgecolors="white",
            linewidth=0.3,
        )
        text = _short(i.name)
        if w > 0.007 * len(text) * span * scale:  # label only where it fits
            ax.text(x + w / 2, y, text, ha="center", va="center", fontsize=7, clip_on=True)
    for g in (g for g in trace.gaps if g.run in runs):
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
        ax.axvline((trace.runs[r][0] - t0) * scale, color="k", ls="--", lw=0.8)
    _decorate(trace, ax, span * scale, unit, lanes, runs)
    if created:
        ax.figure.tight_layout()
    return ax


def _decorate(trace: Any, ax, width: float, unit: str, lanes: dict, runs) -> None:
    """Axis labels, title and the legend of the categories drawn."""
    from matplotlib.patches import Rectangle

    ax.set_yticks([0.0, 1.0])
    device_name = "GPU kernels" if trace.device == "cuda" else "CPU op bodies"
    ax.set_yticklabels([f"device\n({device_name})", "host\n(dispatched ops)"])
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlim(0, width)
    ax.set_xlabel(f"time since run start ({unit})")
    title = trace.label or "trace"
    if trace.recorded_on:
        title += f" (recorded: {trace.recorded_on})"
    runs = list(runs)
    busy = sum(trace.busy_s(r) for r in runs) / max(sum(trace.wall_s[r] for r in runs), 1e-12)
    which = f" in run {runs[0]}" if len(runs) == 1 else ""
    ax.set_title(f"{title}: device busy {busy:.0%}{which} (hatched = device idle)", loc="left")
    used = sorted({i.category for i in trace.intervals if i.lane in lanes})
    handles = [Rectangle((0, 0), 1, 1, color=COLORS.get(c, "tab:gray")) for c in used]
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


def _timeline_image(trace: Any) -> str:
    """The first steady run's timeline as an inline PNG, on a pyplot-free Figure (no stray plots)."""
    from matplotlib.figure import Figure

    if not trace.runs:
        return ""
    run = trace.steady_runs[0] if trace.steady_runs else 0
    fig = Figure(figsize=(9, 2.4), dpi=80)
    ax = fig.add_subplot()
    _timeline_plot(trace, ax, runs=[run])
    ax.set_title(ax.get_title(loc="left") + f" (run {run})", loc="left")
    busy = trace.busy_fraction_per_run[run] if run < len(trace.busy_fraction_per_run) else None
    alt = (
        f"Timeline of {trace.label or 'the workload'}, run {run}: the host lane (Python and "
        f"dispatch) above the device lane (kernels)"
        + (f"; the device was busy {busy:.0%} of the run" if busy is not None else "")
    )
    return _fmt.figure_img(fig, alt, "100%")


def _summary_lines(trace: Any) -> list[str]:
    """The summary: a head line, device busy and idle, findings, the top five ops."""
    w, total = trace.wall_s, sum(trace.wall_s) or 1.0
    where = f" of {trace.label}" if trace.label else ""
    machine = trace.recorded_on or trace.device_name
    on = trace.device
    if machine:
        on += f" ({'recorded on ' if trace.recorded_on else ''}{machine})"
    lines = [
        f"Trace{where} on {on}: {len(w)} run(s), wall {_fmt.seconds(trace.median_wall_s)} median "
        f"(min {_fmt.seconds(min(w, default=0.0))}, max {_fmt.seconds(max(w, default=0.0))})"
    ]
    idle = trace.idle_by_cause()
    causes = ", ".join(
        f"{k} {_fmt.percent(v, total)}" for k, v in sorted(idle.items(), key=lambda kv: -kv[1])
    )
    lines.append(
        f"  device busy {_fmt.percent(trace.busy_s(), total)} of wall time; idle "
        f"{_fmt.percent(sum(idle.values()), total)}" + (f" ({causes})" if causes else "")
    )
    lines += [f"  {line}" for line in _findings(trace)]
    for op in trace.top_ops(5):
        lines.append(
            f"  {_fmt.percent(op.share, 1.0):>5}  {_fmt.seconds(op.total_s):>9}  {op.calls:4d}x  "
            f"{_short(op.name, 60)}  [{op.category}]"
        )
    return lines


def _findings(trace: Any) -> list[str]:
    """Launch delays said as what they mean, host time outside ops, an inflated run 0."""
    out = []
    d = trace.launch_delays_s
    if d:
        delays = (
            f"launch -> kernel start median {_fmt.seconds(_fmt.median(d))}, "
            f"max {_fmt.seconds(max(d))} over {len(d)} kernels"
        )
        if trace.host_ran_ahead:
            queued = [q for q in trace.queued_s if q >= RAN_AHEAD_MIN_S]
            out.append(
                f"host ran ahead: {len(queued)} of {len(d)} kernels queued behind earlier work, "
                f"up to {_fmt.seconds(max(queued))} ({delays})"
            )
        else:
            out.append(
                f"{delays}; the GPU was idle when each launch arrived: it waited on the host"
            )
    if trace.runs:
        out.append(
            f"host outside any op: {_fmt.seconds(_fmt.median(trace.outside_ops_s))} per run, "
            f"{_fmt.percent(trace.outside_ops_fraction, 1.0)} of wall time (Python between ops)"
        )
    if trace.steady_runs[:1] == (1,):
        out.append(
            f"run 0 took {trace.first_run_inflation:.1f}x the later runs: set-up, not the "
            "workload; read runs 1 and later (trace.steady_runs)"
        )
    return out


def _timeline_html(trace: Any) -> str:
    """The notebook readout: head line, timeline, findings, the top eight ops as a table."""
    esc, ops = _html.escape, trace.top_ops(8)
    rows = [
        (
            _short(op.name, 60),
            op.category,
            f"{op.calls}",
            _fmt.seconds(op.total_s),
            _fmt.percent(op.share, 1.0),
        )
        for op in ops
    ]
    header = ("op", "category", "calls", "device time", "share")
    head, busy = _summary_lines(trace)[:2]
    notes = "<br>".join(esc(line) for line in [busy.strip(), *_findings(trace)])
    return (
        f"<div><b>{esc(head)}</b><br>{_timeline_image(trace)}<br>{notes}"
        + _fmt.html_table(header, rows, hover=[op.name for op in ops])
        + "<small style='color:var(--jp-ui-font-color2, #666)'>trace.plot() draws the timeline; "
        "trace.export_chrome_trace(path) opens in Perfetto.</small></div>"
    )


def _short(name: str, n: int = 18) -> str:
    """A label that fits: ``aten::`` dropped; a kernel's C++ signature cut to its bare name."""
    if name.startswith(COMPILED_GRAPH):
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


@dataclass(frozen=True)
class Interval:
    """One op on one lane, in seconds from the start of the first recorded run."""

    name: str
    start_s: float
    end_s: float
    lane: str  # "host", "device", or "launch" (a CUDA call kept to match kernels, not drawn)
    category: str = "other"  # bl.count's categories, or "memcpy", "fused", "runtime"
    run: int = 0
    correlation: int | None = None  # links a CUDA launch to its kernel

    @property
    def duration_s(self) -> float:
        """Length of the interval in seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Gap:
    """A stretch where the device lane was idle inside a run: it waited for the host."""

    start_s: float
    end_s: float
    run: int
    cause: str  # "dispatch" (host inside an op for most of it) or "python" (between ops)
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
    """A profiled function: host and device intervals over ``len(runs)`` recorded runs."""

    intervals: tuple[Interval, ...]
    runs: tuple[tuple[float, float], ...]  # (start_s, end_s) of each recorded run
    device: str  # "cuda" when the device lane holds GPU kernels, else "cpu"
    label: str | None = None
    chrome_trace: str = field(default="", repr=False, compare=False)
    device_name: str = ""
    recorded_on: str = ""  # where and when a shipped recording was made; "" when profiled here

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
        """Run 0's wall time over the median of the later runs (NaN with one run)."""
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
        """Per run, host seconds outside any op (Python between ops; profiler bookkeeping too)."""
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
        return [
            (launches[i.correlation], i) for i in self.device_intervals if i.correlation in launches
        ]

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
        """Parse a chrome trace (a path, a JSON dict, or an event list); no run markers: one run."""
        events, raw_text, meta = _load_chrome(source)
        rows, runs, device = _parse_chrome(events)
        return cls(tuple(rows), tuple(runs), device, label, raw_text, _chrome_device_name(meta))

    def export_chrome_trace(self, path: str | os.PathLike) -> Path:
        """Write the trace as chrome-trace JSON; open it in https://ui.perfetto.dev or chrome://tracing."""
        path = Path(path)
        tid = {"host": 1, "device": 2, "launch": 1}
        events = [
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
        path.write_text(self.chrome_trace or json.dumps({"traceEvents": events}))
        return path

    # -- reading (drawn and worded by brrrlib._timeline)
    def plot(self, ax=None, *, run: int | None = None):
        """Draw host lane over device lane for ``run`` (default: all runs); returns the Axes."""
        return _timeline_plot(self, ax, runs=list(self._run_ids(run)))

    def summary(self) -> str:
        """A few lines: runs and wall time, device busy, launches, time outside ops, top ops."""
        return "\n".join(_summary_lines(self))

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        return _timeline_html(self)


# ----------------------------------------------------------------------------- capture


def profile(
    fn: Callable, *args, runs: int = 3, warmup: int = 1, label: str | None = None, **kwargs
) -> Trace:
    """Run ``fn(*args, **kwargs)`` under ``torch.profiler`` and return its ``Trace``."""
    _check(fn, runs, warmup)
    prof = _record(fn, args, kwargs, runs=runs, warmup=warmup)
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
    """Median self time per op category over ``runs`` profiled calls (chapter 01)."""
    import torch

    _check(fn, runs, warmup)
    prof = _record(fn, args, kwargs, runs=runs, warmup=warmup)
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
    """Profiler events grouped by the run marker whose host-side span holds their start."""
    import torch

    events = list(events)
    spans = {
        int(e.name[len(RUN_MARKER) :]): (e.time_range.start, e.time_range.end)
        for e in events
        if e.name.startswith(RUN_MARKER) and e.device_type == torch.autograd.DeviceType.CPU
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
    """Sum profiler rows by category: ({category: CPU self s}, {category: device self s})."""
    import torch

    cpu = dict.fromkeys(CATEGORIES, 0.0)
    device = dict.fromkeys(CATEGORIES, 0.0)
    for event in events:
        if event.device_type != torch.autograd.DeviceType.CPU:  # kernels count under their op
            continue
        category = categorize(event.key)
        cpu[category] += event.self_cpu_time_total * 1e-6
        if use_device:
            device[category] += event.self_device_time_total * 1e-6
    return cpu, device


def breakdown(fn: Callable[..., Any], *args: Any, runs: int = 5, **kwargs: Any) -> Counts:
    """``bl.count`` with :func:`time_by_category` attached: the essay's BERT table (chapter 01)."""
    # a fused op (nn.TransformerEncoderLayer in eval under no_grad) counts as one matmul row,
    # while the profiler still splits its time over the ops it calls
    counts = count(fn, *args, **kwargs)
    return dataclasses.replace(counts, times=time_by_category(fn, *args, runs=runs, **kwargs))


# ----------------------------------------------------------------------------- recordings


def recorded_names() -> tuple[str, ...]:
    """The traces shipped in ``brrrlib/recordings/h100-2026-11-22/traces`` (see its README)."""
    return tuple(sorted(p.stem for p in (_RECORDED / "traces").glob("*.json")))


def recorded(name: str) -> Trace:
    """A trace recorded on an H100 and shipped with brrrlib; read its ``steady_runs``."""
    stem = str(name).removesuffix(".json")
    if stem not in recorded_names():
        known = ", ".join(recorded_names())
        raise ValueError(f"name={name!r} is not a recorded trace; recorded traces: {known}")
    trace = Trace.from_chrome_trace(_RECORDED / "traces" / f"{stem}.json", label=stem)
    torch_version = re.search(r"torch (\d[\w.+]*)", (_RECORDED / "README.md").read_text())
    date = _RECORDED.name.removeprefix("h100-")
    on = f"{trace.device_name or 'a GPU'}, {date}, torch {torch_version.group(1)}"
    return dataclasses.replace(trace, recorded_on=on)


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
