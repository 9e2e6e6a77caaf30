"""Reading ``torch.profiler`` chrome traces: events in, lane intervals out.

A chrome trace is a list of events (``ph: "X"`` is a complete event with a
start ``ts`` and a ``dur``, both in microseconds). :func:`parse` sorts the
ones brrrlib needs into rows for :class:`brrrlib.trace.Interval`:

* ``cpu_op`` events (aten ops, ``record_function`` markers, a compiled
  graph's call): nested per thread by time containment, the top-level ones
  form the host lane; on a CPU the outermost op that does the work forms the
  device lane.
* ``kernel``, ``gpu_memcpy``, ``gpu_memset``: the GPU's own work, the device
  lane on CUDA.
* ``cuda_runtime`` / ``cuda_driver`` calls (``cudaLaunchKernel``,
  ``cudaGraphLaunch``, ``cudaDeviceSynchronize``): host work outside aten ops,
  and the launch side of each kernel, linked to it by a correlation id (or an
  ``ac2g`` flow event).

Runs are the ``brrr_run_<i>`` markers ``bl.profile`` writes around each
recorded call; a trace without them is one run spanning all its events.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from brrrlib._aten_ops import (
    COMPILED_GRAPH,
    has_matmul_formula,
    moves_no_data,
    profiler_category,
)
from brrrlib._profiler import RUN_MARKER

__all__ = ["Parsed", "Row", "device_name", "kernel_category", "load", "parse"]

#: Chrome-trace categories that are work done by the GPU.
_DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Chrome-trace categories of host-side CUDA API calls (launches, syncs, copies).
_RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver"})
#: Op families that do arithmetic: an op that calls one of these only wraps it.
_COMPUTE = frozenset({"matmul", "pointwise", "reduction", "normalization"})
# Substrings of CUDA kernel names, by family (cuBLAS/CUTLASS GEMMs, cuDNN, flash attention,
# ATen's elementwise and reduce kernels, inductor's triton_poi/_red/_per kernels).
_KERNEL_WORDS = (
    ("matmul", ("gemm", "gemv", "cutlass", "xmma", "cublas", "conv", "wgrad", "dgrad", "flash",
                "fmha", "sm90_", "sm80_", "ampere_", "volta_", "turing_")),
    ("normalization", ("softmax", "layer_norm", "layernorm", "batch_norm", "batchnorm",
                       "rms_norm", "group_norm")),
    ("reduction", ("reduce", "triton_red", "triton_per")),
    ("pointwise", ("elementwise", "vectorized", "pointwise", "unrolled", "triton_poi")),
)  # fmt: skip


class Row(NamedTuple):
    """One interval as parsed: the fields of :class:`brrrlib.trace.Interval`, in order."""

    name: str
    start_s: float
    end_s: float
    lane: str
    category: str
    run: int
    correlation: int | None


class Parsed(NamedTuple):
    """What :func:`parse` finds: rows, run spans (seconds from run 0's start), the device."""

    rows: list[Row]
    runs: list[tuple[float, float]]
    device: str


def kernel_category(name: str) -> str:
    """Op family of a CUDA kernel from its (mangled or demangled) name."""
    lowered = name.lower()
    for category, words in _KERNEL_WORDS:
        if any(w in lowered for w in words):
            return category
    return "other"


def load(source: str | os.PathLike | Mapping | Sequence) -> tuple[list, str, dict]:
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


def device_name(meta: Mapping) -> str:
    """The GPU's name from a trace's ``deviceProperties`` ("NVIDIA H100 80GB HBM3"), else ""."""
    props = meta.get("deviceProperties") or []
    return str(props[0].get("name", "")) if props and isinstance(props[0], Mapping) else ""


def parse(events: Iterable[Mapping]) -> Parsed:
    """Chrome-trace events -> rows in seconds from the first run's start, run spans, device."""
    events = list(events)
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e]
    cpu_ops = [e for e in xs if e.get("cat") == "cpu_op"]
    kernels = [e for e in xs if e.get("cat") in _DEVICE_CATS]
    runtime = [e for e in xs if e.get("cat") in _RUNTIME_CATS]
    device = "cuda" if kernels else "cpu"
    spans_us, host_thread = _run_spans(xs, cpu_ops, kernels, runtime)
    if not spans_us:
        return Parsed([], [], device)
    clock = _Clock(spans_us)
    rows = _host_rows(cpu_ops, runtime, clock, host_thread, device)
    if device == "cuda":
        rows += _kernel_rows(kernels, runtime, events, clock)
    rows.sort(key=lambda r: (r.start_s, -r.end_s))
    return Parsed(rows, [(clock.sec(a), clock.sec(b)) for a, b in spans_us], device)


def _run_spans(xs: list[Mapping], cpu_ops, kernels, runtime) -> tuple[list, tuple]:
    """Each run's (start, end) in µs and the thread that ran it (the markers', or the busiest)."""
    markers = sorted(
        (e for e in xs
         if str(e.get("name", "")).startswith(RUN_MARKER) and e.get("cat") != "gpu_user_annotation"),
        key=lambda e: float(e["ts"]),
    )  # fmt: skip
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


def _host_rows(cpu_ops, runtime, clock: _Clock, host_thread: tuple, device: str) -> list[Row]:
    """Host lane (top-level ops and runtime calls on the run's thread), launches, CPU device ops."""
    rows: list[Row] = []
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
                rows.append(Row(*span, "launch", "runtime", r, corr))
            if on_host:
                rows.append(Row(*span, "host", "runtime", r, None))
            continue
        category = profiler_category(name)
        if on_host:
            rows.append(Row(*span, "host", category, r, None))
        if device == "cpu" and does_work:
            rows.append(Row(*span, "device", category, r, None))
    return rows


def _kernel_rows(kernels, runtime, events, clock: _Clock) -> list[Row]:
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
        category = "memcpy" if e.get("cat") != "kernel" else kernel_category(name)
        rows.append(Row(name, clock.sec(ts), clock.sec(ts + dur), "device", category, r, corr))
    return rows


def _nesting(events: list[Mapping]) -> dict[int, tuple[bool, bool]]:
    """For each event: (top level on its thread, does the work), by time containment.

    An op that calls an op of a compute family (matmul, pointwise, reduction,
    normalization) only wraps it: ``aten::matmul`` -> ``aten::mm``. The op that
    does the work is the outermost op that is neither a wrapper nor a
    metadata op; ops nested inside it (``aten::add(x, 1)`` wrapping its scalar
    with ``aten::to``, allocating its output) are part of it. A compiled
    graph's call is one unit of work, whatever it calls inside.
    """
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
            wraps.update(
                id(a) for a, _ in stack if not has_matmul_formula(str(a.get("name", "")))
            )
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
    counts: dict[tuple, int] = {}
    for e in events:
        k = (e.get("pid"), e.get("tid"))
        counts[k] = counts.get(k, 0) + 1
    return max(counts, key=counts.get) if counts else (None, None)
