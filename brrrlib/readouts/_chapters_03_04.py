"""The sentences chapters 03 (overhead) and 04 (diagnose) print, written from their measurements.

Re-exported by :mod:`brrrlib.readouts` (``bl.readouts.doubling(...)``). Each
function takes what a cell just measured (a :class:`~brrrlib.timing.Timing`, a
:class:`~brrrlib.comparison.Comparison`, a :class:`~brrrlib.trace.Trace`,
:class:`~brrrlib.ceilings.Ceilings`, a :class:`~brrrlib.diagnosis.Diagnosis`)
and returns plain text that says what the numbers show, on a laptop CPU and on
an H100 alike: a conclusion only where the numbers (and, for a ratio, its
interval from alternating rounds) support it. Numbers recorded on an H100
(``brrrlib/recordings``, :data:`brrrlib.workloads.H100_RECORDED_S`) are always
said to be recorded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from brrrlib import _fmt

__all__ = [
    "batching",
    "bounds",
    "busy_chains",
    "compile_cost",
    "critical_batch",
    "cuda_graphs",
    "doubling",
    "floors_table",
    "flops_per_python_add",
    "block_matmul_share",
    "precision_gain",
    "python_speed",
    "recorded_block",
    "recorded_cuda_graphs",
    "recorded_tf32",
    "recorded_wide_mlp",
    "regime_shift",
    "remedy",
    "steps_summary",
    "timing_methods",
    "tiny_op",
    "top_ops",
]

# Doubling the batch: the whole interval below _FLAT is "about the same time"; above
# _LINEAR it follows the work (the batch explorer's borders, brrrlib.widgets._batch_explorer).
_FLAT, _LINEAR = 1.3, 1.7
# A doubling that costs more than this many times the time did more than twice the work.
_MORE_THAN_WORK = 2.3
# The device counts as idle below this busy fraction of a trace's steady runs.
_IDLE = 0.5
_H100 = "recorded on an H100 (2026-11-22)"
_H100_HEAD = "Recorded on an H100 (2026-11-22)"


def _count(x: float) -> str:
    """A plain count in words: "46 million", "18,500", "21.5 billion"."""
    for scale, word in ((1e12, "trillion"), (1e9, "billion"), (1e6, "million")):
        if x >= scale:
            return f"{x / scale:.3g} {word}"
    return f"{float(f'{x:.3g}'):,.0f}"


def _on_gpu(ceilings: Any) -> bool:
    return str(getattr(ceilings, "device", "cpu")).startswith(("cuda", "mps"))


def _busy(trace: Any) -> float:
    """Median device-busy fraction over a trace's steady runs (run 0 left out when inflated)."""
    return _fmt.median([trace.busy_fraction_per_run[r] for r in trace.steady_runs])


def _fastest_matmul(ceilings: Any) -> tuple[str, float]:
    """(precision, FLOP/s) of the fastest matmul measured on this machine."""
    by_dtype = dict(ceilings.matmul_flops_per_s_by_dtype)
    best = max(by_dtype, key=by_dtype.get)
    return best, by_dtype[best]


def python_speed(python_adds_per_s: float, predicted_adds_per_s: float) -> str:
    """Chapter 03: the measured speed of a pure-Python loop, beside the prediction and the essay's."""
    from brrrlib.hardware import ESSAY_PYTHON_ADDS_PER_S

    return (
        f"Python on this machine: {_count(python_adds_per_s)} additions per second (you "
        f"predicted {_count(predicted_adds_per_s)}; the essay measured about "
        f"{_count(ESSAY_PYTHON_ADDS_PER_S)})."
    )


def flops_per_python_add(python_adds_per_s: float, ceilings: Any) -> str:
    """Chapter 03: how many FLOPs this machine, and an H100 on paper, do per Python addition.

    This machine is judged at its fastest *measured* matmul precision (bf16
    on a GPU with tensor cores, often on a CPU too), so a GPU is never set
    beside itself at a slower precision; the H100 row is the spec sheet's.
    """
    from brrrlib.hardware import spec

    precision, peak = _fastest_matmul(ceilings)
    kind = "GPU" if _on_gpu(ceilings) else "CPU"
    h100 = spec("H100").peak("bf16") / python_adds_per_s
    return (
        f"This machine's {kind} ({ceilings.device_name}) measured {_fmt.si(peak, 'FLOP/s')} on "
        f"{precision} matmuls: {_count(peak / python_adds_per_s)} FLOPs in the time Python does "
        f"one addition. An H100's bf16 peak on paper (bl.spec) would do {_count(h100)}. Each "
        "line of Python must hand the device at least that much work, or the device waits."
    )


def tiny_op(timing: Any, ceilings: Any, predicted_us: float) -> str:
    """Chapter 03: one ``a + b`` on one element against its own memory traffic and the op floor."""
    move_s = 3 * 4 / ceilings.mem_bandwidth_bytes_per_s  # read 2 fp32, write 1
    t = timing.median_s
    return (
        f"a + b on one element: {_fmt.seconds(t)} per call (you predicted {predicted_us:g} µs). "
        f"Its 12 bytes would move in {_fmt.seconds(move_s)} at this machine's "
        f"{_fmt.si(ceilings.mem_bandwidth_bytes_per_s, 'B/s')}: the call costs "
        f"{t / move_s:,.0f} times its own memory traffic. The rest is overhead. For comparison, "
        f"bl.measure_ceilings() times the cheapest op form (in place, no new output) at "
        f"{_fmt.seconds(ceilings.op_overhead_s)}: its op_overhead_s, a floor under every op."
    )


def timing_methods(times_s: Mapping[str, float], timing: Any, device: str) -> str:
    """Chapter 03: what each way of timing one op measured, and which to believe.

    ``times_s`` holds the cell's clocks by name ("first call, synced", "one
    call, no sync", "one call, synced", "CUDA events" on CUDA,
    "torch.utils.benchmark"); ``timing`` is ``bl.benchmark``'s
    :class:`~brrrlib.timing.Timing` of the same op.
    """
    first, naive = times_s["first call, synced"], times_s["one call, no sync"]
    synced, tub = times_s["one call, synced"], times_s["torch.utils.benchmark"]
    steady = timing.median_s
    lines = [
        "  " + ", ".join(f"{k}: {_fmt.seconds(v)}" for k, v in times_s.items())
        + f", bl.benchmark: {_fmt.seconds(steady)}"
    ]  # fmt: skip
    if str(device).startswith("cuda"):
        if naive < 0.5 * steady:
            said = (f"Without a sync the clock stopped when the kernel was queued: "
                    f"{_fmt.seconds(naive)} is the launch, not the work.")  # fmt: skip
        else:
            said = (f"Without a sync the clock read {_fmt.seconds(naive)}, about the work's time "
                    "this once (the queue was full); only a sync makes that certain.")  # fmt: skip
        lines.append(
            f"{said} With a sync, one call took {_fmt.seconds(synced)} (launch, work and the "
            "sync itself); CUDA events on the GPU's own clock said "
            f"{_fmt.seconds(times_s.get('CUDA events', math.nan))}."
        )
    else:
        lines.append(
            "A CPU op returns when its work is done, so the sync changes nothing here: "
            f"{_fmt.seconds(naive)} without, {_fmt.seconds(synced)} with. But one call is one "
            f"sample: those two differ by {_fmt.percent(abs(naive - synced), min(naive, synced))}"
            " between back-to-back calls (the thread pool waking up, the OS moving threads)."
        )
    if first > 1.5 * steady:
        lines.append(f"The first call took {_fmt.seconds(first)}, {first / steady:.1f}x the "
                     "median of many: warm-up (loading code, the allocator's first requests, "
                     "first-touch pages) that a repeated timer leaves out.")  # fmt: skip
    else:
        lines.append(f"The first call took {_fmt.seconds(first)}, no slower than the rest: the "
                     "cells above had warmed this machine up already.")  # fmt: skip
    lines.append(
        f"torch.utils.benchmark ({_fmt.seconds(tub)}) and bl.benchmark ({_fmt.seconds(steady)}, "
        f"{len(timing.samples_s)} samples, {timing.dropped} disturbed ones dropped) repeat, sync "
        "and take the median: the numbers to quote."
    )
    return "\n".join(lines)


def busy_chains(small: Any, large: Any, recorded_small: Any, recorded_large: Any,
                predicted_small: float) -> str:  # fmt: skip
    """Chapter 03: how busy the device was for a small and a large op chain, live and recorded.

    Busy fractions are medians over each trace's steady runs (run 0 is left out
    when the profiler's own set-up inflated it, as in the recordings).
    """
    live = "GPU" if small.device == "cuda" else "CPU"
    kernel_s = sum(op.total_s for op in recorded_small.top_ops(50)) / max(
        1, len(recorded_small.device_intervals)
    )
    lines = [
        f"Device busy, live on this {live}: small chain {_fmt.percent(_busy(small), 1)} (you "
        f"predicted {_fmt.percent(predicted_small, 1)}), large chain "
        f"{_fmt.percent(_busy(large), 1)}.",
        f"Device busy, {_H100}: small chain {_fmt.percent(_busy(recorded_small), 1)}, large "
        f"chain {_fmt.percent(_busy(recorded_large), 1)}. There each small kernel ran for "
        f"{_fmt.seconds(kernel_s)} on average, far less than the host needs to launch the next.",
    ]
    if live == "CPU":
        lines.append(
            "On a CPU the 'device' lane is the op bodies on the same thread: no launch queue, "
            "so the lane idles only while Python and the dispatcher run between ops."
        )
    return "\n".join(lines)


def doubling(comparison: Any, predicted_ratio: float) -> str:
    """Chapter 03: the batch-size test, batch b -> 2b, checked against the learner's prediction."""
    lo, hi = comparison.interval
    head = f"Doubling the batch: {comparison.says()}; you predicted ×{predicted_ratio:.2f}."
    if not comparison.decided:
        return head + " No conclusion from this run: re-run the cell."
    if hi < _FLAT:
        said = (" Twice the work for nearly the same time: a fixed cost per call dominates, not "
                "the work. The essay's test says overhead, unless the fixed cost is reading "
                "big weights (the caveat below).")  # fmt: skip
    elif lo > _MORE_THAN_WORK:
        said = (" More than twice the time for twice the work: not the arithmetic. The library "
                "picked another kernel for the new shape, the data left a cache, or the "
                "threads waited for a core another program held.")  # fmt: skip
    elif lo > _LINEAR:
        said = " The time follows the work: past the knee, the work dominates."
    else:
        said = " Between flat and double: the fixed cost and the work are about equal (the knee)."
    inside = lo / 1.1 <= predicted_ratio <= hi * 1.1
    return head + said + (" Your prediction lies in the interval." if inside else
                          " Your prediction lies outside the interval.")  # fmt: skip


def critical_batch(sweep: Any, ceilings: Any, predicted: float, precision: str = "fp32") -> str:
    """Chapter 03: where a weight-bound layer stops being flat, model against measurement.

    ``sweep`` is a batch explorer's ``.sweep`` (each batch paired with half of
    it). The model: reading the weights takes ``weight_bytes / bandwidth``
    whatever the batch; each sample adds ``flops / matmul peak``; the two are
    equal at the critical batch (twice the fp32 ridge point for an fp32 layer,
    whose numbers are 4 bytes; about the ridge point itself in bf16).
    """
    points = sorted((p for p in sweep.line("batch") if p.measured), key=lambda p: p.x)
    if not points:
        return "No batch measured yet: run the explorer cell first."
    ref, bw = points[-1], ceilings.mem_bandwidth_bytes_per_s
    peak = ceilings.matmul_peak(precision)
    weights_s, per_sample_s = ref.weight_bytes / bw, ref.flops / ref.x / peak
    knee = weights_s / per_sample_s
    doublings = [(p.x, sweep.comparison((p.x // 2, "batch"), (p.x, "batch"))) for p in points]
    doublings = [(b, c) for b, c in doublings if c is not None]
    lines = [
        f"Model: the weights ({_fmt.binary_bytes(ref.weight_bytes)}) take "
        f"{_fmt.seconds(weights_s)} to read at {_fmt.si(bw, 'B/s')}; one sample's FLOPs take "
        f"{_fmt.seconds(per_sample_s)} at the {precision} matmul roof. Equal at batch ≈ "
        f"{knee:.0f}: the critical batch ({precision} ridge point "
        f"{ceilings.ridge_point_flops_per_byte(precision):.3g} FLOP/byte). You predicted "
        f"{predicted:g}.",
        "Measured, each batch against half of it: " + ", ".join(
            f"{b // 2}→{b} ×{c.ratio:.2f}" + ("" if c.decided else " (noisy)") for b, c in doublings),
    ]  # fmt: skip
    unclear = [b for b, c in doublings if b > 2 and not c.decided]
    if any(p.waited for p in points) or len(unclear) > 1:
        lines.append("Too noisy to say where the time starts to follow the batch: calls waited "
                     "for cores another program held, or the intervals stayed wide. Close other "
                     "programs and run the cell again.")  # fmt: skip
        return "\n".join(lines)
    jump = next((c for b, c in doublings if b == 2 and c.decided and c.low > _LINEAR), None)
    grows = next((b for b, c in doublings if b > 2 and c.decided and c.low > _FLAT), None)
    if jump is not None:
        lines.append("Batch 1 → 2 jumped more than the work grew: the library picks its kernel "
                     "by shape (one row can go to a matrix-vector routine), and that is not the "
                     "regime changing.")  # fmt: skip
    if grows is None and points[-1].x < 2 * knee:
        lines.append(f"The time stayed flat up to batch {points[-1].x}, below the model's "
                     f"{knee:.0f}: reading the weights is the cost so far.")  # fmt: skip
    elif grows is None:
        lines.append(f"The time stayed flat up to batch {points[-1].x}, well past the model's "
                     f"{knee:.0f}: these matmuls ran faster than the measured roof, or their "
                     "weights stayed in a cache. Measure again when the machine is quiet.")  # fmt: skip
    elif knee / 4 <= grows <= 4 * knee:
        lines.append(f"The time starts to follow the batch between {grows // 2} and {grows}, near "
                     f"the model's {knee:.0f}: from there the layer is compute-bound.")  # fmt: skip
    else:
        when = "before" if grows < knee else "after"
        lines.append(f"The time starts to follow the batch between {grows // 2} and {grows}, well "
                     f"{when} the model's {knee:.0f}: the kernels this library picks for these "
                     f"shapes run {'below' if when == 'before' else 'above'} what the ceilings "
                     "predict.")  # fmt: skip
    return "\n".join(lines)


def recorded_wide_mlp(h100: Any) -> str:
    """Chapter 03: the wide MLP on the recorded H100, where the critical batch of the model misleads."""
    from brrrlib.workloads import H100_RECORDED_S as rec

    knee = 2 * h100.ridge_point_flops_per_byte("fp32")
    t1, t2, t8 = (rec[f"wide MLP, batch {b}"] for b in (1, 2, 8))
    text = (
        f"{_H100_HEAD}, the wide MLP with 512 MiB of fp32 weights: {_fmt.seconds(t1)} at batch 1, "
        f"{_fmt.seconds(t2)} at batch 2, {_fmt.seconds(t8)} at batch 8. The model's critical "
        f"batch there is ≈ {knee:.0f} (2 × its fp32 ridge point)."
    )
    if t8 > _FLAT * t1 and 8 < knee / 2:
        text += (
            f" Yet batch 8 took {t8 / t1:.1f}x batch 1's time, far below that batch: for a few "
            "rows cuBLAS picks matrix-vector style kernels that run far below the fp32 roof. The "
            "model gives the shape of the curve; only the measurement gives the batch."
        )
    return text


def remedy(comparison: Any, name: str, predicted: float | None = None) -> str:
    """A remedy's speed-up from ``bl.compare(before, after)``: times, factor and interval, or "too noisy".

    ``predicted`` (the learner's guess of the speed-up, before / after) is set beside it.
    """
    a, b = comparison.a.median_s, comparison.b.median_s
    lo, hi = comparison.interval
    head = f"{name}: {_fmt.seconds(a)} → {_fmt.seconds(b)} per call"
    guess = "" if predicted is None else f" You predicted {predicted:g}x faster."
    if not comparison.decided:
        return f"{head}: {comparison.says()}.{guess}"
    if lo > 1 / 1.1 and hi < 1.1:
        return f"{head}: no measurable change (×{1 / hi:.2f}-×{1 / lo:.2f} faster).{guess}"
    word = "faster" if comparison.ratio < 1 else "slower"
    factor = comparison.speedup if word == "faster" else comparison.ratio
    span = (1 / hi, 1 / lo) if word == "faster" else (lo, hi)
    return f"{head}: {factor:.1f}x {word} (95% interval ×{span[0]:.2f}-×{span[1]:.2f}).{guess}"


def batching(comparison: Any, batch: int, predicted: float) -> str:
    """Chapter 04: one call at ``batch`` against one at batch 1, said per sequence, beside the guess."""
    head = f"One call at batch {batch} against one at batch 1: {comparison.says()}"
    if not comparison.decided:
        return f"{head}. You predicted {predicted:g}x per sequence; no conclusion from this run."
    lo, hi = comparison.interval
    return (f"{head}. Per sequence that is {batch / comparison.ratio:.1f}x faster (×"
            f"{batch / hi:.1f}-×{batch / lo:.1f}); you predicted {predicted:g}x.")  # fmt: skip


def compile_cost(comparison: Any, ceilings: Any) -> str:
    """Chapter 03: what a compiled call still costs, against this machine's op floor.

    A compiled chain slower than eager is not what fusion does: on a busy CPU
    the generated kernel's threads wait for a core another program holds, and
    the sentence says that instead of explaining guards.
    """
    t = comparison.b.median_s
    if comparison.decided and comparison.low > 1:
        return (
            f"The compiled call took {_fmt.seconds(t)}, longer than the 32 eager ops: not what "
            "fusion does. On a CPU the generated kernel starts its threads on every call, and "
            "when another program holds a core each call waits for it (a scheduler slice of "
            "milliseconds). Close other programs and run the cell again."
        )
    return (
        f"The compiled call still takes {_fmt.seconds(t)}, {t / ceilings.op_overhead_s:.0f} "
        f"times this machine's cheapest op ({_fmt.seconds(ceilings.op_overhead_s)}): Dynamo's "
        "guards (is x still a float32 tensor of this shape, on this device?), Inductor's "
        "generated wrapper, which is Python calling the compiled kernel, and the kernel itself. "
        "Compiling removes 31 of the 32 dispatches, not Python: the fixed cost is paid once per "
        "call instead of once per op."
    )


def cuda_graphs(graph_vs_eager: Any, reduce_overhead_vs_graph: Any, compiled_vs_eager: Any) -> str:
    """Chapter 03 on CUDA: a raw graph replay, torch.compile and reduce-overhead, measured."""
    ro = reduce_overhead_vs_graph
    lines = [
        remedy(graph_vs_eager, "CUDA graph replay"),
        f'compile "reduce-overhead" against the raw replay: {ro.says()}; plain torch.compile took '
        f"{_fmt.seconds(compiled_vs_eager.b.median_s)}.",
    ]
    if ro.decided and ro.low > 1.1:
        lines.append(
            '"reduce-overhead" cost more than the raw graph: before each replay it copies the '
            "inputs into the graph's own buffers (a multi_tensor_apply copy kernel) and checks "
            "them in Python; a raw graph reads the tensors it was captured with. On 32 tiny ops "
            "that bookkeeping is most of the time."
        )
    return "\n".join(lines)


def recorded_cuda_graphs(eager: Any, replay: Any, reduce_overhead: Any) -> str:
    """Chapter 03 without CUDA: the chain's remedies as recorded on an H100 (traces and timings)."""
    from brrrlib.workloads import H100_RECORDED_S as rec

    per_run = len(replay.device_intervals) / len(replay.runs)
    kernel_s = sum(i.duration_s for i in eager.device_intervals) / len(eager.device_intervals)
    copies = [op for op in reduce_overhead.top_ops(10) if "multi_tensor_apply" in op.name]
    eager_s, compiled_s, graph_s, ro_s = (
        _fmt.seconds(rec[f"chain, {k}"])
        for k in ("eager", "torch.compile", "CUDA graph", 'compile "reduce-overhead"')
    )
    text = (
        f"{_H100_HEAD}, bl.benchmark per call: eager {eager_s}, torch.compile "
        f'{compiled_s}, raw CUDA graph replay {graph_s}, compile "reduce-overhead" {ro_s}.'
    )
    text += (
        f"\nThe replay launches all {per_run:.0f} kernels with one call; each kernel runs for "
        f"about {_fmt.seconds(kernel_s)}, so {per_run:.0f} of them are "
        f"{_fmt.seconds(per_run * kernel_s)} of GPU work: the replay now waits on the GPU, not "
        "on Python. torch.compile fuses them into one kernel but still runs Python per call."
    )
    if copies:
        text += (
            '\n"reduce-overhead" (compile + CUDA graph) was slower than both: its trace shows a '
            "copy kernel (multi_tensor_apply) before every replay, the inputs copied into the "
            "graph's own buffers, plus Python bookkeeping around it; for 32 tiny ops that costs "
            "more than the launches it saves."
        )
    return text


def floors_table(rows: Mapping[str, tuple[Any, float]]) -> str:
    """Chapter 04: measured time beside the three floors (``bl.diagnosis.floors``) of each workload.

    ``rows`` maps a name to ``(floors, measured_s)``. A floor's share is floor
    over measured: how much of the time that resource alone explains. The
    largest names the suspect; a share above 100% means the model missed
    something (bytes served from a cache, say), and the line says so.
    """
    out = [f"{'':11}{'measured':>10}{'compute floor':>20}{'memory floor':>20}"
           f"{'overhead floor':>20}   largest"]  # fmt: skip
    above = []
    for name, (fl, measured_s) in rows.items():
        shares = fl.shares(measured_s)
        cells = "".join(f"{_fmt.seconds(s):>12} ({_fmt.percent(shares[k], 1):>4})"
                        for k, s in fl.seconds().items())  # fmt: skip
        top = max(shares, key=shares.get)
        out.append(f"{name:11}{_fmt.seconds(measured_s):>10}{cells}   {top}")
        above += [f"{name}'s {k} floor" for k, v in shares.items() if v > 1.05]
    if above:
        out.append(f"Above 100%: {', '.join(above)}. A floor cannot exceed the time, so the model "
                   "is wrong there: the bytes came from a cache, not memory.")  # fmt: skip
    return "\n".join(out)


def bounds(floors: Any, measured_s: float, precision: str = "fp32") -> str:
    """Chapter 04: the roofline's lower bound (overlap) and serial bound (no overlap) against the time.

    Compute and memory can overlap perfectly (time >= max of their floors) or
    not at all (time = their sum); the op floor adds to the serial sum when the
    host does not run ahead. The compute floor over the measured time is the
    share of peak reached, the essay's reading: "80% of peak means at least
    80% compute-bound".
    """
    c, m, o = floors.compute_s, floors.memory_s, floors.overhead_s
    lower, serial = max(c, m), c + m
    where = ("below the lower bound: the model is wrong (a cache served bytes)" if measured_s < lower
             else "between the bounds: compute and memory overlap only in part"
             if measured_s <= serial + o else
             "above even the serial bound with the op floor: the kernels run below the "
             "ceilings, or each op costs more than the cheapest one")  # fmt: skip
    return (
        f"Lower bound, max(compute, memory) = {_fmt.seconds(lower)}; serial bound, compute + "
        f"memory = {_fmt.seconds(serial)} ({_fmt.seconds(serial + o)} with the op floor). "
        f"Measured {_fmt.seconds(measured_s)}: {where}.\nIts FLOPs ran at "
        f"{_fmt.percent(c, measured_s)} of this machine's roofs ({precision} matmuls, vector "
        "for the rest): at least that share of the time the factory was the limit."
    )


def block_matmul_share(diagnosis: Any) -> str:
    """Chapter 04: the block's FLOP rate against its own roof, and against the faster roofs measured."""
    c, prec = diagnosis.ceilings, diagnosis.precision
    roof = c.matmul_peak(prec)
    faster = {k: v / roof for k, v in c.matmul_flops_per_s_by_dtype.items() if v > 1.2 * roof}
    text = (
        f"The block's FLOPs ran at {_fmt.si(diagnosis.achieved_flops_per_s, 'FLOP/s')}, "
        f"{_fmt.percent(diagnosis.achieved_flops_per_s, roof)} of this machine's {prec} matmul "
        f"roof ({_fmt.si(roof, 'FLOP/s')})."
    )
    if not faster:
        return text + f" No faster matmul precision was measured here than {prec}."
    others = ", ".join(f"{k} {r:.1f}x" for k, r in sorted(faster.items(), key=lambda kv: kv[1]))
    text += f" bl.measure_ceilings() measured faster matmuls here: {others} the {prec} roof."
    if diagnosis.achieved_flops_per_s >= 0.5 * roof:
        text += f" Close to the {prec} roof is not close to what this machine can do."
    return text


def top_ops(trace: Any, n: int = 6) -> str:
    """Chapter 04: where a trace's device time went, one short line per op (kernel names cut)."""
    from brrrlib.trace import _short as short

    rows = [f"{op.share:>5.0%} {op.calls:>4}x  {op.category:<13} {short(op.name, 48)}"
            for op in trace.top_ops(n)]  # fmt: skip
    return "\n".join(["share calls  category      op (device time, all runs)", *rows])


def precision_gain(comparison: Any, ceilings: Any, to: str = "bf16",
                   predicted: float | None = None) -> str:  # fmt: skip
    """Chapter 04: an fp32 -> ``to`` switch of the block, measured, beside the roofs' ratio.

    The matmul roof ratio is measured here (``bl.measure_ceilings``); halving
    the bytes at most doubles a memory-bound op. The block gains anything from
    less than 1x (no fast path for ``to``) to near the roof ratio (all
    matmul); far below it, what did not speed up now sets the time.
    """
    text = remedy(comparison, f"fp32 → {to}", predicted)
    by_dtype = ceilings.matmul_flops_per_s_by_dtype
    if to not in by_dtype:
        return text + f" No {to} matmul ceiling was measured here to compare with."
    roof = by_dtype[to] / ceilings.matmul_flops_per_s
    text += (f" This machine's {to} matmul roof is {roof:.1f}x its fp32 roof (measured); "
             "half the bytes per number gives a memory-bound op at most 2x.")  # fmt: skip
    if not comparison.decided:
        return text
    if comparison.low > 1:
        return text + (f" Here {to} is slower: what does not run faster in {to} (its other ops, "
                       "conversions) costs more than the matmuls save. Keep fp32 here.")  # fmt: skip
    if comparison.high >= 1:
        return text + " No measurable gain here."
    if comparison.speedup >= 0.5 * roof:
        return text + " The block gained about what its matmuls did: they were its time."
    return text + (" The block gained far less than the roof ratio: the matmuls were not all of "
                   "its time, and what did not speed up (memory-bound ops, per-op costs) now is "
                   "most of it. Where does it stand now? The next cell asks.")  # fmt: skip


def regime_shift(before: Any, after: Any) -> str:
    """Chapter 04: two diagnoses, before and after a step: did the regime move?"""
    said = (f"{before.label}: {before.regime}-bound ({before.confidence}); {after.label}: "
            f"{after.regime}-bound ({after.confidence}).")  # fmt: skip
    if before.regime == after.regime:
        return said + f" The step left it {after.regime}-bound on this machine."
    return said + (f" The step moved it from {before.regime} to {after.regime}: the next "
                   f"remedy is one for {after.regime}: {after.remedies[0]}")  # fmt: skip


def recorded_block(h100: Any, counts_bf16: Any, batch1: Any) -> str:
    """Chapter 04 without a GPU: the block's precision steps as recorded on an H100.

    ``h100``: the recorded H100 ceilings (``bl.classroom.recorded_reports()``);
    ``counts_bf16``: ``bl.count`` of the bf16 block at the GPU size;
    ``batch1``: the recorded trace of the fp32 block at batch 1.
    """
    from brrrlib.diagnosis import floors
    from brrrlib.workloads import H100_RECORDED_S as rec

    b1, fp32, bf16 = (rec[f"block {k}"] for k in ("fp32, batch 1", "fp32, batch 16",
                                                  "bf16, batch 16"))  # fmt: skip
    roofs = h100.matmul_flops_per_s_by_dtype
    fl = floors(counts_bf16, h100)
    overhead = _busy(batch1) < _IDLE and bf16 < 2 * b1  # idle at batch 1, as fast at batch 16
    verdict = ("The batch-size test says overhead: the regime moved from compute to overhead."
               if overhead else "")  # fmt: skip
    return (
        f"{_H100_HEAD}, the same block at the GPU size (d_model 1024, 256 tokens):\n"
        f"  fp32, batch 1:  {_fmt.seconds(b1)}, the device busy {_fmt.percent(_busy(batch1), 1)}"
        " of the time (recorded trace): overhead-bound;\n"
        f"  fp32, batch 16: {_fmt.seconds(fp32)}, {_fmt.percent(counts_bf16.flops / fp32, roofs['fp32'])}"
        f" of the fp32 matmul roof ({_fmt.si(roofs['fp32'], 'FLOP/s')}): compute-bound;\n"
        f"  bf16, batch 16: {_fmt.seconds(bf16)}: {fp32 / bf16:.1f}x faster, though the bf16 roof "
        f"is {roofs['bf16'] / roofs['fp32']:.0f}x the fp32 one.\n"
        f"In bf16 its floors are compute {_fmt.seconds(fl.compute_s)}, memory "
        f"{_fmt.seconds(fl.memory_s)}, ops {_fmt.seconds(fl.overhead_s)}: the matmuls are no "
        f"longer the time. And {_fmt.seconds(bf16)} for 16 sequences is close to the "
        f"{_fmt.seconds(b1)} of one sequence at batch 1. {verdict}"
    ).rstrip()


def recorded_tf32(h100: Any) -> str:
    """Chapter 04 without CUDA: TF32 against fp32 and bf16 on the recorded H100."""
    r = h100.matmul_flops_per_s_by_dtype
    return (
        f"No TF32 on a CPU: set_float32_matmul_precision('high') changes nothing here. "
        f"{_H100_HEAD}, large matmuls (bl.classroom.recorded_reports()): fp32 "
        f"{_fmt.si(r['fp32'], 'FLOP/s')}, TF32 {_fmt.si(r['tf32'], 'FLOP/s')} "
        f"({r['tf32'] / r['fp32']:.1f}x), bf16 {_fmt.si(r['bf16'], 'FLOP/s')} "
        f"({r['bf16'] / r['fp32']:.1f}x). TF32 keeps fp32 tensors and rounds each matmul's inputs "
        "to 10 mantissa bits on the tensor cores: one line of code for a compute-bound fp32 model."
    )


def steps_summary(steps: Mapping[str, tuple[Any, float, int]],
                  diagnoses: Mapping[str, Any]) -> str:  # fmt: skip
    """Chapter 04: what this run measured at each step: time per sequence, and the regime where diagnosed."""
    lines = ["What this run measured (time per sequence; regime where bl.diagnose ran):"]
    for label, (_counts, seconds, batch) in steps.items():
        d = diagnoses.get(label)
        regime = f"  {d.regime}-bound ({d.confidence})" if d is not None else ""
        lines.append(f"  {label:<28}{_fmt.seconds(seconds / batch):>10}{regime}")
    return "\n".join(lines)
