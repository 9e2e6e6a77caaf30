"""Tests for brrrlib.trace: interval math on hand-made traces, recorded CUDA traces, live CPU runs."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import brrrlib as bl
from brrrlib.counting import CATEGORIES, CategoryTimes
from brrrlib.trace import (
    RAN_AHEAD_MIN_S,
    Interval,
    Trace,
    breakdown,
    recorded,
    recorded_names,
    time_by_category,
)

DATA = Path(__file__).parent / "data"
US = 1e-6


def _iv(name, start_us, end_us, lane, run=0, category="pointwise"):
    return Interval(name, start_us * US, end_us * US, lane, category, run)


@pytest.fixture
def synthetic() -> Trace:
    # One 100 µs run. Device: [10,30] and [20,40] overlap (union [10,40]), then [60,70].
    # Host: one op over [5,45], one over [50,58]; Python in between.
    intervals = (
        _iv("aten::a", 5, 45, "host"),
        _iv("k1", 10, 30, "device"),
        _iv("k2", 20, 40, "device"),
        _iv("aten::b", 50, 58, "host"),
        _iv("k3", 60, 70, "device", category="matmul"),
    )
    return Trace(intervals, ((0.0, 100 * US),), "cpu", "synthetic")


def test_busy_fraction_is_union_over_span(synthetic):
    # union = [10,40] + [60,70] = 40 µs of 100 µs: overlapping kernels are not counted twice
    assert synthetic.busy_s() == pytest.approx(40 * US)
    assert synthetic.busy_fraction == pytest.approx(0.40)
    assert synthetic.wall_s == pytest.approx((100 * US,))


def test_gaps_and_their_causes(synthetic):
    gaps = synthetic.gaps
    spans = [(round(g.start_s / US, 6), round(g.end_s / US, 6)) for g in gaps]
    assert spans == [(0, 10), (40, 60), (70, 100)]
    # [0,10]: host op covers [5,10] -> 50% -> dispatch (threshold is >= 50%)
    # [40,60]: host covers [40,45] + [50,58] = 13 of 20 -> dispatch
    # [70,100]: host lane empty -> python
    assert [g.cause for g in gaps] == ["dispatch", "dispatch", "python"]
    assert gaps[1].host_busy_fraction == pytest.approx(13 / 20)
    idle = synthetic.idle_by_cause()
    assert idle["python"] == pytest.approx(30 * US)
    assert idle["dispatch"] == pytest.approx(30 * US)
    assert sum(idle.values()) + synthetic.busy_s() == pytest.approx(100 * US)


def test_top_ops_sorted_with_shares(synthetic):
    rows = synthetic.top_ops()
    assert [r.name for r in rows] == ["k1", "k2", "k3"]  # 20, 20, 10 µs: stable order for ties
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    assert rows[2].category == "matmul"
    assert len(synthetic.top_ops(1)) == 1


def test_host_time_outside_any_op(synthetic):
    # the host lane covers [5,45] and [50,58]: 48 of the run's 100 µs; the other 52 µs the
    # host spent outside any op (Python between ops, module machinery)
    assert synthetic.outside_ops_s == pytest.approx((52 * US,))
    assert synthetic.outside_ops_fraction == pytest.approx(0.52)
    two_runs = Trace(
        (_iv("aten::a", 0, 10, "host"), _iv("aten::b", 5, 30, "host"),  # overlap: counted once
         _iv("aten::c", 100, 190, "host", run=1)),
        ((0.0, 100 * US), (100 * US, 200 * US)),
        "cpu",
    )  # fmt: skip
    assert two_runs.outside_ops_s == pytest.approx((70 * US, 10 * US))
    assert two_runs.outside_ops_fraction == pytest.approx(80 / 200)


def test_an_inflated_first_run_is_named_and_skipped():
    runs = ((0.0, 1000 * US), (1000 * US, 1100 * US), (1100 * US, 1210 * US))
    t = Trace((), runs, "cuda")
    assert t.first_run_inflation == pytest.approx(1000 / 105)
    assert t.steady_runs == (1, 2)
    even = Trace((), ((0.0, 100 * US), (100 * US, 210 * US)), "cpu")
    assert even.steady_runs == (0, 1)
    one = Trace((), ((0.0, 100 * US),), "cpu")
    assert math.isnan(one.first_run_inflation) and one.steady_runs == (0,)


def test_run_out_of_range_is_a_clear_error(synthetic):
    with pytest.raises(ValueError, match="run"):
        synthetic.busy_s(3)


# --------------------------------------------------------------------- recorded CUDA traces


def test_recorded_overhead_bound_cuda_trace():
    t = Trace.from_chrome_trace(DATA / "cuda_overhead_trace.json")
    assert t.device == "cuda"
    kernels = t.device_intervals
    assert len(kernels) == 3  # the gpu_user_annotation is not device work
    assert [k.category for k in kernels] == ["pointwise", "pointwise", "reduction"]
    assert "CUDAFunctor_add" in kernels[0].name
    # kernels 5 + 5 + 8 µs in a 100 µs run
    assert t.busy_fraction == pytest.approx(0.18)
    assert [g.cause for g in t.gaps] == ["dispatch", "python", "dispatch", "dispatch"]
    assert t.idle_by_cause()["python"] == pytest.approx(28 * US)
    # launch -> start: 25-15, 58-50, 82-74 (the last kernel is matched through its ac2g flow)
    assert sorted(round(d / US, 6) for d in t.launch_delays_s) == [8, 8, 10]
    assert max(t.launch_delays_s) == pytest.approx(10 * US)
    host_names = [i.name for i in t.host]
    assert host_names == ["aten::add", "aten::mul", "aten::sum", "cudaDeviceSynchronize"]


def test_recorded_device_bound_cuda_trace():
    t = Trace.from_chrome_trace(DATA / "cuda_busy_trace.json")
    assert len(t.runs) == 2
    assert t.wall_s == pytest.approx((1000 * US, 1000 * US))
    # three 300 µs GEMMs + one 10 µs copy per run; the warm-up GEMM before run 0 is left out
    assert len(t.device_intervals) == 8
    assert t.busy_fraction_per_run == pytest.approx((0.91, 0.91))
    top = t.top_ops()
    assert top[0].name == "ampere_sgemm_128x64_nn" and top[0].calls == 6
    assert top[0].category == "matmul"
    assert top[1].category == "memcpy"
    # the host queued all three GEMMs within 30 µs, so the last one waited 578 µs and the
    # copy 870 µs: the host ran far ahead, the opposite of overhead-bound
    delays = sorted(round(d / US, 6) for d in t.launch_delays_s)
    assert delays == [8, 8, 293, 293, 578, 578, 870, 870]
    assert max(t.launch_delays_s) == pytest.approx(870 * US)


def test_trace_from_event_list_without_markers_is_one_run():
    events = json.loads((DATA / "cuda_overhead_trace.json").read_text())["traceEvents"]
    events = [e for e in events if not str(e.get("name", "")).startswith("brrr_run_")]
    t = Trace.from_chrome_trace(events)
    assert len(t.runs) == 1
    # span now runs from the first event (aten::add at 10 µs) to the last end (98 µs)
    assert t.wall_s[0] == pytest.approx(88 * US)
    assert t.busy_s() == pytest.approx(18 * US)


def test_launch_delays_split_into_queue_and_wait():
    # overhead-bound: every kernel met an idle GPU, so its whole delay was the GPU waiting
    idle = Trace.from_chrome_trace(DATA / "cuda_overhead_trace.json")
    assert idle.queued_s == pytest.approx((0.0, 0.0, 0.0))
    assert not idle.host_ran_ahead
    # device-bound: the GEMMs and the copy queued behind the GEMMs launched before them
    busy = Trace.from_chrome_trace(DATA / "cuda_busy_trace.json")
    assert max(busy.queued_s) > 500 * US and busy.host_ran_ahead
    for d, q in zip(busy.launch_delays_s, busy.queued_s, strict=True):
        assert 0 <= q <= d + 1e-12  # the rest of the delay, d - q, the GPU sat idle


# --------------------------------------------------------------------- shipped H100 recordings


def test_recorded_traces_are_listed_and_say_where_they_were_made():
    names = recorded_names()
    assert {"short_chain_1k", "graph_replay_1k", "compiled_long_chain_64Mi"} <= set(names)
    t = recorded("short_chain_1k")
    assert t.device == "cuda" and "H100" in t.device_name
    assert t.recorded_on.startswith(t.device_name) and "2026-11-22" in t.recorded_on
    assert "2.11.0+cu130" in t.recorded_on  # the torch it was recorded with
    assert t.label == "short_chain_1k"
    assert t.device_name in repr(t) and "2026-11-22" in repr(t)
    assert recorded("short_chain_1k.json").runs == t.runs
    with pytest.raises(ValueError, match="short_chain_1k") as info:
        recorded("short_chain")
    assert str(info.value).startswith("name")


def test_recorded_cuda_lanes_of_32_tiny_ops():
    t = recorded("short_chain_1k")  # 16 multiply-adds on 1000 elements, 3 runs
    assert len(t.runs) == 3
    for r in range(3):
        kernels = [i for i in t.device_intervals if i.run == r]
        host = [i.name for i in t.host if i.run == r]
        assert len(kernels) == 32 and {k.category for k in kernels} == {"pointwise"}
        assert host.count("aten::mul") == host.count("aten::add") == 16
        assert host[-1] == "cudaDeviceSynchronize"
    assert len(t.launch_delays_s) == 96  # every kernel matched to its launch
    assert max(t.busy_fraction_per_run[r] for r in t.steady_runs) < 0.1  # the GPU waits
    assert not t.host_ran_ahead and max(t.queued_s) < RAN_AHEAD_MIN_S


def test_recorded_device_bound_chain_ran_ahead():
    t = recorded("long_chain_64Mi")  # the same chain on 64 Mi elements
    assert min(t.busy_fraction_per_run) > 0.85
    assert t.host_ran_ahead and max(t.queued_s) > 1e-3  # kernels queued for milliseconds


def test_recorded_graph_replay_is_one_launch_and_many_kernels():
    t = recorded("graph_replay_1k")
    for r in t.steady_runs:
        launches = [i for i in t.intervals if i.lane == "launch" and i.run == r]
        graph = [i for i in launches if i.name == "cudaGraphLaunch"]
        kernels = [i for i in t.device_intervals if i.run == r]
        assert len(graph) == 1 and not [i for i in launches if i.name == "cudaLaunchKernel"]
        assert len(kernels) == 32 and {k.correlation for k in kernels} == {graph[0].correlation}
        assert not [i for i in t.host if i.run == r and i.name.startswith("aten::")]  # no ops
    assert len(t.launch_delays_s) == 96  # each kernel measured from its graph's launch


def test_recorded_compiled_region_is_one_fused_kernel():
    t = recorded("compiled_long_chain_64Mi")
    for r in range(len(t.runs)):
        host = [i.name for i in t.host if i.run == r]
        kernels = [i for i in t.device_intervals if i.run == r]
        assert any(h.startswith("Torch-Compiled") for h in host)
        assert len(kernels) == 1 and kernels[0].name.startswith("triton_poi_fused")
        assert kernels[0].category == "pointwise"


def test_run_0_of_the_recordings_is_inflated_and_skipped():
    # recorded before the profiler warm-up put a kernel through CUPTI ahead of run 0
    inflation = {name: recorded(name).first_run_inflation for name in recorded_names()}
    device_bound = {"long_chain_64Mi"}  # 6 ms of kernels per run hide the set-up
    for name, x in inflation.items():
        t = recorded(name)
        if name in device_bound:
            assert x < 1.5 and t.steady_runs[0] == 0
        else:
            assert x > 2, (name, x)
            assert t.steady_runs == tuple(range(1, len(t.runs)))
    assert inflation["small_matmuls_bmm"] > 20  # 2,141 µs, then 129 and 56 µs


def _cpu_event(name, ts, dur, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def test_cpu_lanes_of_a_compiled_function():
    # what torch.compile'd code looks like to the profiler on a CPU (µs)
    events = [
        _cpu_event("brrr_run_0", 0, 100, cat="user_annotation"),
        _cpu_event("TorchDynamo Cache Lookup", 5, 5),
        _cpu_event("Torch-Compiled Region: 0/0", 12, 78),
        _cpu_event("## Call CompiledFxGraph abc123 ##", 20, 65),
        _cpu_event("aten::mm", 30, 20),  # an extern kernel inside the graph
    ]
    t = Trace.from_chrome_trace(events)
    dev = t.device_intervals
    lookup, region, graph = (e["name"] for e in events[1:4])
    assert [(i.name, i.category) for i in dev] == [(graph, "fused")]
    assert [i.name for i in t.host] == [lookup, region]
    assert t.busy_fraction == pytest.approx(0.65)


def test_cpu_lanes_wrappers_and_scalar_wrapping():
    events = [
        _cpu_event("brrr_run_0", 0, 100, cat="user_annotation"),
        _cpu_event("aten::matmul", 0, 40),  # wrapper: calls mm
        _cpu_event("aten::mm", 5, 30),
        _cpu_event("aten::resolve_conj", 6, 1),
        _cpu_event("aten::add", 50, 30),  # does the work; its aten::to wraps the scalar
        _cpu_event("aten::to", 52, 8),
        _cpu_event("aten::copy_", 54, 4),
        _cpu_event("aten::view", 85, 5),  # metadata only
    ]
    t = Trace.from_chrome_trace(events)
    assert [i.name for i in t.device_intervals] == ["aten::mm", "aten::add"]
    assert [i.name for i in t.host] == ["aten::matmul", "aten::add", "aten::view"]
    assert t.busy_s() == pytest.approx(60 * US)


def test_from_chrome_trace_rejects_garbage():
    with pytest.raises(TypeError, match="source"):
        Trace.from_chrome_trace({"traceEvents": 3})


def test_export_chrome_trace_roundtrip(tmp_path):
    t = Trace.from_chrome_trace(DATA / "cuda_busy_trace.json")
    out = t.export_chrome_trace(tmp_path / "t.json")
    again = Trace.from_chrome_trace(out)
    assert again.busy_fraction == pytest.approx(t.busy_fraction)


def test_export_synthetic_trace_is_valid_json(tmp_path, synthetic):
    out = synthetic.export_chrome_trace(tmp_path / "s.json")
    data = json.loads(out.read_text())
    assert {e["ph"] for e in data["traceEvents"]} == {"X"}
    assert len(data["traceEvents"]) == len(synthetic.intervals)


def test_plot_smoke(synthetic):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = Trace.from_chrome_trace(DATA / "cuda_busy_trace.json")
    ax = t.plot()
    assert "ms" in ax.get_xlabel()
    assert len(ax.get_yticklabels()) == 2
    keys = [t.get_text() for t in ax.get_legend().get_texts()]
    assert keys[-1] == "idle" and {"matmul", "memcpy"} <= set(keys)  # op colours, then the hatch
    ax2 = synthetic.plot(run=0)
    assert "µs" in ax2.get_xlabel()
    plt.close("all")


def test_reprs_are_one_table_of_the_top_ops():
    t = Trace.from_chrome_trace(DATA / "cuda_overhead_trace.json")
    text, html = repr(t), t._repr_html_()
    assert "18%" in text and "18%" in html  # device busy
    assert len(text.splitlines()) == 2 + len(t.top_ops(8))  # numbers, header, one row per op
    assert html.count("<tr>") == 1 + len(t.top_ops(8))


# --------------------------------------------------------------------- live CPU profiling


def _tiny_loop(x):
    for _ in range(30):
        x = x + 1
    return x


def test_profile_cpu_lanes_and_runs():
    a = torch.randn(128, 128)
    b = torch.randn(128, 128)
    t = bl.profile(lambda a, b: (a @ b).relu(), a, b, runs=2)
    assert t.device == "cpu"
    assert len(t.runs) == 2 and all(w > 0 for w in t.wall_s)
    names = {i.name for i in t.device_intervals}
    # matmul is a wrapper that dispatches to mm: mm is device work, matmul host-lane only
    assert "aten::mm" in names and "aten::matmul" not in names
    assert "aten::matmul" in {i.name for i in t.host}
    assert 0.0 < t.busy_fraction <= 1.0


def test_profile_counts_each_op_once_per_run():
    t = bl.profile(_tiny_loop, torch.ones(4), runs=3)
    adds = [i for i in t.device_intervals if i.name == "aten::add"]
    assert len(adds) == 90
    # the scalar-wrapping copy inside aten::add is not a second device op
    assert {i.name for i in t.device_intervals} == {"aten::add"}
    assert t.launch_delays_s == ()


def test_profile_bad_input():
    with pytest.raises(TypeError, match="fn must be callable"):
        bl.profile(torch.ones(3))
    with pytest.raises(ValueError, match="runs"):
        bl.profile(_tiny_loop, torch.ones(3), runs=0)
    with pytest.raises(ValueError, match="ran no torch operators"):
        bl.profile(lambda: sum(range(10)))


def test_profile_surfaces_errors_from_fn():
    def broken(x):
        raise RuntimeError("boom from user code")

    with pytest.raises(RuntimeError, match="boom from user code"):
        bl.profile(broken, torch.ones(3), warmup=0)
    # the profiler was stopped: a second profile works
    assert bl.profile(_tiny_loop, torch.ones(3), runs=1).runs


def test_no_kineto_lines_on_stderr():
    code = textwrap.dedent(
        """
        import os, sys
        import torch                      # torch first: the env var trick alone is too late
        import brrrlib as bl
        x = torch.ones(8)
        bl.profile(lambda x: x + 1, x, runs=2)
        bl.profile(lambda x: x * 2, x, runs=1)
        print("other-stderr-survives", file=sys.stderr)
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "KINETO_LOG_LEVEL"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "other-stderr-survives" in out.stderr
    for marker in ("STAGE:", "USDT:", "ActivityProfiler", "Log file:"):
        assert marker not in out.stderr, out.stderr


def test_fd_level_filter_when_kineto_is_told_to_be_loud():
    # KINETO_LOG_LEVEL=0 (set by the user, so brrrlib leaves it alone) makes kineto print
    # its INFO/STAGE lines: only the stderr filter around start/stop keeps them out.
    code = "import torch, brrrlib as bl; bl.profile(lambda x: x + 1, torch.ones(8), runs=1)"
    env = dict(__import__("os").environ, KINETO_LOG_LEVEL="0")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "STAGE:" not in out.stderr and "INFO:" not in out.stderr, out.stderr


# --------------------------------------------------------------------- the profiler's warm-up


def test_profiler_warmup_puts_a_device_kernel_through_before_run_0(monkeypatch):
    """The CUDA path of the capture, on a fake GPU: the order of what reaches the profiler."""
    log = []

    class FakeProfile:
        def __init__(self, activities, **options):
            log.append(("profile", sorted(a.name for a in activities)))

        def start(self):
            log.append("start")

        def stop(self):
            log.append("stop")

        def events(self):
            return []

    @contextlib.contextmanager
    def marker(name):
        log.append(("enter", name))
        yield
        log.append(("exit", name))

    real_ones = torch.ones

    def ones(*size, device=None, **kwargs):
        log.append(("kernel", device))
        return real_ones(*size, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.profiler, "record_function", marker)
    monkeypatch.setattr(torch, "ones", ones)
    monkeypatch.setattr(bl.machine, "sync", lambda device=None: log.append("sync"))
    with pytest.raises(ValueError, match="ran no torch operators"):  # the fake records nothing
        bl.profile(lambda: log.append("fn"), runs=2, warmup=1)
    assert log == [
        "fn", "sync",  # the unrecorded warm-up
        ("profile", ["CPU", "CUDA"]), "start",
        ("enter", "brrr_profiler_warmup"), ("kernel", "cuda"), "fn", "sync",
        ("exit", "brrr_profiler_warmup"),  # CUPTI set up before run 0, outside every run
        ("enter", "brrr_run_0"), "fn", "sync", ("exit", "brrr_run_0"),
        ("enter", "brrr_run_1"), "fn", "sync", ("exit", "brrr_run_1"),
        "stop",
    ]  # fmt: skip


@pytest.mark.parametrize("typed", [True, False])  # with activity_type (torch 2.12+), without
def test_a_cuda_profile_read_from_the_api_has_the_lanes_of_its_chrome_trace(monkeypatch, typed):
    """bl.profile reads torch.profiler's events(); fed a recorded H100 run as the API hands it
    over (a launch and its kernels share an id), it cuts the lanes the chrome trace gives."""
    path = Path(bl.__file__).parent / "recordings/h100-2026-11-22/traces/short_chain_1k.json"
    text = path.read_text()
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA
    on_device = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
    api_events = [
        SimpleNamespace(
            name=e["name"],
            device_type=cuda if e["cat"] in on_device else cpu,
            is_async=False,
            is_user_annotation=e["cat"] == "user_annotation",
            thread=e["tid"],
            id=(e.get("args") or {}).get("correlation", 0),
            time_range=SimpleNamespace(start=e["ts"], end=e["ts"] + e["dur"]),
            activity_type=e["cat"] if typed else None,
        )
        for e in json.loads(text)["traceEvents"]
        if e.get("ph") == "X"
    ]

    class FakeProfile:  # a fake GPU's profiler: the recorded events, the recorded JSON
        def __init__(self, activities, **options):
            pass

        start = stop = lambda self: None
        events = lambda self: api_events  # noqa: E731
        export_chrome_trace = lambda self, to: Path(to).write_text(text)  # noqa: E731

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch, "ones", lambda *size, device=None: torch.empty(0))
    monkeypatch.setattr(bl.machine, "sync", lambda device=None: None)
    live = bl.profile(lambda: None, label="short_chain_1k")
    assert live == Trace.from_chrome_trace(path, label="short_chain_1k")
    assert live.device == "cuda" and len(live.launch_delays_s) == 96


def test_the_warmup_call_is_profiled_but_is_not_a_run():
    t = bl.profile(_tiny_loop, torch.ones(4), runs=2)
    events = json.loads(t.chrome_trace)["traceEvents"]
    warmup = [e for e in events if e.get("name") == "brrr_profiler_warmup"][0]
    inside = [
        e for e in events
        if e.get("name") == "aten::add"
        and warmup["ts"] <= e["ts"] <= warmup["ts"] + warmup["dur"]
    ]  # fmt: skip
    assert len(inside) == 30  # fn ran once under the profiler before run 0...
    assert len(t.runs) == 2  # ...and is not a run
    assert len([i for i in t.device_intervals if i.name == "aten::add"]) == 60


def test_no_profiler_warning_reaches_the_notebook():
    import warnings

    from brrrlib.trace import quiet_profiler

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bl.profile(_tiny_loop, torch.ones(4), runs=1)
        time_by_category(_tiny_loop, torch.ones(4), runs=1)
        with quiet_profiler():  # the warning torch 2.11 printed in chapters 01, 03 and 04
            warnings.warn(
                "Warning: Profiler clears events at the end of each cycle.Only events from the "
                "current cycle will be reported.To keep events across cycles, set acc_events=True.",
                UserWarning,
                stacklevel=1,
            )
    assert [str(w.message) for w in caught] == []


# --------------------------------------------------------------------- time by category


def test_breakdown_profiles_every_category():
    e, heads, ffn = 32, 4, 64
    layer = torch.nn.TransformerEncoderLayer(e, heads, ffn, dropout=0.0, batch_first=True)
    x = torch.randn(2, 8, e, requires_grad=True)
    result = breakdown(lambda: layer(x).sum().backward(), runs=2)
    assert isinstance(result.times, CategoryTimes)
    times = result.times.as_dict()
    assert set(times) == set(CATEGORIES)
    assert times["matmul"] > 0
    assert result.times.total_s > 0
    assert result.times.runs == 2
    total = repr(result).splitlines()[-2].split()  # the total row, above the time note
    assert (total[0], total[1], total[-1]) == ("total", str(result.ops), "100%")
    # without dropout the CPU flash-attention kernel runs; its backward recomputes
    # QK^T, one attention matmul more than 3x the forward
    # per sequence of 8 tokens: QKV 2*8*E*3E, QK^T and AV 2*8*8*E each, out 2*8*E*E,
    # feed-forward 4*8*E*F; the backward of each matmul is two matmuls of its size
    forward = 2 * (2 * 8 * e * 3 * e + 4 * 8 * 8 * e + 2 * 8 * e * e + 4 * 8 * e * ffn)
    matmul = result.by_category()["matmul"]["flops"]
    assert matmul == 3 * forward + 2 * 2 * 8 * 8 * e


def test_profiler_rows_are_summed_once_per_kernel(monkeypatch):
    """A recorded CUDA profile, reduced to its events() rows: each kernel is listed on its own
    (device rows) and inside the aten op that launched it; time_by_category counts it once."""
    cpu_row, cuda_row = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA

    def row(key, device_type, self_cpu_us, self_device_us, span=(1.0, 2.0)):
        return SimpleNamespace(
            key=key,
            name=key,
            device_type=device_type,
            time_range=SimpleNamespace(start=span[0], end=span[1]),
            self_cpu_time_total=self_cpu_us,
            self_device_time_total=self_device_us,
        )

    rows = [
        row("brrr_run_0", cpu_row, 0.0, 0.0, span=(0.0, 10.0)),
        row("aten::addmm", cpu_row, 20.0, 300.0),
        row("aten::linear", cpu_row, 5.0, 0.0),  # its kernels belong to its child addmm
        row("ampere_sgemm_128x64_tn", cuda_row, 0.0, 300.0),  # the same kernel again
        row("aten::native_layer_norm", cpu_row, 15.0, 40.0),
        row("void at::native::vectorized_elementwise_kernel<...>", cuda_row, 0.0, 25.0),
        row("aten::gelu", cpu_row, 10.0, 25.0),
        row("cudaLaunchKernel", cpu_row, 12.0, 0.0),
        row("autograd::engine::evaluate_function: AddmmBackward0", cpu_row, 8.0, 0.0),
    ]

    class FakeProfile:  # a fake GPU's profiler, handing over the rows above
        def __init__(self, activities, **options):
            pass

        start = stop = lambda self: None
        events = lambda self: rows  # noqa: E731

    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.profiler, "record_function", lambda name: contextlib.nullcontext())
    monkeypatch.setattr(torch, "ones", lambda *size, device=None: torch.empty(0))
    monkeypatch.setattr(bl.machine, "sync", lambda device=None: None)
    times = {}
    for cuda in (True, False):
        monkeypatch.setattr(torch.cuda, "is_available", lambda cuda=cuda: cuda)
        times[cuda] = time_by_category(lambda: None, runs=1, warmup=0)
    device, cpu = times[True].as_dict(), times[False].as_dict()
    assert (times[True].device, times[False].device) == ("cuda", "cpu")
    assert device["matmul"] == pytest.approx(300e-6)
    assert device["normalization"] == pytest.approx(40e-6)
    assert device["pointwise"] == pytest.approx(25e-6)
    assert sum(device.values()) == pytest.approx(365e-6)
    assert cpu["other"] == pytest.approx(20e-6)  # launch and autograd bookkeeping
    assert cpu["matmul"] == pytest.approx(25e-6)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_breakdown_on_cuda_uses_kernel_time():
    layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, device="cuda")
    x = torch.randn(8, 128, 256, device="cuda", requires_grad=True)
    result = breakdown(lambda: layer(x).sum().backward(), runs=3)
    assert result.times.device == "cuda"
    assert result.times.as_dict()["matmul"] > 0
    assert result.by_category()["matmul"]["flops_fraction"] > 0.95


def test_time_by_category_bad_input():
    with pytest.raises(ValueError, match="runs"):
        time_by_category(lambda: None, runs=0)
    with pytest.raises(TypeError, match="fn must be callable"):
        time_by_category(torch.ones(3))


def test_time_by_category_puts_a_chain_of_adds_under_pointwise():
    times = time_by_category(_tiny_loop, torch.ones(3), runs=1)
    assert (times.device, times.runs) == ("cpu", 1)
    by = times.as_dict()
    assert by["pointwise"] > 0 and by["matmul"] == by["normalization"] == 0.0
    assert times.total_s == pytest.approx(sum(by.values()))


# --------------------------------------------------------------------- live GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_profile_cuda_kernels_and_launch_delays():
    a = torch.randn(2048, 2048, device="cuda")
    big = bl.profile(lambda a: a @ a @ a @ a, a, runs=2)
    assert big.device == "cuda"
    assert len([i for i in big.device_intervals if i.run == 0]) >= 3
    assert len(big.launch_delays_s) >= 3  # kernels matched to their launches
    # three back-to-back big GEMMs: the host queues them all at once, the last one waits
    assert max(big.launch_delays_s) > 5 * min(big.launch_delays_s)
    assert big.busy_fraction > 0.5

    assert big.host_ran_ahead  # the later GEMMs queued behind the first

    small = bl.profile(_tiny_loop, torch.ones(4, device="cuda"), runs=3)
    # 30 tiny kernels: the GPU waits on Python most of the time
    assert small.busy_fraction < big.busy_fraction
    assert len([i for i in small.device_intervals if i.run == 0]) >= 30
    assert not small.host_ran_ahead
    # CUPTI was set up in the warm-up: run 0 costs what the others cost (it was 2-40x)
    assert small.first_run_inflation < 2 and small.steady_runs == (0, 1, 2)


def test_an_lstm_layer_is_the_work_not_a_wrapper_of_its_bias_add():
    """mkldnn_rnn_layer encloses an aten::add (its bias sum): it still counts as device work."""
    lstm = torch.nn.LSTM(64, 64, batch_first=True).eval().requires_grad_(False)
    tr = bl.profile(lstm, torch.randn(8, 32, 64), runs=2)
    busy = [tr.busy_fraction_per_run[r] for r in tr.steady_runs]
    assert min(busy) > 0.5, busy  # was ~0.01: the layer's own time had dropped out


def test_breakdown_is_counts_with_times_per_category():
    # chapter 01 calls bl.trace.breakdown: bl.count's rows plus each category's share of time
    from brrrlib.counting import CategoryTimes, Counts

    x = torch.randn(16, 16)
    result = bl.trace.breakdown(torch.mm, x, x, runs=1)
    assert isinstance(result, Counts) and isinstance(result.times, CategoryTimes)
    assert result.times.runs == 1 and result.flops == 2 * 16**3


def test_a_live_profile_and_its_exported_chrome_trace_cut_the_same_lanes():
    t = bl.profile(_tiny_loop, torch.ones(4), runs=2)
    again = Trace.from_chrome_trace(json.loads(t.chrome_trace))
    assert [(i.name, i.lane, i.category, i.run) for i in again.intervals] == [
        (i.name, i.lane, i.category, i.run) for i in t.intervals
    ]
    assert again.wall_s == pytest.approx(t.wall_s, abs=1e-6)
