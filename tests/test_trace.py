"""Tests for brrrlib.trace: interval math on hand-made traces, recorded CUDA traces, live CPU runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import brrrlib as bl
from brrrlib.trace import Interval, Trace

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


def test_run_out_of_range_is_a_clear_error(synthetic):
    with pytest.raises(ValueError, match="run=3"):
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
    assert t.run_ahead_s == pytest.approx(10 * US)
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
    assert t.run_ahead_s == pytest.approx(870 * US)


def test_trace_from_event_list_without_markers_is_one_run():
    events = json.loads((DATA / "cuda_overhead_trace.json").read_text())["traceEvents"]
    events = [e for e in events if not str(e.get("name", "")).startswith("brrr_run_")]
    t = Trace.from_chrome_trace(events)
    assert len(t.runs) == 1
    # span now runs from the first event (aten::add at 10 µs) to the last end (98 µs)
    assert t.wall_s[0] == pytest.approx(88 * US)
    assert t.busy_s() == pytest.approx(18 * US)


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
    assert [(i.name, i.category) for i in dev] == [("## Call CompiledFxGraph abc123 ##", "fused")]
    assert [i.name for i in t.host] == ["TorchDynamo Cache Lookup", "Torch-Compiled Region: 0/0"]
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
    ax2 = synthetic.plot(run=0)
    assert "µs" in ax2.get_xlabel()
    plt.close("all")


def test_reprs_mention_the_numbers():
    t = Trace.from_chrome_trace(DATA / "cuda_overhead_trace.json")
    text = repr(t)
    assert "18%" in text and "launch -> kernel" in text
    assert "<table>" in t._repr_html_()


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
        print("other stderr survives", file=sys.stderr)
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "KINETO_LOG_LEVEL"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "other stderr survives" in out.stderr
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
    assert big.run_ahead_s > 5 * min(big.launch_delays_s)
    assert big.busy_fraction > 0.5

    small = bl.profile(_tiny_loop, torch.ones(4, device="cuda"), runs=2)
    # 30 tiny kernels: the GPU waits on Python most of the time
    assert small.busy_fraction < big.busy_fraction
    assert len([i for i in small.device_intervals if i.run == 0]) >= 30
