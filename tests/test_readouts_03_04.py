"""What chapters 03 and 04 print and draw, with a CPU's ceilings and with the recorded H100's.

Every readout is run on constructed measurements (comparisons with chosen
ratios, traces with chosen intervals, points with chosen times) and on the
traces and ceilings recorded on an H100, and the test asserts what it *says*:
a conclusion appears only when the numbers support it. Nothing here times
anything, so nothing can flake.
"""

import math

import matplotlib
import pytest
import torch
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib import readouts, workloads
from brrrlib.comparison import Comparison
from brrrlib.sweeps import Pair, Point, Sweep
from brrrlib.timing import Timing
from brrrlib.trace import Interval, Trace

matplotlib.use("Agg")

CPU = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 800e9, "fp16": 2e9})


@pytest.fixture(scope="module")
def h100():
    """The recorded H100's ceilings (fp32 51.7, tf32 394, bf16 740 TFLOP/s, 2.99 TB/s)."""
    return next(r.machine for r in bl.classroom.recorded_reports() if "H100" in r.device_name)


def _cmp(a_s: float, ratio: float, spread: float = 0.02, n: int = 12) -> Comparison:
    """A comparison whose rounds lie evenly within ``spread`` of ``ratio`` (B over A)."""
    ratios = [ratio * (1 + spread * (2 * i / (n - 1) - 1)) for i in range(n)]
    a = Timing(samples_s=[a_s] * n, device="cpu", label="A")
    b = Timing(samples_s=[a_s * r for r in ratios], device="cpu", label="B")
    return Comparison(a=a, b=b, ratios=tuple(ratios))


def _cpu_trace(busy: float, runs: int = 3, device: str = "cpu") -> Trace:
    """``runs`` runs of 100 µs, each with one op covering ``busy`` of the run on both lanes."""
    intervals, spans = [], []
    for r in range(runs):
        t0 = r * 100e-6
        spans.append((t0, t0 + 100e-6))
        for lane in ("host", "device"):
            intervals.append(Interval("aten::mul", t0, t0 + busy * 100e-6, lane, "pointwise", r))
    return Trace(tuple(intervals), tuple(spans), device, label="chain")


# ------------------------------------------------------------------ chapter 03


def test_python_speed_states_the_three_numbers():
    text = readouts.python_speed(46e6, 1e9)
    assert "46 million" in text and "1 billion" in text and "32 million" in text


def test_flops_per_python_add_uses_the_fastest_measured_precision(h100):
    cpu = readouts.flops_per_python_add(40e6, CPU)
    assert "CPU" in cpu and "bf16" in cpu and "20,000 FLOPs" in cpu  # 800 GFLOP/s / 40e6
    gpu = readouts.flops_per_python_add(19e6, h100)
    assert "GPU" in gpu and "CPU" not in gpu  # an H100 is not "this machine's CPU"
    assert "fp32" not in gpu  # never the H100 at its fp32 rate beside its own bf16 spec
    assert "million FLOPs" in gpu


def test_tiny_op_compares_with_its_bytes_and_the_floor():
    t = Timing(samples_s=[1e-6] * 5, device="cpu")
    text = readouts.tiny_op(t, CPU, 0.001)
    assert "1 µs per call" in text and "600 ps" in text  # 12 B at 20 GB/s
    assert "1,667 times" in text and "op_overhead_s" in text


def test_timing_methods_says_what_a_missing_sync_does_only_on_cuda():
    bench = Timing(samples_s=[100e-6] * 20, device="cuda", dropped_s=(1.0,))
    times = {"first call, synced": 5e-3, "one call, no sync": 10e-6, "one call, synced": 110e-6,
             "CUDA events": 102e-6, "torch.utils.benchmark": 101e-6}  # fmt: skip
    gpu = readouts.timing_methods(times, bench, "cuda")
    assert "the launch, not the work" in gpu and "CUDA events" in gpu and "1 disturbed" in gpu
    cpu_times = {k: v for k, v in times.items() if k != "CUDA events"}
    cpu_times["one call, no sync"] = 120e-6
    cpu = readouts.timing_methods(cpu_times, bench, "cpu")
    assert "changes nothing" in cpu and "the launch" not in cpu and "9%" in cpu
    assert "50.0x the median" in cpu and "warm-up" in cpu
    full_queue = dict(times, **{"one call, no sync": 95e-6, "first call, synced": 110e-6})
    gpu = readouts.timing_methods(full_queue, bench, "cuda")
    assert "the launch, not the work" not in gpu and "only a sync makes that certain" in gpu
    assert "no slower than the rest" in gpu


def test_busy_chains_live_and_recorded():
    small, large = _cpu_trace(0.6), _cpu_trace(0.99)
    rec_small, rec_large = bl.trace.recorded("short_chain_1k"), bl.trace.recorded("long_chain_64Mi")
    text = readouts.busy_chains(small, large, rec_small, rec_large, 0.9)
    assert "live on this CPU: small chain 60%" in text and "large chain 99%" in text
    assert "you predicted 90%" in text
    # the recording's steady runs: 6% busy for the small chain, the large one above 90%
    assert "recorded on an H100" in text and "small chain 6%" in text
    assert "no launch queue" in text  # said on a CPU only
    gpu = readouts.busy_chains(_cpu_trace(0.06, device="cuda"), large, rec_small, rec_large, 0.5)
    assert "live on this GPU" in gpu and "no launch queue" not in gpu


@pytest.mark.parametrize(
    ("ratio", "words"),
    [(1.05, "nearly the same time"), (2.0, "follows the work"), (1.5, "the knee"),
     (30.0, "More than twice")],
)  # fmt: skip
def test_doubling_names_a_regime_only_from_its_interval(ratio, words):
    text = readouts.doubling(_cmp(1e-3, ratio), 2.0)
    assert words in text
    assert ("lies in the interval" in text) == (ratio == 2.0)


def test_doubling_too_noisy_concludes_nothing():
    text = readouts.doubling(_cmp(1e-3, 1.5, spread=0.8), 2.0)
    assert "too noisy" in text and "No conclusion" in text and "overhead" not in text


def _batch_sweep(times_s: dict[int, float], weight_bytes: int, flops_per_sample: int) -> Sweep:
    points = tuple(
        Point(b, "batch", "cpu", Timing(samples_s=[t] * 5, device="cpu"), flops=flops_per_sample * b,
              bytes_moved=weight_bytes, weight_bytes=weight_bytes, cpu_share=1.0)
        for b, t in times_s.items()
    )  # fmt: skip
    pairs = tuple(
        Pair((b // 2, "batch"), (b, "batch"), _cmp(times_s[b // 2], times_s[b] / times_s[b // 2]))
        for b in times_s if b > 1
    )  # fmt: skip
    return Sweep("batch", "batch", points, pairs)


def test_critical_batch_model_and_measurement_agree():
    # 32 MiB of weights at 20 GB/s: 1.68 ms; 16.8 MFLOP per sample at 200 GFLOP/s: 84 µs -> knee 20
    w, f = 32 * 2**20, 16 * 1024**2
    times = {b: max(1.68e-3, b * 84e-6) for b in (1, 2, 4, 8, 16, 32, 64)}
    text = readouts.critical_batch(_batch_sweep(times, w, f), CPU, 20)
    assert "Equal at batch ≈ 20" in text and "You predicted 20" in text
    assert "between 16 and 32, near the model's 20" in text and "jumped" not in text


def test_critical_batch_says_a_kernel_switch_and_flat_honestly():
    w, f = 32 * 2**20, 16 * 1024**2
    times = {1: 1.6e-3, 2: 3.3e-3, 4: 3.3e-3, 8: 3.3e-3}  # gemv, then one flat gemm
    text = readouts.critical_batch(_batch_sweep(times, w, f), CPU, 20)
    assert "jumped more than the work grew" in text
    assert "stayed flat up to batch 8, below the model's 20" in text


def test_critical_batch_draws_no_conclusion_from_noise_or_waiting():
    w, f = 32 * 2**20, 16 * 1024**2
    times = {1: 1.6e-3, 2: 3.3e-3, 4: 3.3e-3, 8: 3.3e-3, 16: 3.3e-3}
    sweep = _batch_sweep(times, w, f)
    noisy = Sweep("batch", "batch", sweep.points, tuple(
        Pair(p.a, p.b, _cmp(1e-3, p.comparison.ratio, spread=0.9)) for p in sweep.pairs))  # fmt: skip
    text = readouts.critical_batch(noisy, CPU, 20)
    assert "Too noisy" in text and "stayed flat" not in text and "compute-bound" not in text
    waited = Sweep("batch", "batch", tuple(
        Point(p.x, p.line, p.device, p.timing, p.flops, p.bytes_moved, weight_bytes=w,
              cpu_share=0.3) for p in sweep.points), sweep.pairs)  # fmt: skip
    assert "Too noisy" in readouts.critical_batch(waited, CPU, 20)


def test_recorded_wide_mlp_says_the_model_misleads(h100):
    text = readouts.recorded_wide_mlp(h100)
    assert "Recorded on an H100" in text and "≈ 35" in text and "1.7x" in text


def test_remedy_speed_up_slow_down_and_no_change():
    assert "6.4x faster" in readouts.remedy(_cmp(80e-6, 1 / 6.4), "compile")
    assert "2.0x slower" in readouts.remedy(_cmp(80e-6, 2.0), "graph")
    assert "no measurable change" in readouts.remedy(_cmp(80e-6, 1.0), "x")
    assert "too noisy" in readouts.remedy(_cmp(80e-6, 0.5, spread=0.9), "x")


def test_remedy_and_batching_echo_the_prediction():
    assert "You predicted 3x faster" in readouts.remedy(_cmp(1e-3, 0.5), "x", predicted=3)
    text = readouts.batching(_cmp(170e-6, 2.77), 16, 4)
    assert "Per sequence that is 5.8x faster" in text and "you predicted 4x" in text
    noisy = readouts.batching(_cmp(170e-6, 2.77, spread=0.9), 16, 4)
    assert "no conclusion" in noisy and "Per sequence" not in noisy


def test_compile_cost_quotes_the_measured_time_not_a_few_microseconds(h100):
    text = readouts.compile_cost(_cmp(474e-6, 63.8 / 474), h100)
    assert "63.8 µs" in text and "9 times" in text and "Python" in text  # 63.8 / 7.43
    assert "a few microseconds" not in text
    busy = readouts.compile_cost(_cmp(74.6e-6, 150), fake_ceilings())
    assert "not what fusion does" in busy and "guards" not in busy


def test_cuda_graphs_explains_a_slower_reduce_overhead_only_when_measured():
    graph, compiled = _cmp(474e-6, 39.4 / 474), _cmp(474e-6, 63.8 / 474)
    slower = readouts.cuda_graphs(graph, _cmp(39.4e-6, 77.7 / 39.4), compiled)
    assert "12.0x faster" in slower and "copies the inputs" in slower
    same = readouts.cuda_graphs(graph, _cmp(39.4e-6, 1.02), compiled)
    assert "copies the inputs" not in same


def test_recorded_cuda_graphs_reads_the_traces():
    traces = [bl.trace.recorded(n) for n in ("short_chain_1k", "graph_replay_1k",
                                             "chain_reduce_overhead")]  # fmt: skip
    text = readouts.recorded_cuda_graphs(*traces)
    assert "Recorded on an H100" in text and "39.4 µs" in text and "77.7 µs" in text
    assert "all 32 kernels" in text and "multi_tensor_apply" in text


# ------------------------------------------------------------------ chapter 04


def _floors(c, m, o):
    from brrrlib.diagnosis import Floors

    return Floors(compute_s=c, memory_s=m, overhead_s=o)


def test_floors_table_names_the_largest_and_flags_a_share_above_one():
    text = readouts.floors_table({"a": (_floors(1e-5, 2.7e-3, 4e-5), 3e-3),
                                  "c": (_floors(1e-3, 2e-3, 1e-6), 1.5e-3)})  # fmt: skip
    lines = text.splitlines()
    assert lines[1].endswith("memory") and "90%" in lines[1]
    assert "c's memory floor" in text and "cache" in text


@pytest.mark.parametrize(
    ("measured", "words"),
    [(1e-3, "below the lower bound"), (2.5e-3, "between the bounds"), (5e-3, "above even")],
)
def test_bounds_place_the_measurement(measured, words):
    text = readouts.bounds(_floors(1.5e-3, 1e-3, 0.5e-3), measured)
    assert "max(compute, memory) = 1.5 ms" in text and "compute + memory = 2.5 ms" in text
    assert words in text


def _diagnosis(ceilings, flops, seconds, precision="fp32"):
    from types import SimpleNamespace

    return SimpleNamespace(
        ceilings=ceilings, precision=precision, achieved_flops_per_s=flops / seconds
    )


def test_block_matmul_share_names_the_faster_roofs(h100):
    gpu = readouts.block_matmul_share(_diagnosis(h100, 107.6e9, 2.82e-3))
    assert "74%" in gpu and "tf32 7.6x" in gpu and "bf16 14.3x" in gpu
    assert "not close to what this machine can do" in gpu
    cpu = readouts.block_matmul_share(_diagnosis(fake_ceilings(), 1e9, 10e-3))
    assert "No faster matmul precision" in cpu
    far = readouts.block_matmul_share(_diagnosis(CPU, 24e9, 1.0))  # 12% of 200 GFLOP/s
    assert "12%" in far and "bf16 4.0x" in far and "Close to" not in far


def test_top_ops_cuts_kernel_names():
    text = readouts.top_ops(bl.trace.recorded("tinyblock_b1_eager"), 4)
    assert all(len(line) < 100 for line in text.splitlines())
    assert "matmul" in text


def test_precision_gain_explains_by_the_measured_roofs(h100):
    three = readouts.precision_gain(_cmp(2.82e-3, 0.931 / 2.82), h100)
    assert "3.0x faster" in three and "14.3x its fp32 roof" in three and "far less" in three
    cpu_slow = readouts.precision_gain(_cmp(1e-3, 1.1, spread=0.05), CPU, predicted=2)
    assert "1.1x slower" in cpu_slow and "Keep fp32" in cpu_slow and "predicted 2x" in cpu_slow
    unclear = readouts.precision_gain(_cmp(1e-3, 0.97, spread=0.05), CPU)
    assert "No measurable gain" in unclear and "slower" not in unclear
    no_bf16 = readouts.precision_gain(_cmp(1e-3, 1.0), fake_ceilings())
    assert "No bf16 matmul ceiling" in no_bf16


def test_regime_shift_states_what_moved():
    from types import SimpleNamespace

    def d(label, regime):
        return SimpleNamespace(label=label, regime=regime, confidence="high",
                               remedies=(f"remedy for {regime}",))  # fmt: skip

    moved = readouts.regime_shift(d("fp32", "compute"), d("bf16", "overhead"))
    assert "moved it from compute to overhead" in moved and "remedy for overhead" in moved
    kept = readouts.regime_shift(d("fp32", "memory"), d("bf16", "memory"))
    assert "left it memory-bound" in kept and "moved" not in kept


def test_recorded_block_and_tf32(h100):
    block, (x,) = workloads.transformer_block(
        batch=16, seq=256, d_model=1024, dtype=torch.bfloat16, device="meta"
    )
    text = readouts.recorded_block(
        h100, bl.count(block, x), bl.trace.recorded("tinyblock_b1_eager")
    )
    assert "Recorded on an H100" in text and "2.82 ms" in text and "931 µs" in text
    assert "74% of the fp32" in text and "3.0x faster" in text and "moved from compute" in text
    tf32 = readouts.recorded_tf32(h100)
    assert "No TF32 on a CPU" in tf32 and "(7.6x)" in tf32 and "394 TFLOP/s" in tf32


def test_steps_summary_lists_each_step_and_only_the_regimes_measured():
    from types import SimpleNamespace

    steps = {"1 · eager, batch 1": (None, 2e-3, 1), "2 · eager, batch 16": (None, 8e-3, 16)}
    text = readouts.steps_summary(steps, {"1 · eager, batch 1": SimpleNamespace(
        regime="overhead", confidence="high")})  # fmt: skip
    assert "2 ms  overhead-bound (high)" in text and "500 µs" in text
    assert text.count("-bound") == 1


# ------------------------------------------------------------------ figures


def test_figures_of_chapters_03_and_04_draw_labelled_axes(h100):
    import matplotlib.pyplot as plt

    ax = bl.figures.flops_per_python_add(30e6, h100)
    assert "FLOPs per Python addition" in ax.get_xlabel()
    assert any("this machine" in t.get_text() for t in ax.get_yticklabels())
    fig = bl.figures.timelines([bl.trace.recorded("short_chain_1k"), _cpu_trace(0.5)])
    titles = [a.get_title(loc="left") for a in fig.axes]
    assert "recorded on NVIDIA H100" in titles[0] and "run 1" in titles[0]  # run 0 inflated
    assert "live, cpu" in titles[1]
    ax = bl.figures.remedy_bars({"compile": _cmp(80e-6, 0.2), "graph": None})
    assert "not measured here: graph" in ax.get_xlabel()
    plt.close("all")


def test_block_steps_judges_each_step_against_its_own_roof(h100):
    import matplotlib.pyplot as plt

    fp32 = bl.count(*_meta_block(torch.float32))
    bf16 = bl.count(*_meta_block(torch.bfloat16))
    steps = {"fp32, batch 16": (fp32, 2.82e-3, 16), "bf16, batch 16": (bf16, 0.931e-3, 16)}
    fig = bl.figures.block_steps(h100, steps)
    left = fig.axes[0]
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert any(t.startswith("fp32 matmul roof") for t in legend)
    assert any(t.startswith("bf16 matmul roof") for t in legend)
    # the bf16 step sits above the fp32 roof but under its own: no red cross anywhere
    assert not [line for line in left.get_lines() if line.get_marker() == "X"]
    assert math.isclose(bf16.flops / 0.931e-3, 115.6e12, rel_tol=0.01)
    plt.close("all")


def _meta_block(dtype):
    block, (x,) = workloads.transformer_block(batch=16, seq=256, d_model=1024, dtype=dtype,
                                              device="meta")  # fmt: skip
    return block, x
