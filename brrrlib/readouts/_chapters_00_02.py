"""The sentences chapters 00 to 02 print, from the numbers just measured (``bl.readouts``).

Each function takes measured results (``Ceilings``, ``Comparison``, ``Counts``,
a ``Sweep``, ``RooflinePoint`` s) and returns the text a cell prints, on a
laptop CPU and on an H100 alike: a conclusion only where the numbers support
it ("too noisy to tell" when a comparison's interval is wide). Re-exported by
:mod:`brrrlib.readouts`; tests in ``tests/test_readouts_00_02.py`` run each
with a CPU's ceilings and the H100's recorded ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brrrlib import _fmt

__all__ = [
    "CLOSE_TO_ROOF", "COMPUTE_BOUND_VS_COPY", "FAR_BELOW_ROOF", "MODEL_FACTOR", "SAME_COST",
    "achieved_bandwidth", "bigger_job", "checkpointing", "element_budget", "flops_gap",
    "fresh_outputs", "fusion", "gelu_vs_relu", "generations", "knee", "matmul_share",
    "matmul_sweep", "memory_bound", "nearest_spec", "precision_shift", "precision_speedup",
    "recorded_knees", "recorded_ladder", "ridge_points", "roofline_points", "units",
]  # fmt: skip

#: A point at or above this share of its roof is "close to the roof".
CLOSE_TO_ROOF = 0.7
#: Below this share of its roof a point is "far below" it: the roof is not what limits it.
FAR_BELOW_ROOF = 0.25
#: A measurement within this factor of its model "follows the model".
MODEL_FACTOR = 2.0
#: Two costs whose ratio stays under this are "about the same".
SAME_COST = 1.3
#: An op taking this many times a copy of the same bytes waits on its arithmetic, not memory.
COMPUTE_BOUND_VS_COPY = 1.5
_PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def _times(x: float) -> str:
    """A ratio as a learner reads it: "0.013x", "1.30x", "16x", "3,096x"."""
    if x >= 99.5:
        return f"{x:,.0f}x"
    return f"{x:.0f}x" if x >= 9.95 else f"{x:.2f}x" if x >= 0.1 else f"{x:.2g}x"


def _pct(share: float) -> str:
    """A share as a percentage that never rounds a real number to "0.0%": "95%", "0.4%", "0.002%"."""
    x = 100 * share
    return f"{x:.0f}%" if x >= 9.95 else f"{x:.1f}%" if x >= 0.1 else f"{x:.1g}%"


def _peaks(c: Any) -> dict[str, float]:
    """Measured matmul FLOP/s per precision, in table order."""
    have = dict(c.matmul_flops_per_s_by_dtype)
    return {p: have[p] for p in _PRECISIONS if have.get(p)}


def _fastest(c: Any) -> tuple[str, float]:
    peaks = _peaks(c)
    best = max(peaks, key=peaks.get)
    return best, peaks[best]


def _roof_method(c: Any, precision: str = "fp32") -> str:
    """How the ceiling measured ``precision``'s roof ("n=256: torch.mm 189 GFLOP/s, oneDNN ..."), or ""."""
    for part in str(getattr(c, "matmul_method", "") or "").split(";"):
        head, _, rest = part.strip().partition(" ")
        if head == precision and rest:
            return rest
    return ""


# -- chapter 00


def nearest_spec(c: Any) -> str:
    """Chapter 00: this machine's measured fp32 matmul and bandwidth beside the nearest spec sheet.

    A GPU listed in the table is compared with its own sheet (measured / promised);
    anything else with the row closest in both numbers (a laptop CPU: usually a T4).
    """
    from brrrlib.hardware import spec_for_device_name

    near = c.nearest_spec()
    flops, bw = near.peak("fp32"), near.mem_bandwidth_bytes_per_s
    if c.device == "cuda" and spec_for_device_name(c.device_name) == near:
        return (
            f"This machine is in the table: {near.name}. Measured here: "
            f"{_fmt.percent(c.matmul_flops_per_s, flops)} of its sheet's fp32 peak "
            f"({_fmt.si(c.matmul_flops_per_s, 'FLOP/s')} of {_fmt.si(flops, 'FLOP/s')}) and "
            f"{_fmt.percent(c.mem_bandwidth_bytes_per_s, bw)} of its bandwidth "
            f"({_fmt.si(c.mem_bandwidth_bytes_per_s, 'B/s')} of {_fmt.si(bw, 'B/s')}). "
            "A sheet gives the best case; a measurement comes in below it."
        )
    return (
        f"Closest spec-sheet row to this machine: {near.name}, with "
        f"{_times(flops / c.matmul_flops_per_s)} the fp32 FLOP/s measured here and "
        f"{_times(bw / c.mem_bandwidth_bytes_per_s)} the bandwidth."
    )


def bigger_job(cmp: Any, n_small: int, n_big: int, c: Any, prediction: float) -> str:
    """Chapter 00: ``x.add_(1)`` on ``n_big`` against ``n_small`` elements, beside the model.

    ``cmp`` is ``bl.compare(small call, big call)``. The model: one op's
    overhead plus 8 bytes per element (4 read, 4 written) at the copy bandwidth.
    """
    ovh, bw = c.op_overhead_s, c.mem_bandwidth_bytes_per_s
    small_model, big_model = ovh + 8 * n_small / bw, ovh + 8 * n_big / bw
    model = big_model / small_model
    lines = [f"size ratio {_times(n_big / n_small)}, your prediction {_times(prediction)}, "
             f"model (overhead + bytes / bandwidth) {_times(model)}"]  # fmt: skip
    if not cmp.decided:
        return "\n".join([*lines, f"measured: {cmp.says()}"])
    m, (lo, hi) = cmp.ratio, cmp.interval
    small_s, big_s = cmp.a.median_s, cmp.b.median_s
    lines += [
        f"measured {_times(m)} (95% interval {_times(lo)}-{_times(hi)}): "
        f"{n_small} elements took {_fmt.seconds(small_s)} (model {_fmt.seconds(small_model)}, "
        f"one op's overhead); {_fmt.elements(n_big)} elements took {_fmt.seconds(big_s)} "
        f"(model {_fmt.seconds(big_model)}), moving {_fmt.si(8 * n_big / big_s, 'B/s')}."
    ]
    if 1 / MODEL_FACTOR <= m / model <= MODEL_FACTOR:
        lines.append("The model holds within 2x: the small call is all overhead, the big one "
                     "all bytes, and the time grew far less than the size.")  # fmt: skip
    elif big_s > MODEL_FACTOR * big_model:
        lines.append(f"The big call moved its bytes at {_fmt.percent(8 * n_big / big_s, bw)} "
                     "of the copy ceiling: slower than the model, so the ratio is above it. "
                     "Another program using the memory or the cores slows a long call more than "
                     "a short one: close it and run the cell again.")  # fmt: skip
    else:
        lines.append(f"The small call cost {_times(small_s / ovh)} the in-place floor of "
                     f"{_fmt.seconds(ovh)}, so the ratio is {_times(m / model)} the model's.")  # fmt: skip
    return "\n".join(lines)


def ridge_points(c: Any, spec: Any, prediction: float | None = None) -> str:
    """Chapter 00: ridge points per precision, a spec-sheet device's and this machine's.

    The faster a precision's matmul, the higher its ridge: the more FLOPs an
    op must do per byte before memory stops setting its pace. ``prediction``
    is the learner's guess of this machine's fastest ridge (FLOP/byte).
    """
    bw = c.mem_bandwidth_bytes_per_s
    mine = {p: f / bw for p, f in _peaks(c).items()}
    theirs = {p: f / spec.mem_bandwidth_bytes_per_s for p, f in spec.peak_flops_per_s.items()}
    cols = [p for p in _PRECISIONS if p in mine or p in theirs]
    lines = [f"{'ridge point (FLOP/byte)':<34}" + "".join(p.rjust(7) for p in cols)]
    for name, row in ((f"{spec.name} (spec sheet)", theirs), ("this machine (measured)", mine)):
        lines.append(f"{name:<34}" + "".join(f"{row[p]:.3g}".rjust(7) if p in row else
                                             "-".rjust(7) for p in cols))  # fmt: skip
    best, best_flops = _fastest(c)
    if best != "fp32" and best_flops > SAME_COST * c.matmul_flops_per_s:
        lines.append(f"Here the fastest matmul is {best} ({_times(best_flops / c.matmul_flops_per_s)} "
                     f"fp32): its ridge is {mine[best]:.3g} FLOP/byte against {mine['fp32']:.3g}. "
                     "The faster the math, the more FLOPs per byte an op needs to keep up.")  # fmt: skip
    else:
        lines.append("No precision runs faster than fp32 here, so fp32's ridge is this machine's.")
    slow = [p for p, f in _peaks(c).items() if f < 0.5 * c.matmul_flops_per_s]
    if slow:
        lines.append(f"{', '.join(slow)} runs far slower than fp32 here: no fast path for it on "
                     "this device.")  # fmt: skip
    top = max(theirs.values())
    words = ("is more memory-bound than this machine" if top > SAME_COST * mine[best]
             else "is less memory-bound than this machine" if mine[best] > SAME_COST * top
             else "is about as memory-bound as this machine")  # fmt: skip
    if prediction is not None:
        lines.append(f"You predicted {prediction:.3g} FLOP/byte for this machine's fastest matmul; "
                     f"measured: {mine[best]:.3g} ({best}).")  # fmt: skip
    lines.append(f"With its fastest units the {spec.name} needs {top:.3g} FLOP/byte, "
                 f"{_times(top / mine[best])} this machine's {mine[best]:.3g}: it {words}.")  # fmt: skip
    return "\n".join(lines)


def roofline_points(
    points: Sequence[Any], c: Any, *, beside: Sequence[Any] = (), prediction: str = ""
) -> str:
    """Chapter 00: each point's share of the roof above it, the regime that suggests, the spec roofs.

    ``points`` are ``bl.roofline.RooflinePoint`` measured on this machine;
    ``prediction`` is the label the learner expected farthest below its roof.
    """
    from brrrlib.roofline import attainable_flops_per_s

    lines, shares = [], {}
    for p in points:
        peak = c.matmul_peak(p.precision)
        i, ridge = p.intensity_flops_per_byte, peak / c.mem_bandwidth_bytes_per_s
        share = p.achieved_flops_per_s / attainable_flops_per_s(
            i, peak, c.mem_bandwidth_bytes_per_s
        )
        shares[p.label] = share
        side = "left of the ridge" if i < ridge else "right of the ridge"
        if share >= CLOSE_TO_ROOF:
            regime = "memory" if i < ridge else "compute"
            words = f"close to its roof, {side}: {regime}-bound"
        elif i >= ridge and share < FAR_BELOW_ROOF:
            words = f"far below its roof, {side}: too little work per call to keep every unit busy"
        elif i >= ridge:
            method = _roof_method(c, p.precision)
            words = f"below its roof, {side}: slower than the kernel that set the roof" + (
                f" ({method})" if method else ""
            )
        elif share >= FAR_BELOW_ROOF:
            words = f"below its roof, {side}: it moved its bytes slower than a copy does"
        else:
            words = f"far below its roof, {side}: neither factory nor trucks are busy (overhead)"
        lines.append(f"{p.label}: {i:.3g} FLOP/byte, {_fmt.si(p.achieved_flops_per_s, 'FLOP/s')}"
                     f" = {_pct(share)} of the roof above it, {words}")  # fmt: skip
    lowest = min(shares, key=shares.get)
    guess = f"; you predicted {prediction}" if prediction else ""
    lines.append(f"Farthest below its roof: {lowest}{guess}.")
    for s in beside:
        r = s.peak("fp32") / c.matmul_flops_per_s
        where = "above" if r > 1 else "below"
        lines.append(f"The {s.name}'s fp32 roof is {_times(r)} this machine's: drawn {where} it.")
    return "\n".join(lines)


def generations(specs: Sequence[Any], dtype: str = "fp16") -> str:
    """Chapter 00: each GPU's ``dtype`` FLOP/s and bandwidth relative to the first, and its ridge."""
    first = specs[0]
    f0, b0 = first.peak_flops_per_s[dtype], first.mem_bandwidth_bytes_per_s
    lines = [f"relative to the {first.name} ({dtype} peaks; ridge in FLOP/byte):"]
    for s in specs:
        f, b = s.peak_flops_per_s[dtype], s.mem_bandwidth_bytes_per_s
        lines.append(f"  {s.name:<16} FLOP/s {_times(f / f0):>5}  bandwidth {_times(b / b0):>5}"
                     f"  ridge {f / b:.0f}")  # fmt: skip
    return "\n".join(lines)


# -- chapter 01


def _path_words(c: Any, precision: str) -> str:
    """What a precision's matmul runs on here, judged by its measured speed against fp32."""
    r = _peaks(c)[precision] / c.matmul_flops_per_s
    if r >= 2:
        units = "tensor cores" if c.device == "cuda" else "a fast path of this CPU's for it"
        return f"{_times(r)} fp32: {units}"
    return f"{_times(r)} fp32: no fast path here" if r < 0.5 else f"{_times(r)} fp32"


def units(c: Any, spec: Any) -> str:
    """Chapter 01: matmul units against the rest, on a spec sheet (essay) and measured here.

    The vector ceiling counts chained multiplies (1 FLOP each); a matmul's
    inner loop runs fused multiply-adds (2 FLOPs), so about 2x of the gap
    is the FMA alone, on any device.
    """
    tc, fp32 = spec.peak("bf16"), spec.peak("fp32")
    lines = [f"{spec.name}: bf16 tensor cores {_fmt.si(tc, 'FLOP/s')}, fp32 without them "
             f"{_fmt.si(fp32, 'FLOP/s')}: {_times(tc / fp32)} (spec sheet)",
             f"this machine ({c.device_name}), measured:",
             f"  vector, chained multiplies: {_fmt.si(c.vector_flops_per_s, 'FLOP/s')}"]  # fmt: skip
    for p, f in _peaks(c).items():
        extra = "" if p == "fp32" else f" ({_path_words(c, p)})"
        lines.append(f"  {p} matmul: {_fmt.si(f, 'FLOP/s')} = {_times(f / c.vector_flops_per_s)}"
                     f" the vector rate{extra}")  # fmt: skip
    if getattr(c, "matmul_method", ""):
        lines.append(f"  (each matmul roof is the fastest kernel timed: {c.matmul_method})")
    return "\n".join(lines)


def precision_speedup(cmp: Any, n: int, prediction: float, c: Any, precision: str = "bf16") -> str:
    """Chapter 01: an n x n matmul in ``precision`` against fp32 (``cmp = bl.compare(fp32, other)``)."""
    head = (
        f"{n} x {n} matmul, {precision} against fp32 (you predicted {_times(prediction)} faster): "
    )
    if not cmp.decided:
        return head + cmp.says()
    lo, hi = cmp.interval
    said = f"{_times(cmp.speedup)} faster (95% interval {_times(1 / hi)}-{_times(1 / lo)})"
    if cmp.speedup >= 2:
        units = (
            "tensor cores" if c.device == "cuda" else f"a fast path of this CPU's for {precision}"
        )
    elif cmp.speedup < 0.5:
        units = f"no fast path for {precision} here: it is converted and computed slowly"
    else:
        units = "about fp32's speed: no faster units for it here"
    return f"{head}{said}: {units}."


def recorded_ladder(rec: Any, c: Any) -> str:
    """Chapter 01: the recorded GPU's best matmul per precision, beside this machine's, measured now.

    ``rec`` is :func:`brrrlib.figures.recorded_sweeps`; also says at which
    size each recorded precision first reaches half its best rate.
    """
    fp32 = rec.best_flops_per_s("fp32")
    parts = []
    for p in rec.precisions:
        best = rec.best_flops_per_s(p)
        half = next(n for n, f in rec.matmul_line(p) if f >= best / 2)
        ratio = "" if p == "fp32" else f", {_times(best / fp32)} fp32"
        parts.append(f"  {p}: best {_fmt.si(best, 'FLOP/s')}{ratio}; half of that from n = {half}")
    here = ", ".join(f"{p} {_fmt.si(f, 'FLOP/s')}" for p, f in _peaks(c).items())
    return "\n".join([f"{rec.label} (recorded):", *parts,
                      f"this machine ({c.device_name}), measured now: {here}"])  # fmt: skip


def matmul_sweep(
    sizes: Sequence[int], fractions: Sequence[float], prediction: float, c: Any, n: int = 64
) -> str:
    """Chapter 01: the share of the fp32 roof square matmuls reached, against the guess at ``n``.

    ``fractions`` are achieved FLOP/s over ``c.matmul_flops_per_s``, one per
    size. When even the largest stay well below the roof, says how the roof
    was measured: on some CPUs the fastest kernel is not the one torch.mm calls.
    """
    shares = dict(zip(sizes, fractions, strict=True))
    got = _pct(shares[n]) if n in shares else "not in this sweep"
    best = max(shares, key=shares.get)
    lines = [f"n = {n}: you predicted {_pct(prediction)} of the peak, measured {got}.",
             f"best: n = {best}, {_pct(shares[best])} of the peak."]  # fmt: skip
    if shares[best] < CLOSE_TO_ROOF:
        method = _roof_method(c)
        how = f" ({method})" if method else ""
        lines.append("Even the largest stay well below the roof: it is the fastest fp32 matmul "
                     f"measured on this machine{how}, and torch.mm does not reach it here.")  # fmt: skip
    return "\n".join(lines)


def matmul_share(
    breakdown: Any, c: Any, prediction: float, *, precision: str = "fp32", d_model: int = 0
) -> str:
    """Chapter 01: the matmuls' share of FLOPs and time in a block, and why it is not the essay's 61%."""
    cats = breakdown.by_category()
    lines = [f"{k:>13}: {_pct(v['flops_fraction'])} of the FLOPs, "
             f"{_pct(v['time_fraction'])} of the time"
             for k, v in cats.items() if v["calls"]]  # fmt: skip
    lines.append(f"you predicted {_pct(prediction)} for the matmuls; the essay's "
                 "BERT: 61% (on tensor cores)")  # fmt: skip
    best, best_flops = _fastest(c)
    r = best_flops / c.matmul_peak(precision)
    if r >= 2:
        lines.append(f"This block ran in {precision}: its matmuls did not use the {best} path, "
                     f"{_times(r)} faster here. Tensor cores shrink the matmuls' time and so "
                     "their share; the run in bf16 below checks that.")  # fmt: skip
    else:
        lines.append(f"This block ran in {precision}, as fast as matmuls go here: no faster "
                     "units to shrink their share.")  # fmt: skip
    if d_model:
        lines.append(f"d_model = {d_model}: a matmul's FLOPs per token grow with d_model², the "
                     "pointwise bytes with d_model, so a narrower block gives cheap ops a bigger share.")  # fmt: skip
    return "\n".join(lines)


def flops_gap(breakdown: Any, c: Any, precision: str = "fp32") -> str:
    """Chapter 01: the FLOP/s each op class reached, against the roof memory sets for it.

    An op at intensity I FLOP/byte reaches at most ``I x bandwidth``: the
    ridge point divided by I below the matmul peak. A class close to that
    roof is waiting on memory, however far below the matmuls it sits. The
    essay's BERT shows ~250x (normalization) and ~700x (pointwise) where
    slower units alone would give 16x.
    """
    cats = breakdown.by_category()
    mm = cats["matmul"]
    if not (mm["flops"] and mm.get("time_s")):
        return "No matmul time was measured, so there is no gap to read."
    mm_rate, peak = mm["flops"] / mm["time_s"], c.matmul_peak(precision)
    bw = c.mem_bandwidth_bytes_per_s
    lines = [f"matmul: {_fmt.si(mm_rate, 'FLOP/s')}, {_pct(mm_rate / peak)} of the {precision} "
             f"peak; slower units alone would put the rest {_times(peak / c.vector_flops_per_s)} "
             "below it (matmul peak / vector rate)"]  # fmt: skip
    far_below = []
    for name in ("normalization", "pointwise"):
        v = cats.get(name, {})
        if v.get("flops") and v.get("time_s") and v.get("bytes_moved"):
            rate, i = v["flops"] / v["time_s"], v["flops"] / v["bytes_moved"]
            lines.append(f"{name}: {_fmt.si(rate, 'FLOP/s')}, {_times(mm_rate / rate)} below the "
                         f"matmuls; at {i:.2g} FLOP/byte memory allows it {_fmt.si(i * bw, 'FLOP/s')}"
                         f" ({_times(peak / (i * bw))} below the peak), and it reached "
                         f"{_pct(rate / (i * bw))} of that")  # fmt: skip
            if rate < FAR_BELOW_ROOF * i * bw:
                far_below.append(name)
    lines.append(f"The ridge here is {peak / bw:.3g} FLOP/byte ({precision}): the higher a "
                 "machine's ridge, the wider this gap. Ops far left of it wait on memory, not on "
                 "slower units.")  # fmt: skip
    if far_below:
        lines.append(f"{' and '.join(far_below)} stayed far below even the memory roof: "
                     "something besides bytes costs time there (each small op's overhead, or "
                     "another program on the cores).")  # fmt: skip
    return "\n".join(lines)


def precision_shift(fp32: Any, bf16: Any, cmp: Any, prediction: str) -> str:
    """Chapter 01: the matmuls' share in fp32 and in bf16, and the whole block's speed-up.

    ``cmp`` is ``bl.compare(fp32 block, bf16 block)``; ``prediction`` is
    "rise" or "fall" (the matmuls' share in bf16).
    """
    s32 = fp32.by_category()["matmul"]["time_fraction"]
    s16 = bf16.by_category()["matmul"]["time_fraction"]
    moved = "fell" if s16 < s32 / 1.1 else "rose" if s16 > s32 * 1.1 else "barely moved"
    lines = [f"matmuls' share of the time: fp32 {_pct(s32)}, bf16 "
             f"{_pct(s16)}: it {moved} (you predicted it would {prediction})."]  # fmt: skip
    said = cmp.says() if not cmp.decided else f"{_times(cmp.speedup)} faster"
    lines.append(f"The whole block in bf16: {said}.")
    if moved == "fell":
        lines.append("bf16 sped the matmuls up more than the rest: faster matmul units help "
                     "matmuls only; the memory-bound ops gain at most what half the bytes give.")  # fmt: skip
    return "\n".join(lines)


# -- chapter 02


def element_budget(c: Any, spec: Any) -> str:
    """Chapter 02: how many operations per element fit in the time its 8 bytes move.

    Spec sheets count a fused multiply-add as 2 FLOPs; the measured vector
    ceiling counts plain multiplies, so both are given in multiplies too.
    """
    bw, peak = spec.mem_bandwidth_bytes_per_s, spec.peak("fp32")
    theirs, mine = peak * 8 / bw, c.vector_flops_per_s * 8 / c.mem_bandwidth_bytes_per_s
    cmp = ("more" if mine > SAME_COST * theirs / 2 else
           "fewer" if theirs / 2 > SAME_COST * mine else "about as many")  # fmt: skip
    return (
        f"{spec.name}: {_fmt.si(bw, 'B/s')} moves {_fmt.si(bw / 8)} elements/s in and out; "
        f"{_fmt.si(peak, 'FLOP/s')} fp32 gives {theirs:.0f} FLOPs per element (FMA = 2), "
        f"{theirs / 2:.0f} plain multiplies\n"
        f"this machine: vector {_fmt.si(c.vector_flops_per_s, 'FLOP/s')} (plain multiplies), "
        f"bandwidth {_fmt.si(c.mem_bandwidth_bytes_per_s, 'B/s')}: {mine:.0f} multiplies per element, "
        f"{cmp} than the {spec.name}"
    )


def achieved_bandwidth(timings: Mapping[str, Any], bytes_moved: int, c: Any) -> str:
    """Chapter 02: time, bytes per second and share of the bandwidth ceiling of each timed pass."""
    return "\n".join(
        f"{label:<32} {_fmt.seconds(t.median_s):>9}  {_fmt.si(bytes_moved / t.median_s, 'B/s'):>10}"
        f" = {_fmt.percent(bytes_moved / t.median_s, c.mem_bandwidth_bytes_per_s)} of the ceiling"
        for label, t in timings.items()
    )


def knee(prediction: float, c: Any, sweep: Any) -> str:
    """Chapter 02: the fused line's knee, guessed, predicted from the ceilings, and measured.

    ``sweep`` is ``bl.widgets.repeat_sweep(...)``. Where the measured knee
    leaves the model's, the fused points say why: passes that stream slower
    than the copy raise the flat part (knee moves right); multiplies slower
    than the vector ceiling steepen the rise (knee moves left).
    """
    from brrrlib.widgets._experiments import measured_knee_repeat, predicted_knee_repeat

    model = predicted_knee_repeat(c)
    lines = [f"knee of the fused line: you predicted repeat {prediction:g}; the model "
             f"(vector {_fmt.si(c.vector_flops_per_s, 'FLOP/s')} x 8 bytes / "
             f"{_fmt.si(c.mem_bandwidth_bytes_per_s, 'B/s')}) puts it at {model:.0f}"]  # fmt: skip
    measured = measured_knee_repeat(sweep)
    fused = [p for p in sweep.line("fused") if p.measured]
    if measured is None or not fused:
        top = fused[-1].x if fused else 0
        return "\n".join([*lines, f"measured: not reached (the fused line is still flat at "
                          f"repeat {top}): the multiplies are still free there"])  # fmt: skip
    lines.append(f"measured: about {measured:.0f}, {_times(measured / model)} the model's")
    if any(p.waited for p in fused):
        lines.append("(the fused points waited for cores another program holds: not this "
                     "machine's best; close other programs and run the cell again)")  # fmt: skip
    first, last = fused[0], fused[-1]
    if first.predicted_s and first.median_s > SAME_COST * first.predicted_s:
        lines.append(f"one fused pass took {_times(first.median_s / first.predicted_s)} its "
                     "model: slower streaming raises the flat part and moves the knee right")  # fmt: skip
    if last.achieved_flops_per_s * SAME_COST < c.vector_flops_per_s:
        lines.append(f"the long chain multiplied at {_fmt.si(last.achieved_flops_per_s, 'FLOP/s')}, "
                     "below the vector ceiling: a steeper rise moves the knee left")  # fmt: skip
    return "\n".join(lines)


def _recorded_knee(line: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(flat seconds, knee) of a recorded fused line, by the rule of ``measured_knee_repeat``."""
    fastest = min(s for _r, s in line)
    flat = _fmt.median([s for _r, s in line if s <= 1.15 * fastest])
    r, s = line[-1]
    return flat, flat / (s / r)


def recorded_knees(rec: Any) -> str:
    """Chapter 02: the recorded GPU's fused repeat lines: flat part and knee, fp32 against bf16."""
    (f32, k32), (f16, k16) = (_recorded_knee(rec.repeat_line(p, "fused")) for p in ("fp32", "bf16"))
    eager = dict(rec.repeat_line("fp32", "eager"))
    growth = (
        f"eager fp32 at repeat 16: {_times(eager[16] / eager[1])} repeat 1; " if 16 in eager else ""
    )
    return (
        f"{rec.label} (recorded): {growth}fused fp32 flat at {_fmt.seconds(f32)}, knee near "
        f"repeat {k32:.0f}; fused bf16 flat at {_fmt.seconds(f16)} ({_times(f16 / f32)} fp32: "
        f"half the bytes), knee near {k16:.0f}. Same multiplies, half the bytes per element: "
        "the knee comes at about half the repeat count."
    )


def fresh_outputs(cmp: Any) -> str:
    """Chapter 02: a fresh output per call against one that exists (``bl.compare(kept, fresh)``)."""
    if not cmp.decided:
        return f"fresh output against an existing one: {cmp.says()}"
    head = (f"x * 2 into a fresh output: {_fmt.seconds(cmp.b.median_s)}, into an existing one: "
            f"{_fmt.seconds(cmp.a.median_s)}; {cmp.says()}.")  # fmt: skip
    if cmp.ratio >= SAME_COST:
        return head + (
            "\nA fresh buffer this large comes from the operating system, which maps it page by "
            "page (a page fault per 4 KiB page) the first time it is written: that costs more "
            "than moving the data. Here in-place ops and out= pay off."
        )
    return head + (
        "\nThe allocator handed back memory it already held (PyTorch's caching allocator on a "
        "GPU): here a fresh output costs next to nothing."
    )


def memory_bound(cmp: Any, name: str = "cos") -> str:
    """Chapter 02: an op against a copy of the same bytes (``bl.compare(copy, op)``): which limits it?"""
    if not cmp.decided:
        return f"{name} against a copy of the same bytes: {cmp.says()}"
    verdict = ("memory-bound here: the trucks set its pace" if cmp.ratio < COMPUTE_BOUND_VS_COPY
               else "compute-bound here: its arithmetic takes longer than moving its bytes")  # fmt: skip
    return f"{name} takes {cmp.says()} of a copy moving the same bytes: {verdict}."


def fusion(cmp: Any, predicted: float, memory_check: Any, fused_bytes: int, c: Any) -> str:
    """Chapter 02: fused against eager (``bl.compare(eager, fused)``) beside the bytes' prediction."""
    if not cmp.decided:
        return f"fused against eager: {cmp.says()}"
    lo, hi = cmp.interval
    got = cmp.speedup
    line = (f"fused is {_times(got)} faster than eager (95% interval {_times(1 / hi)}-"
            f"{_times(1 / lo)}); the bytes predict {_times(predicted)} if memory-bound.")  # fmt: skip
    if memory_check.decided and memory_check.ratio >= COMPUTE_BOUND_VS_COPY:
        return line + ("\nThe op is compute-bound here: fusion removes the round trip through "
                       "memory, not the arithmetic, so the bytes' prediction does not apply.")  # fmt: skip
    if got > SAME_COST * predicted:
        return line + ("\nMore than the bytes predict: besides the bytes, something else shrank "
                       "(the generated code, or eager's extra fresh output).")  # fmt: skip
    if got * SAME_COST < predicted:
        rate = fused_bytes / cmp.b.median_s
        return line + (f"\nLess than the bytes predict: the fused kernel streamed "
                       f"{_fmt.si(rate, 'B/s')}, {_fmt.percent(rate, c.mem_bandwidth_bytes_per_s)} "
                       "of the copy ceiling.")  # fmt: skip
    return line + "\nAs predicted: memory-bound, half the bytes, half the time."


def gelu_vs_relu(cmp: Any, c: Any, prediction: str) -> str:
    """Chapter 02: gelu against relu, both into an existing output (``bl.compare(relu, gelu)``)."""
    budget = c.vector_flops_per_s * 8 / c.mem_bandwidth_bytes_per_s
    head = f"gelu against relu (you predicted: {prediction}): "
    if not cmp.decided:
        return head + cmp.says()
    if cmp.ratio < SAME_COST:
        return head + (f"{cmp.says()}: the same cost. Both wait on memory; gelu's extra "
                       f"arithmetic fits in the {budget:.0f} multiplies per element this machine "
                       "does while an element moves.")  # fmt: skip
    return head + (f"{cmp.says()}: gelu costs more here. Its erf needs more arithmetic per "
                   f"element than the {budget:.0f} multiplies this machine does while an element "
                   "moves: compute-bound.")  # fmt: skip


def checkpointing(
    saved_bytes: tuple[int, int], numel: int, counts: tuple[Any, Any], cmp: Any, prediction: float
) -> str:
    """Chapter 02: what activation checkpointing saved (memory) and cost (bytes moved, time).

    ``saved_bytes`` and ``counts`` are (plain, checkpointed): the bytes autograd
    kept for the backward pass, and ``bl.count`` of forward + backward;
    ``cmp`` is ``bl.compare(plain step, checkpointed step)``.
    """
    (plain, ckpt), (cp, cc) = saved_bytes, counts
    lines = [
        f"kept for the backward pass: {plain / numel:.0f} bytes per element without "
        f"checkpointing, {ckpt / numel:.0f} with it ({_fmt.percent(plain - ckpt, plain)} less memory)",
        f"moved by forward + backward: {cp.bytes_moved / numel:.0f} bytes per element in {cp.ops} "
        f"ops without, {cc.bytes_moved / numel:.0f} in {cc.ops} ops with (the recomputed forward)",
    ]  # fmt: skip
    if not cmp.decided:
        return "\n".join([*lines, f"time: {cmp.says()}"])
    lines.append(f"time: the checkpointed step takes {cmp.says()} (you predicted "
                 f"{_times(prediction)}).")  # fmt: skip
    if cmp.above(1.0):
        lines.append("Memory saved, time spent: worth it when memory, not time, runs out "
                     "(a bigger batch, a longer sequence).")  # fmt: skip
    return "\n".join(lines)
