"""Which regime is *my* code in, and what do I do about it? (chapter 04)

``bl.diagnose(fn, *args)`` measures ``fn(*args)`` on this machine and names its
regime, compute, memory bandwidth or overhead, with the evidence for the verdict
and the remedies the essay gives for it. The method is the decision procedure of
the course, run by three probes:

(a) **Roofline.** ``bl.count`` gives the FLOPs, bytes and op calls of one call;
    ``bl.benchmark`` its time; ``bl.measure_ceilings`` this machine's ceilings.
    Each regime has a model of the least time the call could take:

    * compute: matmul FLOPs / matmul FLOP/s + other FLOPs / vector FLOP/s
      (elementwise work cannot use the matmul units);
    * memory: bytes moved / memory bandwidth;
    * overhead: op calls x the cost of one tiny op (``op_overhead_s``).

    Each model's time over the measured time is the share of the time that
    regime *explains*. A large matmul at 70% of the matmul peak: compute
    explains 0.7. A loop of 200 tiny adds that each cost what a tiny op costs:
    overhead explains ~1. The regime is the one that explains the most.

(b) **Batch scaling.** Double the leading dimension of every tensor argument
    and time again. If the work is compute or memory, the time follows the
    FLOPs or the bytes; if it is overhead, it stays flat. But flat time alone
    misleads (the essay's caveat): ``x @ W`` with ``x`` of shape ``[1, D]``
    and ``W`` of ``[D, D]`` barely slows when the batch doubles because its
    bytes are W's, which do not grow. So the probe compares the time's growth
    with the growth of FLOPs, bytes and op count (counted on the doubled input
    too) and says which one it follows.

(c) **Device busy.** ``bl.profile`` gives the fraction of the wall time the
    device lane was busy. On a GPU the rest is the device waiting for the host,
    a lower bound on overhead's share: the sharpest probe there. On a CPU the
    "device" is the same core, an op's own dispatch counts as busy, and "idle"
    also holds the moments the OS gave the core to another program, so there it
    only weighs on the confidence.

The verdict is the regime whose model explains most of the time ((a), with (c)
as a floor on overhead on a GPU). When the two leading models are close (within
1.3x), the batch probe settles it if the time followed exactly one of them.
Agreement or disagreement of (b) and (c) sets the confidence.
"""

from __future__ import annotations

import base64
import html
import io
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["REMEDIES", "Diagnosis", "Evidence", "diagnose"]

REGIMES = ("compute", "memory", "overhead")

#: What to do in each regime: the essay's table.
REMEDIES: Mapping[str, tuple[str, ...]] = {
    "compute": (
        "Use the tensor cores: matmuls in TF32/BF16/FP16 (torch.set_float32_matmul_precision"
        "('high'), or autocast).",
        "Lower precision overall (bf16/fp16; int8 where accuracy allows): more FLOP/s per unit.",
        "Spend fewer FLOPs (a smaller model, or an algorithm that skips work), or buy a bigger "
        "device: you are already using this one well.",
    ),
    "memory": (
        "Fuse operators so intermediates stay in registers/cache: torch.compile (or a "
        "hand-written Triton kernel) turns a chain of elementwise ops into one pass.",
        "Make fewer passes over the data: reuse what is loaded, avoid needless copies, "
        ".contiguous() and recomputation of big intermediates from memory.",
        "Store tensors in lower precision (bf16/fp16/int8): half the bytes, half the time.",
    ),
    "overhead": (
        "Trace or compile the Python away: torch.compile (mode='reduce-overhead' uses CUDA "
        "graphs on a GPU), or capture CUDA graphs yourself.",
        "Do the same work in fewer, larger ops: vectorise Python loops, batch small ops "
        "together (torch._foreach_*, one matmul instead of many).",
        "Give each op more work: a bigger batch costs almost nothing extra while you are "
        "overhead-bound.",
    ),
}

#: Added for memory-bound work whose bytes do not grow with the batch (weights dominate).
_REUSE_REMEDY = (
    "Batch more: the bytes here are the weights, read once per call whatever the batch, so "
    "more rows per call reuse each loaded weight (higher FLOP/byte) almost for free."
)

# Thresholds, named so the method can be read off them.
#: A batch-probe growth within this factor of a model's predicted growth "follows" it.
_FOLLOW_TOLERANCE = 1.3
#: Device busy below this fraction is evidence for overhead; above _BUSY_HIGH, against.
_BUSY_LOW, _BUSY_HIGH = 0.5, 0.8
#: The verdict is "high" confidence when its share is at least this and this many times
#: the runner-up's.
_HIGH_SHARE, _HIGH_MARGIN = 0.25, 2.0
_MEDIUM_MARGIN = 1.3
#: A doubled batch this many times slower than the largest count growth was disturbed
#: (page faults and cache misses explain up to ~3x; beyond that, contention).
_DISTURBED_FACTOR = 4.0


@dataclass(frozen=True)
class Evidence:
    """One probe's finding: what was measured and which regime it points to.

    ``value`` is the raw number (a share of the time, a ratio or a fraction),
    ``measured`` the same in words, ``says`` the regime it supports
    (``"compute"``, ``"memory"``, ``"overhead"``, or ``"compute or memory"``
    etc. when it cannot tell them apart, ``"-"`` when it says nothing), and
    ``reading`` the sentence that explains it.
    """

    probe: str
    value: float
    measured: str
    says: str
    reading: str


@dataclass(frozen=True)
class Diagnosis:
    """The regime of a workload, with its evidence, confidence and remedies.

    ``regime`` is ``"compute"``, ``"memory"`` or ``"overhead"``; ``shares``
    maps each regime to the fraction of the measured time its model explains
    (see the module docstring); ``confidence`` is ``"high"``, ``"medium"`` or
    ``"low"`` and ``confidence_reason`` says why. The raw measurements are kept:
    ``timing``, ``counts``, ``ceilings``, ``trace`` and the batch probe's
    ``batch_timing``/``batch_counts`` (``None`` when skipped; ``notes`` says why).
    """

    regime: str
    confidence: str
    confidence_reason: str
    shares: Mapping[str, float]
    evidence: tuple[Evidence, ...]
    remedies: tuple[str, ...]
    timing: Any
    counts: Any
    ceilings: Any
    trace: Any = None
    batch_timing: Any = None
    batch_counts: Any = None
    notes: tuple[str, ...] = ()
    label: str | None = None
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def seconds(self) -> float:
        """The measured time of one call (median)."""
        return self.timing.median_s

    @property
    def achieved_flops_per_s(self) -> float:
        """FLOPs of one call over its time."""
        return self.counts.flops / self.seconds

    @property
    def achieved_bytes_per_s(self) -> float:
        """Bytes moved by one call over its time."""
        return self.counts.bytes_moved / self.seconds

    def plot(self, ax=None):
        """The workload's point on this machine's roofline (``bl.roofline.plot``)."""
        from brrrlib import roofline

        point = ()
        if self.counts.flops > 0 and self.counts.bytes_moved > 0:
            point = (
                roofline.RooflinePoint(
                    self.label or "workload",
                    self.counts.flops,
                    self.counts.bytes_moved,
                    self.seconds,
                ),
            )
        return roofline.plot(self.ceilings, point, ax=ax, title=f"{self.label or 'workload'}")

    def _headline(self) -> str:
        what = f"{self.label}: " if self.label else ""
        return (
            f"{what}{self.regime.upper()}-bound ({self.confidence} confidence) - "
            f"{_fmt_s(self.seconds)} per call on {self.timing.device}"
        )

    def __str__(self) -> str:
        lines = [self._headline(), f"  why so sure: {self.confidence_reason}", "  evidence:"]
        width = max(len(e.probe) for e in self.evidence) if self.evidence else 0
        for e in self.evidence:
            lines.append(f"    {e.probe:<{width}}  {e.measured:<34} -> {e.says}: {e.reading}")
        lines.extend(f"  note: {n}" for n in self.notes)
        lines.append("  what to do:")
        lines.extend(f"    - {r}" for r in self.remedies)
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = {"compute": "#1f77b4", "memory": "#ff7f0e", "overhead": "#d62728"}[self.regime]
        rows = "".join(
            f"<tr><td>{html.escape(e.probe)}</td><td>{html.escape(e.measured)}</td>"
            f"<td><b>{html.escape(e.says)}</b></td><td>{html.escape(e.reading)}</td></tr>"
            for e in self.evidence
        )
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        remedies = "".join(f"<li>{html.escape(r)}</li>" for r in self.remedies)
        label = html.escape(self.label + ": ") if self.label else ""
        return (
            "<div style='font-family:sans-serif'>"
            f"<h3 style='margin:0'>{label}<span style='color:{color}'>"
            f"{self.regime}-bound</span> <small>({self.confidence} confidence, "
            f"{html.escape(_fmt_s(self.seconds))} per call on {html.escape(self.timing.device)})"
            "</small></h3>"
            f"<p>{html.escape(self.confidence_reason)}</p>"
            f"{self._roofline_img()}"
            "<table><tr><th>probe</th><th>measured</th><th>says</th><th>reading</th></tr>"
            f"{rows}</table>"
            + (f"<ul>{notes}</ul>" if notes else "")
            + f"<p><b>What to do ({self.regime}-bound):</b></p><ul>{remedies}</ul></div>"
        )

    def _roofline_img(self) -> str:
        """The roofline as an inline PNG, drawn on a pyplot-free Figure (no stray plots)."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(5.0, 3.4), dpi=90)
        ax = fig.add_subplot()
        self.plot(ax=ax)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        data = base64.b64encode(buf.getvalue()).decode()
        return f"<img src='data:image/png;base64,{data}' alt='roofline' style='max-width:480px'>"


# ----------------------------------------------------------------------------- diagnose


def diagnose(
    fn: Callable,
    *args,
    batch_probe: bool = True,
    trace: bool = True,
    ceilings: Any = None,
    budget_s: float = 0.3,
    progress: bool = True,
    label: str | None = None,
    **kwargs,
) -> Diagnosis:
    """Measure ``fn(*args, **kwargs)`` and name its regime, with evidence and remedies.

    See the module docstring for the three probes and how they are weighed.
    Cost: one ``bl.benchmark`` of ``budget_s`` seconds, one of the doubled
    batch, two ``bl.count`` calls and a 3-run ``bl.profile``: a few seconds,
    plus ~10-20 s the first time this machine's ceilings are measured (they
    are cached on disk afterwards).

    Args:
        fn: the workload, called as ``fn(*args, **kwargs)``; a function or an
            ``nn.Module``. Pass the input as an argument (weights inside ``fn``
            or the module) so the batch probe can double it. The keywords
            below are taken by ``diagnose`` itself; to pass one of them to
            ``fn``, use ``functools.partial``.
        batch_probe: double the leading dimension of every tensor argument
            (``torch.cat([t, t])``) and time again. Skipped, with a note, when
            no argument is a tensor with a dimension, or when ``fn`` fails on
            the doubled input (say, a weight passed as an argument).
        trace: profile ``fn`` for the device-busy probe.
        ceilings: a :class:`~brrrlib.devices.Ceilings` to judge against
            (default: ``bl.measure_ceilings()`` for the device ``fn`` ran on).
        budget_s: seconds of timed runs per ``bl.benchmark``.
        progress: print one line per step on stderr.
        label: a name for the report (default: ``fn.__name__``).

    Errors ``fn`` raises are not caught: they surface as they are. A function
    that runs no torch operator raises ``ValueError``.
    """
    from brrrlib import counting, timing
    from brrrlib import trace as trace_mod
    from brrrlib.ceilings import measure_ceilings

    if not callable(fn):
        raise TypeError(
            f"fn must be callable (a function or nn.Module), got {type(fn).__name__}; "
            "pass the function itself: bl.diagnose(model, x), not bl.diagnose(model(x))"
        )
    if ceilings is not None and not all(
        hasattr(ceilings, a)
        for a in (
            "matmul_flops_per_s",
            "vector_flops_per_s",
            "mem_bandwidth_bytes_per_s",
            "op_overhead_s",
        )
    ):
        raise TypeError(
            f"ceilings must be measured Ceilings (bl.measure_ceilings()), got "
            f"{type(ceilings).__name__}; a spec sheet has no op overhead to judge overhead by"
        )
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or budget_s <= 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")
    label = label or _name_of(fn)
    t_start = time.perf_counter()
    steps = 4 + int(batch_probe) + int(trace)
    say = _Progress(progress, steps, label)

    say("counting FLOPs, bytes and ops (bl.count)")
    counts = counting.count(fn, *args, **kwargs)  # runs fn once: its errors surface here
    if counts.ops == 0:
        raise ValueError(
            f"fn={label!r} ran no torch operators, so there is nothing to diagnose. "
            "Pass a function that does tensor work on its arguments (and pass the function, "
            "not its result)."
        )
    say("timing (bl.benchmark)")
    main_timing = timing.benchmark(fn, *args, budget_s=budget_s, label=label, **kwargs)
    dev = _torch_device(main_timing.device)
    if ceilings is None:
        say(f"ceilings of {dev} (bl.measure_ceilings; cached after the first time)")
        ceilings = measure_ceilings(dev, progress=progress)
    else:
        say(f"ceilings given: {getattr(ceilings, 'device_name', '?')}")

    notes: list[str] = []
    if _vector_fell_back(ceilings):
        notes.append(
            "the vector ceiling was measured with eager ops (torch.compile failed), well "
            "below the true peak, so elementwise FLOPs are judged against the matmul "
            "ceiling instead. Re-measure with bl.measure_ceilings(refresh=True)."
        )
    batch_timing = batch_counts = None
    if batch_probe:
        say("batch probe: doubling the leading dimension of the tensor arguments")
        batch_counts, batch_timing = _batch_probe(fn, args, kwargs, budget_s, label, notes)
    tr = None
    if trace:
        say("tracing (bl.profile)")
        tr = trace_mod.profile(fn, *args, runs=3, label=label, **kwargs)

    say("weighing the evidence")
    verdict = _weigh(counts, main_timing, ceilings, tr, batch_counts, batch_timing)
    regime, confidence, reason, shares, evidence = verdict
    remedies = REMEDIES[regime]
    if (
        regime == "memory"
        and batch_counts is not None
        and batch_counts.bytes_moved < _FOLLOW_TOLERANCE * counts.bytes_moved
    ):
        remedies = (_REUSE_REMEDY, *remedies)
    return Diagnosis(
        regime=regime,
        confidence=confidence,
        confidence_reason=reason,
        shares=shares,
        evidence=evidence,
        remedies=remedies,
        timing=main_timing,
        counts=counts,
        ceilings=ceilings,
        trace=tr,
        batch_timing=batch_timing,
        batch_counts=batch_counts,
        notes=tuple(notes),
        label=label,
        elapsed_s=time.perf_counter() - t_start,
    )


def _weigh(counts, timing, ceilings, trace, batch_counts, batch_timing):
    """The verdict from the measurements: pure arithmetic, no measuring (testable alone)."""
    t = timing.median_s
    cats = counts.by_category()
    matmul_flops = cats["matmul"]["flops"]
    other_flops = counts.flops - matmul_flops
    vector_peak = ceilings.vector_flops_per_s
    if _vector_fell_back(ceilings):
        # An eager fallback measures an in-cache, bandwidth-bound op, not the arithmetic
        # units; in fp32 the matmul units are the same units, so their rate is a safer floor.
        vector_peak = max(vector_peak, ceilings.matmul_flops_per_s)
    model_s = {
        "compute": matmul_flops / ceilings.matmul_flops_per_s + other_flops / vector_peak,
        "memory": counts.bytes_moved / ceilings.mem_bandwidth_bytes_per_s,
        "overhead": counts.ops * ceilings.op_overhead_s,
    }
    shares = {k: v / t for k, v in model_s.items()}
    evidence = [
        Evidence(
            "roofline: compute",
            shares["compute"],
            f"{_fmt_rate(counts.flops / t, 'FLOP/s')} = {shares['compute']:.0%} of peak",
            "compute" if _leads("compute", shares) else "-",
            f"{_fmt_count(counts.flops)}FLOP ({_pct(matmul_flops, counts.flops)} in matmuls) "
            f"need >= {_fmt_s(model_s['compute'])} at this machine's matmul "
            f"{_fmt_rate(ceilings.matmul_flops_per_s, 'FLOP/s')} / vector "
            f"{_fmt_rate(vector_peak, 'FLOP/s')}.",
        ),
        Evidence(
            "roofline: memory",
            shares["memory"],
            f"{_fmt_rate(counts.bytes_moved / t, 'B/s')} = {shares['memory']:.0%} of bandwidth",
            "memory" if _leads("memory", shares) else "-",
            f"{_fmt_count(counts.bytes_moved)}B moved need >= {_fmt_s(model_s['memory'])} at "
            f"{_fmt_rate(ceilings.mem_bandwidth_bytes_per_s, 'B/s')}"
            + (
                " (over 100%: the data fit in cache, faster than DRAM)."
                if shares["memory"] > 1.2
                else "."
            ),
        ),
        Evidence(
            "overhead: op count",
            shares["overhead"],
            f"{counts.ops} ops x {_fmt_s(ceilings.op_overhead_s)} = {shares['overhead']:.0%} of time",
            "overhead" if _leads("overhead", shares) else "-",
            f"one tiny op costs {_fmt_s(ceilings.op_overhead_s)} here, so {counts.ops} op calls "
            f"cost >= {_fmt_s(model_s['overhead'])} of the {_fmt_s(t)} measured.",
        ),
    ]

    scores = dict(shares)
    busy = None
    if trace is not None and trace.runs:
        busy = _median(trace.busy_fraction_per_run)
        idle = 1.0 - busy
        if trace.device == "cuda" and busy < _BUSY_HIGH:
            # On a GPU an idle device is waiting for the host: overhead's floor. (On a CPU
            # "idle" also counts the moments the OS gave the core to another program, so
            # there it only weighs on the confidence.)
            scores["overhead"] = max(scores["overhead"], idle)
        where = "GPU" if trace.device == "cuda" else "CPU op bodies"
        if busy < _BUSY_LOW:
            says, reading = (
                "overhead",
                f"the device ({where}) sat idle {idle:.0%} of the time, waiting for the host.",
            )
        elif busy >= _BUSY_HIGH:
            says = "compute or memory"
            reading = (
                f"the device ({where}) was busy almost all the time: the time is the ops' own work"
            )
            reading += (
                "."
                if trace.device == "cuda"
                else "; on a CPU an op's own dispatch counts as busy, so tiny ops look busy too."
            )
        else:
            says, reading = (
                "-",
                f"the device ({where}) was idle {idle:.0%} of the time: some overhead.",
            )
        if trace.launch_delays_s:
            d = trace.launch_delays_s
            reading += f" Kernels waited up to {_fmt_s(max(d))} after launch (host ran ahead)."
        evidence.append(Evidence("device busy (profile)", busy, f"{busy:.0%} busy", says, reading))

    ranking = sorted(REGIMES, key=lambda k: -scores[k])
    regime, runner_up = ranking[0], ranking[1]
    top, second = scores[regime], scores[runner_up]
    margin = top / second if second > 0 else math.inf

    batch_says = None
    if batch_timing is not None and batch_counts is not None:
        batch_says, ev = _batch_evidence(counts, timing, batch_counts, batch_timing)
        evidence.append(ev)

    # A close call between the two leading models is settled by the experiment, when
    # batch scaling follows exactly one of them.
    followed = batch_says.split(" or ") if batch_says else []
    settles = [r for r in (regime, runner_up) if r in followed]
    tie_broken = margin < _MEDIUM_MARGIN and len(settles) == 1
    if tie_broken and settles[0] == runner_up:
        regime, runner_up = runner_up, regime
        top, second = second, top

    # Confidence: the margin of the verdict, then agreement of the other probes.
    against = []
    if followed and followed != ["-"] and regime not in followed:
        against.append(f"batch scaling points to {batch_says}")
        if regime == "memory" and batch_says == "compute":
            against[-1] += (
                " (or the kernel re-reads the data for each row, e.g. one GEMV per row, "
                "which doubles the real bytes too)"
            )
    if busy is not None:
        if regime == "overhead" and busy >= _BUSY_HIGH and trace.device == "cuda":
            against.append(f"the GPU was busy {busy:.0%} of the time")
        if regime != "overhead" and busy < _BUSY_LOW:
            against.append(f"the device idled {1 - busy:.0%} of the time")
    why = f"{regime} explains {top:.0%} of the measured time, " + (
        f"{top / second:.1f}x the runner-up ({runner_up})"
        if second > 0
        else "nothing else explains any"
    )
    if tie_broken:
        confidence = "medium" if not against else "low"
        reason = (
            f"the roofline cannot separate {regime} ({top:.0%}) from {runner_up} "
            f"({second:.0%}), but when the batch doubled the time followed {regime}"
            + ("; " + "; ".join(against) if against else "")
            + ". The workload sits near the boundary: improving either side helps."
        )
    elif top >= _HIGH_SHARE and margin >= _HIGH_MARGIN and not against:
        confidence = "high"
        reason = why + "; the other probes agree."
    elif margin >= _MEDIUM_MARGIN and len(against) <= 1:
        confidence = "medium"
        reason = why + ("; but " + "; ".join(against) if against else "") + "."
        if top < _HIGH_SHARE:
            reason += (
                f" No model explains more than {top:.0%} of the time: the ops are slower than "
                "any ceiling predicts (e.g. transcendental functions count as 1 FLOP each, "
                "or another program shares the cores)."
            )
    else:
        confidence = "low"
        reason = (
            why
            + ("; " + "; ".join(against) if against else "")
            + (
                ". Two regimes are close: the workload sits near the boundary, improving "
                "either side helps."
                if margin < _MEDIUM_MARGIN
                else "."
            )
        )
    return regime, confidence, reason, {k: float(v) for k, v in scores.items()}, tuple(evidence)


def _batch_probe(fn, args, kwargs, budget_s, label, notes):
    """Count and time ``fn`` on doubled tensor arguments; (None, None) and a note if it can't."""
    from brrrlib import counting, timing

    try:
        doubled = _double_batch(args, kwargs)
    except RuntimeError as err:  # out of memory for the doubled copy
        notes.append(
            "batch probe skipped: could not build the doubled input "
            f"({type(err).__name__}: {_first_line(err)})."
        )
        return None, None
    if doubled is None:
        notes.append(
            "batch probe skipped: no argument is a tensor with a batch dimension. Pass "
            "the input as an argument, e.g. bl.diagnose(model, x), to get it."
        )
        return None, None
    args2, kwargs2 = doubled
    try:
        batch_counts = counting.count(fn, *args2, **kwargs2)
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        notes.append(
            "batch probe skipped: fn failed when every tensor argument's first "
            f"dimension was doubled ({type(err).__name__}: {_first_line(err)}). "
            "Pass weights inside fn (a closure or an nn.Module), not as arguments."
        )
        return None, None
    batch_timing = timing.benchmark(
        fn, *args2, budget_s=budget_s, label=f"{label} (batch x2)", **kwargs2
    )
    return batch_counts, batch_timing


def _batch_evidence(counts, timing, batch_counts, batch_timing):
    """Which growth (FLOPs, bytes, ops) the time followed when the batch doubled."""
    time_ratio = batch_timing.median_s / timing.median_s
    predicted = {
        "compute": _safe_ratio(batch_counts.flops, counts.flops),
        "memory": _safe_ratio(batch_counts.bytes_moved, counts.bytes_moved),
        "overhead": _safe_ratio(batch_counts.ops, counts.ops),
    }
    dist = {
        k: abs(math.log(time_ratio / v)) for k, v in predicted.items() if v > 0 and time_ratio > 0
    }
    close = [k for k in REGIMES if k in dist and dist[k] <= math.log(_FOLLOW_TOLERANCE)]
    disturbed = time_ratio > _DISTURBED_FACTOR * max(predicted.values())
    if disturbed:
        says = "-"
    elif not close and time_ratio >= _FOLLOW_TOLERANCE:
        # Time grew, more than any count did: bigger tensors left the cache, or a new
        # large allocation page-faults on every call. The work sets the time either way.
        says = "compute or memory"
    elif not close:
        says = "-"
    elif len(close) == 1:
        says = close[0]
    else:
        says = " or ".join(close)
    growth = (
        f"FLOPs x{predicted['compute']:.2f}, bytes x{predicted['memory']:.2f}, "
        f"ops x{predicted['overhead']:.2f}"
    )
    if disturbed:
        reading = (
            f"time x{time_ratio:.2f}, far more than any count grew ({growth}): that run was "
            "disturbed (another program on the cores, threads waiting for each other); "
            "this probe says nothing. Run again on a quieter machine."
        )
    elif says == "-":
        reading = f"time x{time_ratio:.2f} follows none of {growth}."
    elif not close:
        reading = (
            f"time x{time_ratio:.2f} grew more than the work ({growth}): the doubled data "
            "left the cache, fresh memory page-faults on each call, or the library picked a "
            "slower kernel for the new shape. The work, not overhead, sets the time."
        )
    else:
        reading = f"time x{time_ratio:.2f} follows {says} ({growth})."
    if not disturbed and time_ratio < _FOLLOW_TOLERANCE and predicted["memory"] < _FOLLOW_TOLERANCE:
        reading += (
            " Flat time is not proof of overhead here: the bytes did not grow either "
            "(the weights dominate), so a memory-bound op stays flat too."
        )
    elif not disturbed and time_ratio < _FOLLOW_TOLERANCE:
        reading += " Twice the work for about the same time: the work was not what took the time."
    return says, Evidence("batch x2", time_ratio, f"time x{time_ratio:.2f}", says, reading)


# ----------------------------------------------------------------------------- helpers


def _double_batch(args: tuple, kwargs: dict):
    """Every tensor argument with a dimension, repeated along dim 0; None if there is none.

    Tensors inside lists, tuples and dicts are doubled too (``fn(params, grads)``).
    """
    import torch

    found = False

    def double(v):
        nonlocal found
        if isinstance(v, torch.Tensor):
            if v.dim() == 0:
                return v
            found = True
            out = torch.cat([v.detach(), v.detach()], dim=0)
            return out.requires_grad_(v.requires_grad) if v.is_leaf else out
        if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
            return type(v)(double(x) for x in v)
        if isinstance(v, dict):
            return {k: double(x) for k, x in v.items()}
        return v

    args2 = tuple(double(a) for a in args)
    kwargs2 = {k: double(v) for k, v in kwargs.items()}
    return (args2, kwargs2) if found else None


def _vector_fell_back(ceilings) -> bool:
    """True when the vector ceiling came from the eager fallback, not the compiled FMA chains."""
    return str(getattr(ceilings, "vector_method", "")).startswith("eager")


def _leads(regime: str, shares: Mapping[str, float]) -> bool:
    return shares[regime] >= max(shares.values())


def _torch_device(name: str):
    import torch

    return torch.device(name)


def _name_of(fn) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "workload" if name == "<lambda>" else name


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:160] if text else type(err).__name__


def _safe_ratio(a: float, b: float) -> float:
    return a / b if b else (1.0 if a == b else math.inf)


def _median(xs) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _pct(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "0%"


def _fmt_s(seconds: float) -> str:
    from brrrlib.trace import _fmt_s as fmt

    return fmt(seconds)


def _fmt_count(x: float) -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}"
    return f"{x:.3g} "


def _fmt_rate(x: float, unit: str) -> str:
    return f"{_fmt_count(x)}{unit}"


class _Progress:
    """One line per step on stderr (shown in a notebook too), with elapsed time."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.step, self.label = enabled, total, 0, label
        self.t0 = time.perf_counter()

    def __call__(self, message: str) -> None:
        self.step += 1
        if self.enabled:
            elapsed = time.perf_counter() - self.t0
            print(
                f"diagnose {self.label} [{self.step}/{self.total}] {elapsed:5.1f}s  {message}",
                file=sys.stderr,
                flush=True,
            )
