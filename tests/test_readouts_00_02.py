"""Tests for the sentences chapters 00-02 print (brrrlib.readouts, from brrrlib.readouts._chapters_00_02).

Each readout runs on a laptop CPU's ceilings (a 2-core EPYC's round numbers) and
on the H100's ceilings recorded with the course, and the test asserts what it
says: "close to the roof" only when it is, "tensor cores" only on CUDA, no
conclusion from a comparison whose interval is wide. Nothing here measures:
comparisons and timings are built from chosen samples.
"""

from __future__ import annotations

import re

import pytest
import torch
from _fakes import fake_ceilings

from brrrlib import classroom, figures, hardware, readouts
from brrrlib.comparison import Comparison
from brrrlib.counting import count
from brrrlib.roofline import RooflinePoint
from brrrlib.timing import Timing

# A 2-core AMD EPYC as measured for the course: bf16 has a fast path, fp16 none.
CPU = fake_ceilings(
    device_name="AMD EPYC",
    matmul_flops_per_s=207e9,
    vector_flops_per_s=102e9,
    mem_bandwidth_bytes_per_s=45.6e9,
    op_overhead_s=0.74e-6,
    matmul_flops_per_s_by_dtype={"bf16": 838e9, "fp16": 2.6e9},
)
H100 = classroom.recorded_reports()[0].machine  # measured 2026-11-22, shipped with brrrlib
A100 = hardware.spec("A100")
MACHINES = {"cpu": CPU, "h100": H100}


def _compare(a_s: float, b_s: float, *, spread: float = 0.01, rounds: int = 12) -> Comparison:
    """A comparison whose rounds took ``a_s`` and ``b_s``, give or take ``spread``."""
    wobble = [spread * ((i % 3) - 1) for i in range(rounds)]
    ta = [a_s * (1 + w) for w in wobble]
    tb = [b_s * (1 - w) for w in wobble]
    return Comparison(
        a=Timing(ta, "cpu"),
        b=Timing(tb, "cpu"),
        ratios=tuple(y / x for x, y in zip(ta, tb, strict=True)),
    )


NOISY = _compare(1.0, 2.0, spread=0.6)


def test_the_helpers_build_decided_and_undecided_comparisons():
    assert _compare(1.0, 2.0).decided and _compare(1.0, 2.0).ratio == pytest.approx(2.0, rel=0.03)
    assert not NOISY.decided


# --------------------------------------------------------------------------- chapter 00


def test_nearest_spec_compares_a_listed_gpu_with_its_own_sheet_and_a_cpu_with_its_neighbour():
    h100 = readouts.nearest_spec(H100)
    assert "This machine is in the table: H100 SXM" in h100
    assert "77% of its sheet's fp32 peak" in h100 and "89% of its bandwidth" in h100
    cpu = readouts.nearest_spec(CPU)
    near = CPU.nearest_spec()
    flops = near.peak("fp32") / CPU.matmul_flops_per_s
    assert f"Closest spec-sheet row to this machine: {near.name}" in cpu
    assert f"{flops:.0f}x the fp32 FLOP/s" in cpu
    # ratios near 1 keep their digits (the H100 once read "1x" for 1.30 and 1.12)
    assert "1x" not in cpu and "1x" not in h100


@pytest.mark.parametrize("machine", ["cpu", "h100"])
def test_bigger_job_says_the_model_holds_only_when_it_does(machine):
    c = MACHINES[machine]
    n_big = 2**24 if machine == "cpu" else 300_000_000
    big_model = c.op_overhead_s + 8 * n_big / c.mem_bandwidth_bytes_per_s
    held = readouts.bigger_job(_compare(1.2 * c.op_overhead_s, big_model), 10, n_big, c, 1e3)
    assert "The model holds within 2x" in held and f"size ratio {n_big / 10:,.0f}x" in held
    assert "your prediction 1,000x" in held
    slow = readouts.bigger_job(_compare(c.op_overhead_s, 5 * big_model), 10, n_big, c, 1e3)
    assert "of the copy ceiling: slower than the model" in slow and "holds" not in slow
    costly = readouts.bigger_job(_compare(5 * c.op_overhead_s, big_model), 10, n_big, c, 1e3)
    assert "the in-place floor" in costly and "holds" not in costly
    noisy = readouts.bigger_job(NOISY, 10, n_big, c, 1e3)
    assert "too noisy to tell" in noisy and "holds" not in noisy


def test_ridge_points_set_the_fastest_precision_beside_the_spec_sheet():
    cpu = readouts.ridge_points(CPU, A100)
    assert re.search(r"this machine \(measured\)\s+4\.54\s+-\s+18\.4\s+0\.057", cpu), cpu
    assert "the fastest matmul is bf16 (4.05x fp32)" in cpu
    assert "fp16 runs far slower than fp32 here: no fast path" in cpu
    assert "A100 40GB SXM needs 201 FLOP/byte, 11x this machine's 18.4" in cpu
    assert "more memory-bound than this machine" in cpu
    h100 = readouts.ridge_points(H100, A100)
    # the H100's own fast ridge is shown, not only its fp32 one beside the A100's bf16
    assert "the fastest matmul is fp16" in h100 and "258 FLOP/byte against 17.3" in h100
    assert "no fast path" not in h100 and "more memory-bound than this machine" not in h100
    guessed = readouts.ridge_points(CPU, A100, prediction=50)
    assert (
        "You predicted 50 FLOP/byte for this machine's fastest matmul; measured: 18.4 (bf16)"
        in guessed
    )
    assert "You predicted" not in cpu
    slow_only = fake_ceilings(matmul_flops_per_s_by_dtype={"fp16": 1e9})
    assert "No precision runs faster than fp32 here" in readouts.ridge_points(slow_only, A100)


def _points(c, matmul_share: float):
    bw = c.mem_bandwidth_bytes_per_s
    n = 512
    return [
        RooflinePoint("tiny add", 10, 80, 1.2 * c.op_overhead_s),
        RooflinePoint("big add", 2**24, 2**27, 1.1 * 2**27 / bw),
        RooflinePoint(
            "matmul", 2 * n**3, 12 * n**2, 2 * n**3 / c.matmul_flops_per_s / matmul_share
        ),
    ]


@pytest.mark.parametrize("machine", ["cpu", "h100"])
def test_roofline_points_say_close_to_the_roof_only_when_it_is(machine):
    c = MACHINES[machine]
    text = readouts.roofline_points(_points(c, 0.95), c, beside=[A100], prediction="matmul")
    lines = dict(line.split(": ", 1) for line in text.splitlines()[:3])
    assert "far below its roof" in lines["tiny add"] and "(overhead)" in lines["tiny add"]
    assert "close to its roof, left of the ridge: memory-bound" in lines["big add"]
    assert "= 95% of the roof above it, close to its roof" in lines["matmul"]
    assert "Farthest below its roof: tiny add; you predicted matmul." in text
    where = "above" if machine == "cpu" else "below"  # an A100 is slower than an H100
    assert "fp32 roof is" in text and f"drawn {where} it" in text
    half = readouts.roofline_points(_points(c, 0.5), c)
    matmul = next(line for line in half.splitlines() if line.startswith("matmul"))
    assert "below its roof, right of the ridge: slower than the kernel that set the roof" in matmul
    quarter = readouts.roofline_points(_points(c, 0.24), c)
    matmul = next(line for line in quarter.splitlines() if line.startswith("matmul"))
    assert "close" not in matmul and "24% of the roof" in matmul
    assert "far below its roof, right of the ridge: too little work per call" in matmul
    # a tiny op's share is printed with digits, never rounded to 0.0%
    assert "0.0%" not in text


def test_generations_are_each_relative_to_the_first():
    text = readouts.generations([hardware.spec(n) for n in ("V100", "A100", "H100")])
    first, *rows = text.splitlines()
    assert first.startswith("relative to the V100")
    h100, v100 = hardware.spec("H100"), hardware.spec("V100")
    growth = h100.peak("fp16") / v100.peak("fp16")
    assert f"FLOP/s {growth:.2f}x" in rows[-1] and "ridge 295" in rows[-1]
    assert "FLOP/s 1.00x" in rows[0]


# --------------------------------------------------------------------------- chapter 01


def test_units_name_tensor_cores_only_on_cuda_and_judge_each_precision_by_its_speed():
    cpu = readouts.units(CPU, A100)
    assert "16x (spec sheet)" in cpu and "tensor cores" not in cpu.split("\n", 1)[1]
    assert "bf16 matmul: 838 GFLOP/s = 8.22x the vector rate (4.05x fp32: a fast path" in cpu
    assert "fp16 matmul: 2.6 GFLOP/s" in cpu and "no fast path here" in cpu
    h100 = readouts.units(H100, A100)
    assert "tf32 matmul: 394 TFLOP/s" in h100 and "7.62x fp32: tensor cores" in h100
    assert "51684" not in h100 and "51.7 TFLOP/s" in h100
    assert "fastest kernel timed" not in h100  # the recording predates matmul_method
    onednn = fake_ceilings(matmul_method="fp32 n=256: torch.mm 189 GFLOP/s, oneDNN linear 338")
    assert "(each matmul roof is the fastest kernel timed: fp32 n=256" in readouts.units(
        onednn, A100
    )


@pytest.mark.parametrize("machine", ["cpu", "h100"])
def test_precision_speedup_reads_the_comparison(machine):
    c = MACHINES[machine]
    text = readouts.precision_speedup(_compare(1.0, 0.25), 1024, 2.0, c)
    assert "you predicted 2.00x faster" in text and ": 4.00x faster (95% interval" in text
    assert ("tensor cores" in text) == (machine == "h100")
    assert ("a fast path of this CPU's for bf16" in text) == (machine == "cpu")
    same = readouts.precision_speedup(_compare(1.0, 0.95), 1024, 2.0, c)
    assert "about fp32's speed" in same and "tensor cores" not in same
    slower = readouts.precision_speedup(_compare(1.0, 80.0), 1024, 2.0, c, precision="fp16")
    assert "no fast path for fp16 here" in slower
    assert "too noisy to tell" in readouts.precision_speedup(NOISY, 1024, 2.0, c)


def test_recorded_ladder_is_labelled_recorded_beside_this_machine_measured_now():
    rec = figures.recorded_sweeps()
    text = readouts.recorded_ladder(rec, CPU)
    assert text.startswith(rec.label + " (recorded)")
    assert "tf32: best 381 TFLOP/s, 7.25x fp32" in text and "bf16: best 729 TFLOP/s" in text
    assert "fp32: best 52.6 TFLOP/s; half of that from n = 1024" in text
    assert text.splitlines()[-1].startswith("this machine (AMD EPYC), measured now: fp32 207")


def test_matmul_sweep_keeps_digits_and_says_how_the_roof_was_measured():
    sizes, shares = [16, 64, 256, 1024], [0.00002, 0.0012, 0.3, 0.95]
    text = readouts.matmul_sweep(sizes, shares, 0.5, CPU)
    assert text.startswith("n = 64: you predicted 50% of the peak, measured 0.1%.")
    assert "best: n = 1024, 95% of the peak." in text and "well below" not in text
    assert "0.002%" in readouts.matmul_sweep(sizes, shares, 0.5, CPU, n=16)
    assert "not in this sweep" in readouts.matmul_sweep(sizes, shares, 0.5, CPU, n=32)
    # torch.mm at 56% of a roof that oneDNN set: the readout says so instead of blaming the size
    onednn = fake_ceilings(
        matmul_flops_per_s=338e9,
        matmul_method="fp32 n=256: torch.mm 189 GFLOP/s, oneDNN linear 338 GFLOP/s; bf16 n=1024: "
        "torch.mm 852 GFLOP/s",
    )
    capped = readouts.matmul_sweep(sizes, [0.0, 0.001, 0.3, 0.56], 0.5, onednn)
    assert "Even the largest stay well below the roof" in capped
    assert "(n=256: torch.mm 189 GFLOP/s, oneDNN linear 338 GFLOP/s)" in capped
    assert "bf16" not in capped


def _breakdown(matmul_s: float, norm_s: float, pointwise_s: float):
    """A counted block (a matmul, a layer norm, a pointwise op) with chosen category times."""
    x, w = torch.randn(64, 32), torch.randn(32, 32)

    def block(x, w):
        return torch.relu(torch.nn.functional.layer_norm(x @ w, (32,)))

    times = {"matmul": matmul_s, "normalization": norm_s, "pointwise": pointwise_s}
    return count(block, x, w).with_times(times)


@pytest.mark.parametrize("machine", ["cpu", "h100"])
def test_matmul_share_explains_the_gap_to_the_essay_by_what_was_measured(machine):
    c = MACHINES[machine]
    b = _breakdown(0.77, 0.05, 0.18)
    text = readouts.matmul_share(b, c, 0.61, precision="fp32", d_model=1024)
    assert "matmul: " in text and "77% of the time" in text and "you predicted 61%" in text
    fastest = "bf16" if machine == "cpu" else "fp16"
    assert f"did not use the {fastest} path" in text  # both machines have a faster one
    assert "d_model = 1024" in text
    plain = fake_ceilings()  # fp32 is as fast as matmuls go: no faster units to blame
    assert "no faster units" in readouts.matmul_share(b, plain, 0.61)


def test_flops_gap_sets_each_class_against_the_memory_roof():
    bw = CPU.mem_bandwidth_bytes_per_s
    cats = _breakdown(1.0, 1.0, 1.0).by_category()
    pointwise = cats["pointwise"]
    i = pointwise["flops"] / pointwise["bytes_moved"]
    # the pointwise op reaches half its memory roof; the matmul takes as long
    seconds = pointwise["flops"] / (0.5 * i * bw)
    text = readouts.flops_gap(_breakdown(seconds, seconds, seconds), CPU)
    gap = cats["matmul"]["flops"] / pointwise["flops"]  # equal times: the FLOPs' ratio
    line = next(line for line in text.splitlines() if line.startswith("pointwise: "))
    assert f"{gap:.0f}x below the matmuls" in line
    assert f"at {i:.2g} FLOP/byte memory allows it" in line
    assert f"({CPU.matmul_flops_per_s / (i * bw):.0f}x below the peak)" in line
    assert line.endswith("and it reached 50% of that")
    assert f"The ridge here is {CPU.matmul_flops_per_s / bw:.3g} FLOP/byte (fp32)" in text
    assert "would put the rest 2.03x below it" in text  # 207 GFLOP/s over 102 GFLOP/s
    assert "stayed far below even the memory roof" not in text
    slow = readouts.flops_gap(_breakdown(seconds, seconds, 10 * seconds), CPU)
    assert "pointwise stayed far below even the memory roof" in slow
    assert "normalization stayed" not in slow
    empty = count(torch.relu, torch.randn(8)).with_times({"pointwise": 1e-3})
    assert "No matmul time was measured" in readouts.flops_gap(empty, CPU)


def test_precision_shift_states_the_direction_measured_and_the_paired_speedup():
    fp32, bf16 = _breakdown(0.77, 0.05, 0.18), _breakdown(0.30, 0.2, 0.5)
    text = readouts.precision_shift(fp32, bf16, _compare(1.0, 0.5), "fall")
    assert "fp32 77%, bf16 30%: it fell (you predicted it would fall)" in text
    assert "2.00x faster" in text and "help matmuls only" in text
    rose = readouts.precision_shift(bf16, fp32, NOISY, "fall")
    assert "it rose" in rose and "too noisy to tell" in rose and "help matmuls only" not in rose


# --------------------------------------------------------------------------- chapter 02


def test_element_budget_compares_like_with_like():
    cpu = readouts.element_budget(CPU, A100)
    assert "100 FLOPs per element (FMA = 2), 50 plain multiplies" in cpu
    assert "18 multiplies per element, fewer than the A100" in cpu
    # the H100's recorded vector ceiling counted FMAs: 151 'multiplies', more than the A100's 50
    assert "more than the A100" in readouts.element_budget(H100, A100)


def test_achieved_bandwidth_gives_each_pass_its_share_of_the_ceiling():
    t = Timing([2.94e-3] * 5, "cpu")
    text = readouts.achieved_bandwidth({"out.copy_(x)": t}, 2**27, CPU)
    assert "2.94 ms" in text and "45.7 GB/s" in text and "100% of the ceiling" in text


def _repeat_sweep(c, flat_factor: float, multiply_factor: float, repeats=(1, 4, 16, 64, 256)):
    """A repeat sweep built by hand: fused points from the model, scaled by the given factors."""
    from brrrlib.sweeps import Point, Sweep
    from brrrlib.widgets._experiments import repeat_model_s

    size, points = 2**24, []
    for r in repeats:
        model = repeat_model_s(c, size, r, "fused")
        seconds = max(flat_factor * 8 * size / c.mem_bandwidth_bytes_per_s,
                      multiply_factor * r * size / c.vector_flops_per_s)  # fmt: skip
        points.append(Point(r, "fused", "cpu", Timing([seconds] * 5, "cpu"), flops=r * size,
                            bytes_moved=8 * size, predicted_s=model, size=size))  # fmt: skip
    return Sweep("repeat", "repeat", tuple(points))


def test_knee_reports_guess_model_and_measurement_and_why_they_differ():
    from brrrlib.widgets._experiments import predicted_knee_repeat

    model = predicted_knee_repeat(CPU)
    exact = readouts.knee(10, CPU, _repeat_sweep(CPU, 1.0, 1.0))
    assert "you predicted repeat 10; the model" in exact and f"at {model:.0f}" in exact
    assert "1.00x the model's" in exact and "moves the knee" not in exact
    slow = readouts.knee(10, CPU, _repeat_sweep(CPU, 1.0, 2.0))
    assert "0.50x the model's" in slow and "moves the knee left" in slow
    streaming = readouts.knee(10, CPU, _repeat_sweep(CPU, 2.0, 1.0))
    assert "2.00x the model's" in streaming and "moves the knee right" in streaming
    assert "waited for cores" not in exact
    from dataclasses import replace

    busy = _repeat_sweep(CPU, 1.0, 1.0)
    busy = replace(busy, points=tuple(replace(p, cpu_share=0.5) for p in busy.points))
    assert "waited for cores another program holds" in readouts.knee(10, CPU, busy)
    flat = readouts.knee(10, CPU, _repeat_sweep(CPU, 1.0, 1.0, repeats=(1, 2, 4)))
    assert "not reached" in flat and "still flat at repeat 4" in flat


def test_recorded_knees_come_from_the_recording():
    text = readouts.recorded_knees(figures.recorded_sweeps())
    assert "(recorded)" in text and "eager fp32 at repeat 16: 16x repeat 1" in text
    k32 = int(re.search(r"fused fp32 flat at 358 µs, knee near repeat (\d+)", text).group(1))
    k16 = int(re.search(r"knee near (\d+)\. Same", text).group(1))
    assert 64 <= k32 <= 128 and 0.4 <= k16 / k32 <= 0.6  # the README: between 64 and 128


def test_fresh_outputs_blame_page_faults_only_when_a_fresh_output_costs_time():
    cpu = readouts.fresh_outputs(_compare(3.3e-3, 21e-3))
    assert "page fault" in cpu and "x6.3" in cpu
    gpu = readouts.fresh_outputs(_compare(0.36e-3, 0.36e-3))
    assert "page fault" not in gpu and "costs next to nothing" in gpu
    noisy = readouts.fresh_outputs(NOISY)
    assert "too noisy" in noisy and "page fault" not in noisy


def test_memory_bound_and_fusion_follow_the_measured_regime():
    memory = _compare(1.0, 1.05)
    assert "memory-bound here" in readouts.memory_bound(memory)
    compute = _compare(1.0, 3.0)
    assert "compute-bound here" in readouts.memory_bound(compute)
    as_predicted = readouts.fusion(_compare(2.0, 1.0), 2.0, memory, 8 * 2**24, CPU)
    assert "2.00x faster than eager" in as_predicted and "As predicted" in as_predicted
    capped = readouts.fusion(_compare(1.2, 1.0), 2.0, compute, 8 * 2**24, CPU)
    assert "compute-bound here" in capped and "As predicted" not in capped
    slow = readouts.fusion(_compare(1.2, 1.0), 2.0, memory, 8 * 2**24, CPU)
    assert "Less than the bytes predict" in slow and "of the copy ceiling" in slow
    assert "too noisy" in readouts.fusion(NOISY, 2.0, memory, 8 * 2**24, CPU)


@pytest.mark.parametrize("machine", ["cpu", "h100"])
def test_gelu_vs_relu_never_blames_allocation(machine):
    c = MACHINES[machine]
    budget = c.vector_flops_per_s * 8 / c.mem_bandwidth_bytes_per_s
    same = readouts.gelu_vs_relu(_compare(1.0, 1.02), c, "same")
    assert "the same cost" in same and f"{budget:.0f} multiplies per element" in same
    slower = readouts.gelu_vs_relu(_compare(1.0, 2.0), c, "same")
    assert "gelu costs more here" in slower and "compute-bound" in slower
    for text in (same, slower):
        assert "allocat" not in text
    assert "too noisy" in readouts.gelu_vs_relu(NOISY, c, "same")


def test_checkpointing_reads_the_bytes_kept_moved_and_the_time():
    x = torch.randn(1024, requires_grad=True)
    plain = count(lambda t: t.cos().cos().sum().backward(), x)
    text = readouts.checkpointing(
        (8 * 1024, 4 * 1024), 1024, (plain, plain), _compare(1.0, 1.3), 1.2
    )
    assert "8 bytes per element without checkpointing, 4 with it (50% less memory)" in text
    assert f"{plain.bytes_moved / 1024:.0f} bytes per element in {plain.ops} ops" in text
    assert "x1.30 time" in text and "you predicted 1.20x" in text and "Memory saved" in text
    free = readouts.checkpointing((8, 4), 1, (plain, plain), _compare(1.0, 0.99), 1.2)
    assert "Memory saved" not in free
    assert "too noisy" in readouts.checkpointing((8, 4), 1, (plain, plain), NOISY, 1.2)
