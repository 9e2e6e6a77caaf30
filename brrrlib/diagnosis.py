"""Which regime is *my* code in, and what do I do about it? (chapter 04)

``bl.diagnose(fn, *args)`` measures ``fn(*args)`` on this machine and names its
regime, compute, memory bandwidth or overhead, with the evidence and the
remedies the essay gives for it. Three probes, each a small pure function
that returns evidence as data; words are written only at the end:

(a) :func:`floors`, **the roofline**. ``bl.count`` gives the FLOPs (per
    precision), bytes and ops of one call; ``bl.measure_ceilings`` this
    machine's ceilings. Each regime gets a *floor*, the least time it could
    take: compute = matmul FLOPs over the matmul ceiling *of their own
    precision* (bf16 work against the bf16 roof, TF32 against TF32) plus
    other FLOPs over the vector ceiling; memory = bytes over the bandwidth;
    overhead = ops that do work x the cheapest op's cost. A floor over the
    measured time is the share of the time that regime explains. A floor is
    a lower bound, so a share above 100% means the model is wrong (the
    bytes came from cache, say), and the text says so.
(b) :func:`batch_evidence`, **batch scaling**. Double the leading dimension of
    every tensor argument and time both with ``bl.compare`` (alternating
    rounds, an interval). Compute or memory work follows its FLOPs or bytes;
    overhead stays flat. Flat time alone misleads (the essay's caveat: a
    batch-1 ``x @ W`` reads W whatever the batch), so the time's growth is
    set beside the counted growth of FLOPs, bytes and ops.
(c) :func:`busy_evidence`, **the device's busy time** from ``bl.profile``. On
    a GPU an idle device waits for the host: a floor on overhead's share. On
    a CPU the op bodies run on the same core, so "idle" is host time outside
    any op (Python between ops, module machinery) plus any moment the OS
    gave the core away: evidence, weighed with (b).

:func:`verdict` ranks the regimes by (a), lifts overhead by (c) on a GPU,
settles a close call with (b), and sets the confidence by how the probes agree.
When the device idles most of the time and doubling the batch leaves the time
flat, the verdict is overhead whatever the byte count.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from brrrlib import _fmt
from brrrlib._diagnose_run import (
    ceilings_for,
    ceilings_notes,
    check_arguments,
    check_one_device,
    name_of,
    run_batch_probe,
    train_mode_notes,
)
from brrrlib._diagnosis_text import REMEDIES, render_html, render_text

__all__ = [
    "REMEDIES",
    "BatchEvidence",
    "BusyEvidence",
    "Diagnosis",
    "Floors",
    "Verdict",
    "batch_evidence",
    "busy_evidence",
    "diagnose",
    "floors",
    "verdict",
]

REGIMES = ("compute", "memory", "overhead")

# Thresholds, named so the method can be read off them.
#: A batch-probe growth within this factor of a count's growth "follows" it.
FOLLOW_TOLERANCE = 1.3
#: Doubling the batch and the time grows less than this: flat (the whole interval below it).
FLAT = 1.3
#: Device busy below this fraction is evidence for overhead; above BUSY_HIGH, against.
BUSY_LOW, BUSY_HIGH = 0.5, 0.8
#: "high" confidence: the verdict explains at least HIGH_SHARE and HIGH_MARGIN x the runner-up.
HIGH_SHARE, HIGH_MARGIN = 0.25, 2.0
MEDIUM_MARGIN = 1.3
#: A call longer than this (seconds) is measured with fewer samples and rounds.
SLOW_CALL_S = 0.5
#: A slow call's diagnosis is planned to stay under this many seconds (``time_limit_s``).
TIME_LIMIT_S = 45.0


# ----------------------------------------------------------------------- (a) floors


@dataclass(frozen=True)
class Floors:
    """The least time each regime's model allows for one call (probe a).

    ``compute_by_precision_s`` splits the compute floor: one entry per matmul
    precision ("fp32", "bf16", ...) and "vector" for the other FLOPs;
    ``special_s`` the special-function evaluations among those (``{"exp":
    s}``), each at its own measured rate. ``notes`` say where a roof was
    missing and what stood in for it.
    """

    compute_s: float
    memory_s: float
    overhead_s: float
    compute_by_precision_s: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    special_s: Mapping[str, float] = field(default_factory=dict)

    def seconds(self) -> dict[str, float]:
        """``{"compute": s, "memory": s, "overhead": s}``."""
        return {"compute": self.compute_s, "memory": self.memory_s, "overhead": self.overhead_s}

    def shares(self, measured_s: float) -> dict[str, float]:
        """Each floor as a fraction of the measured time: the share that regime explains."""
        return {k: v / measured_s for k, v in self.seconds().items()}


def floors(counts: Any, ceilings: Any) -> Floors:
    """The three floors of one call, from its counts and this machine's ceilings (pure).

    Matmul FLOPs are judged against the matmul ceiling of their own precision.
    A precision with no measured ceiling (fp8, say) is judged against the
    fastest one measured, which keeps the floor a lower bound, with a note.
    """
    by_precision = {k: v for k, v in counts.flops_by_precision("matmul").items() if v}
    measured = dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {}) or {})
    measured.setdefault("fp32", ceilings.matmul_flops_per_s)
    fastest = max(measured, key=measured.get)
    split: dict[str, float] = {}
    notes = []
    for precision, flops in by_precision.items():
        key = precision if precision in measured else fastest
        if key != precision:
            notes.append(
                f"no {precision} matmul ceiling was measured here: its FLOPs are judged against "
                f"the fastest measured ({fastest}), so that floor is optimistic"
            )
        split[precision] = flops / measured[key]
    other_flops = counts.flops - sum(by_precision.values())
    # Special functions (an exp per softmax element, an erf per gelu element) at their own
    # measured rates: one FLOP in the count, tens of instructions on a CPU.
    rates = dict(getattr(ceilings, "special_per_s", {}) or {})
    special = getattr(counts, "special_by_function", dict)() if rates else {}
    special_s = {}
    for function, evaluations in special.items():
        rate = rates.get(function) or max(rates.values())
        special_s[function] = evaluations / rate
        other_flops -= evaluations
    vector = ceilings.vector_flops_per_s
    if str(getattr(ceilings, "vector_method", "")).startswith("eager"):
        vector = max(vector, ceilings.matmul_flops_per_s)
        notes.append(
            "the vector ceiling fell back to an eager op (torch.compile failed), well below the "
            "true peak: elementwise FLOPs are judged against the matmul ceiling instead; "
            "re-measure with bl.measure_ceilings(refresh=True)"
        )
    split["vector"] = max(0, other_flops) / vector
    work_ops = getattr(counts, "work_ops", counts.ops)
    return Floors(
        compute_s=sum(split.values()) + sum(special_s.values()),
        memory_s=counts.bytes_moved / ceilings.mem_bandwidth_bytes_per_s,
        overhead_s=work_ops * ceilings.op_overhead_s,
        compute_by_precision_s=split,
        notes=tuple(notes),
        special_s=special_s,
    )


# ----------------------------------------------------------------------- (b) batch


@dataclass(frozen=True)
class BatchEvidence:
    """What doubling the batch did (probe b), as numbers.

    ``time_ratio`` and its interval ``(low, high)`` come from ``bl.compare``;
    ``growth`` is how much each count grew (FLOPs for compute, bytes for
    memory, ops for overhead); ``follows`` the regimes whose growth lies
    inside the interval (widened by ``FOLLOW_TOLERANCE``), read only from a
    ``narrow`` interval; ``flat`` means the whole interval is below
    ``FLAT``, however wide: twice the work, and at most 1.3x the time. The two
    sides were timed in alternating rounds, so a decided ratio is this
    machine's, not noise: when it grew far more than any count, the doubled
    data left the cache, page-faulted, or got a slower kernel.
    """

    time_ratio: float
    low: float
    high: float
    narrow: bool
    growth: Mapping[str, float]
    follows: frozenset[str]
    flat: bool

    @property
    def work_grew(self) -> bool:
        """True when the time grew more than any count did (cache spill, page faults...)."""
        return self.narrow and not self.follows and self.low >= FOLLOW_TOLERANCE


def batch_evidence(counts: Any, doubled: Any, comparison: Any) -> BatchEvidence:
    """Read a doubled-batch comparison against the counted growth (pure)."""
    growth = {
        "compute": _fmt.ratio(doubled.flops, counts.flops),
        "memory": _fmt.ratio(doubled.bytes_moved, counts.bytes_moved),
        "overhead": _fmt.ratio(getattr(doubled, "work_ops", doubled.ops),
                               getattr(counts, "work_ops", counts.ops)),
    }  # fmt: skip
    low, high = comparison.interval
    follows = frozenset(
        k
        for k in REGIMES
        if growth[k] > 0
        and low / FOLLOW_TOLERANCE <= growth[k] <= high * FOLLOW_TOLERANCE
        and comparison.narrow
    )
    return BatchEvidence(
        time_ratio=comparison.ratio,
        low=low,
        high=high,
        narrow=comparison.narrow,
        growth=growth,
        follows=follows,
        flat=high < FLAT,
    )


# ----------------------------------------------------------------------- (c) busy


@dataclass(frozen=True)
class BusyEvidence:
    """How busy the device was while ``fn`` ran (probe c), from ``bl.profile``.

    ``busy`` is the median over the steady runs (``Trace.steady_runs``: run 0
    is left out when the profiler's own set-up inflated it); ``idle = 1 -
    busy``; ``outside_ops`` the share of wall time the host spent outside any
    op (Python between ops, module machinery: overhead no per-op model sees);
    ``queued_s`` the longest a kernel waited behind earlier work (the host ran
    ahead: only a GPU, only when the device was busy); ``device`` "cuda",
    "cpu" or "mps".
    """

    device: str
    busy: float
    outside_ops: float = 0.0
    queued_s: float = 0.0

    @property
    def idle(self) -> float:
        """The fraction of the wall time the device did nothing."""
        return 1.0 - self.busy


def busy_evidence(trace: Any) -> BusyEvidence | None:
    """The device-busy evidence of a trace (pure); None without runs."""
    if trace is None or not trace.runs:
        return None
    steady = getattr(trace, "steady_runs", range(len(trace.runs))) or range(len(trace.runs))
    busy = [trace.busy_fraction_per_run[r] for r in steady]
    walls = [trace.wall_s[r] for r in steady]
    outside = list(getattr(trace, "outside_ops_s", ()) or ())
    outside_share = (
        [outside[r] / w for r, w in zip(steady, walls, strict=True) if w > 0] if outside else []
    )
    return BusyEvidence(
        device=trace.device,
        busy=_fmt.median(busy),
        outside_ops=_fmt.median(outside_share) if outside_share else 0.0,
        queued_s=max(getattr(trace, "queued_s", ()) or (), default=0.0),
    )


# ----------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Verdict:
    """The regime, how sure, and why (as data: rendered to words by the Diagnosis).

    ``scores`` are the shares of (a), with overhead lifted to the idle
    fraction on a GPU; ``against`` lists the probes that disagree, e.g.
    ``("batch", "overhead")`` or ``("idle", 0.7)``; ``settled_by`` names
    what decided a close call ("batch" or "idle and flat batch"), if anything.
    """

    regime: str
    confidence: str
    scores: Mapping[str, float]
    runner_up: str
    against: tuple[tuple[str, Any], ...] = ()
    settled_by: str = ""

    @property
    def margin(self) -> float:
        """The verdict's score over the runner-up's (inf when the runner-up explains nothing)."""
        return _fmt.ratio(self.scores[self.regime], self.scores[self.runner_up])


def verdict(
    shares: Mapping[str, float], busy: BusyEvidence | None, batch: BatchEvidence | None
) -> Verdict:
    """Weigh the three probes (pure): ranking by (a), then (c) and (b); see the module docstring."""
    scores = dict(shares)
    if busy is not None and busy.device == "cuda" and busy.busy < BUSY_HIGH:
        scores["overhead"] = max(scores["overhead"], busy.idle)
    ranking = sorted(REGIMES, key=lambda k: -scores[k])
    regime, runner_up = ranking[0], ranking[1]
    margin = _fmt.ratio(scores[regime], scores[runner_up])
    settled_by = ""
    idle_and_flat = busy is not None and busy.busy < BUSY_LOW and batch is not None and batch.flat
    # Every floor small and the time flat while the work (and its bytes) doubled: the essay's
    # batch test decides. (Flat bytes would be a GEMV's weights: memory, not overhead.)
    small_and_flat = (
        max(shares.values()) < HIGH_SHARE
        and batch is not None
        and batch.flat
        and batch.growth["memory"] >= FOLLOW_TOLERANCE
    )
    if idle_and_flat and regime != "overhead":
        regime, runner_up, settled_by = "overhead", regime, "idle and flat batch"
    elif small_and_flat and regime != "overhead":
        regime, runner_up, settled_by = "overhead", regime, "flat batch"
    elif batch is not None and margin < MEDIUM_MARGIN:
        settles = [r for r in (regime, runner_up) if r in batch.follows]
        if len(settles) == 1:
            settled_by = "batch"
            if settles[0] == runner_up:
                regime, runner_up = runner_up, regime
    against = _against(regime, busy, batch)
    return Verdict(
        regime=regime,
        confidence=_confidence(regime, runner_up, scores, against, settled_by),
        scores={k: float(v) for k, v in scores.items()},
        runner_up=runner_up,
        against=tuple(against),
        settled_by=settled_by,
    )


def _against(regime: str, busy: BusyEvidence | None, batch: BatchEvidence | None) -> list:
    against: list[tuple[str, Any]] = []
    if batch is not None and batch.follows and regime not in batch.follows:
        against.append(("batch", " or ".join(r for r in REGIMES if r in batch.follows)))
    if busy is not None:
        if regime == "overhead" and busy.busy >= BUSY_HIGH and busy.device == "cuda":
            against.append(("busy", busy.busy))
        if regime != "overhead" and busy.busy < BUSY_LOW:
            against.append(("idle", busy.idle))
    return against


def _confidence(regime, runner_up, scores, against, settled_by) -> str:
    top, margin = scores[regime], _fmt.ratio(scores[regime], scores[runner_up])
    if settled_by == "idle and flat batch":
        return "high" if not against else "medium"
    if settled_by == "flat batch":
        return "medium" if not against else "low"
    if settled_by == "batch":
        return "medium" if not against else "low"
    if top >= HIGH_SHARE and margin >= HIGH_MARGIN and not against:
        return "high"
    if margin >= MEDIUM_MARGIN and len(against) <= 1:
        return "medium"
    return "low"


# ----------------------------------------------------------------------- the result


@dataclass(frozen=True)
class Diagnosis:
    """The regime of a workload, with its evidence, confidence and remedies.

    ``regime`` is "compute", "memory" or "overhead"; ``confidence`` "high",
    "medium" or "low". The evidence is data: ``floors`` (a), ``batch`` (b),
    ``busy`` (c), ``verdict``; ``shares`` maps each regime to the fraction of
    the time its floor explains. The raw measurements stay: ``timing``,
    ``counts``, ``ceilings``, ``trace``, ``batch_comparison`` /
    ``batch_timing`` / ``batch_counts`` (None when skipped: ``notes`` says why).
    ``str(d)`` and the notebook view write it out in words.
    """

    regime: str
    confidence: str
    shares: Mapping[str, float]
    remedies: tuple[str, ...]
    verdict: Verdict
    floors: Floors
    timing: Any
    counts: Any
    ceilings: Any
    busy: BusyEvidence | None = None
    batch: BatchEvidence | None = None
    trace: Any = None
    batch_comparison: Any = None
    batch_counts: Any = None
    notes: tuple[str, ...] = ()
    label: str | None = None
    elapsed_s: float = field(default=0.0, compare=False)

    @property
    def seconds(self) -> float:
        """The measured time of one call (median)."""
        return self.timing.median_s

    @property
    def batch_timing(self) -> Any:
        """The doubled batch's Timing (from the paired comparison), or None."""
        return None if self.batch_comparison is None else self.batch_comparison.b

    @property
    def precision(self) -> str:
        """The precision of most matmul FLOPs: the roof this workload is judged against."""
        return self.counts.precision

    @property
    def achieved_flops_per_s(self) -> float:
        """FLOPs of one call over its time."""
        return self.counts.flops / self.seconds

    @property
    def achieved_bytes_per_s(self) -> float:
        """Bytes moved by one call over its time."""
        return self.counts.bytes_moved / self.seconds

    def plot(self, ax=None):
        """The workload on this machine's roofline, against the roof of its own precision."""
        from brrrlib import roofline

        point = ()
        if self.counts.flops > 0 and self.counts.bytes_moved > 0:
            point = (
                roofline.RooflinePoint(self.label or "workload", self.counts.flops,
                                       self.counts.bytes_moved, self.seconds, self.precision),
            )  # fmt: skip
        return roofline.plot(self.ceilings, point, ax=ax, title=self.label or "workload")

    def __str__(self) -> str:
        return render_text(self)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return render_html(self)


# ----------------------------------------------------------------------- diagnose


def diagnose(
    fn: Callable,
    *args,
    batch_probe: bool = True,
    trace: bool = True,
    ceilings: Any = None,
    budget_s: float = 0.3,
    progress: bool = True,
    label: str | None = None,
    time_limit_s: float = TIME_LIMIT_S,
    **kwargs,
) -> Diagnosis:
    """Measure ``fn(*args, **kwargs)`` and name its regime, with evidence and remedies.

    The method is in the module docstring. Cost: one ``bl.count``, one
    ``bl.benchmark`` of ``budget_s`` seconds, a ``bl.compare`` of the call
    and its doubled batch, and a ``bl.profile``: a few seconds, plus
    ~15-25 s the first time this machine's ceilings are measured (cached on
    disk afterwards). A call slower than 0.5 s is measured with as many
    calls as fit ``time_limit_s`` (45 s; at least 3 paired rounds and 2
    profiled runs), and the first progress line says how many and how long.

    Args:
        fn: the workload, a function or an ``nn.Module``. Pass the input as an
            argument (weights inside ``fn`` or the module) so the batch probe
            can double it. The keywords below are taken by ``diagnose``
            itself; to pass one of them to ``fn``, use ``functools.partial``.
        batch_probe: double the leading dimension of every tensor argument
            and compare. Skipped, with a note, when no argument has a
            dimension, or when anything fails on the doubled input (a weight
            passed as an argument, an assert on the batch size, out of memory).
        trace: profile ``fn`` for the device-busy probe.
        ceilings: the :class:`~brrrlib.ceilings.Ceilings` to judge against
            (default: ``bl.measure_ceilings()`` of the device ``fn`` ran on);
            they must be of that device.
        budget_s: seconds of timed runs for the benchmark (the comparison gets 4x).
        progress: show one line per step.
        label: a name for the report (default: ``fn.__name__``).
        time_limit_s: how long a slow call's diagnosis may take; raise it for
            more rounds (a call of 2 s: 3 paired rounds fit 45 s).

    Errors ``fn`` raises on its own input are not caught: they surface as
    they are. A function that runs no torch operator raises ``ValueError``.
    """
    from brrrlib import counting, devices, timing
    from brrrlib import trace as trace_mod

    check_arguments(fn, ceilings, budget_s)
    check_one_device(fn, args, kwargs)
    label = label or name_of(fn)
    t_start = time.perf_counter()
    say = _fmt.Progress(progress, 4 + int(batch_probe) + int(trace), f"diagnose {label}")
    say("counting FLOPs, bytes and ops (bl.count)")
    t0 = time.perf_counter()
    counts = counting.count(fn, *args, **kwargs)  # runs fn once: its errors surface here
    call_s = time.perf_counter() - t0
    if counts.ops == 0:
        raise ValueError(
            f"fn={label!r} ran no torch operators, so there is nothing to diagnose. Pass a "
            "function that does tensor work on its arguments (the function, not its result)."
        )
    plan = _plan(call_s, batch_probe, trace, time_limit_s)
    notes: list[str] = train_mode_notes(fn)
    if plan.slow:
        say.say(plan.words)
        notes.append(plan.words)
    def timed():
        say("timing (bl.benchmark)")
        return timing.benchmark(fn, *args, budget_s=budget_s, label=label,
                                min_samples=plan.samples, **kwargs)  # fmt: skip

    # a slow call's timing is the first side of its batch probe's rounds
    main = None if plan.slow and batch_probe else timed()
    ceilings = ceilings_for(str(devices.of(args, kwargs)), ceilings, say, progress)
    notes += ceilings_notes(ceilings)
    comparison = batch_counts = None
    if batch_probe:
        say("batch probe: the call against its doubled batch (bl.compare)")
        comparison, batch_counts = run_batch_probe(
            fn, args, kwargs, 4 * budget_s, plan.rounds, notes, slow=plan.slow
        )
        if main is None and comparison is not None:
            main = dataclasses.replace(comparison.a, label=label)
    main = main or timed()  # a slow call whose batch probe could not run
    tr = None
    if trace:
        say("tracing (bl.profile)")
        tr = trace_mod.profile(fn, *args, runs=plan.runs, warmup=int(not plan.slow), label=label,
                               **kwargs)  # fmt: skip
    say("weighing the evidence")
    return _assemble(counts, main, ceilings, tr, comparison, batch_counts, notes, label,
                     time.perf_counter() - t_start)  # fmt: skip


@dataclass(frozen=True)
class _Plan:
    """How many calls a diagnosis makes: as usual, or as many as a slow call's time limit allows."""

    slow: bool
    samples: int = 5  # timed calls of the benchmark, at least
    rounds: int = 10  # paired rounds of the batch probe, at least
    runs: int = 3  # profiled runs
    seconds: float = 0.0
    call_s: float = 0.0

    @property
    def words(self) -> str:
        return (
            f"one call takes {self.call_s:.1f} s, so this diagnosis makes fewer calls: "
            f"{self.rounds} paired rounds of the call and its doubled batch (or "
            f"{self.samples} timed calls), {self.runs} profiled runs: about "
            f"{self.seconds:.0f} s in all (time_limit_s allows more)"
        )


def _plan(call_s: float, batch_probe: bool, trace: bool, limit_s: float) -> _Plan:
    """The calls a slow call can afford within ``limit_s``, counted in units of one call.

    Counting ran it once. A batch probe counts the doubled call (2 units),
    estimates each side once (1 + 2), then each paired round costs 3; its
    first side is the main timing. Without one, the benchmark's first call
    and estimate (2) and its samples (1 each). Profiling: one per run.
    """
    if call_s <= SLOW_CALL_S:
        return _Plan(slow=False)
    fixed, per = (1 + 5, 3) if batch_probe else (1 + 2, 1)
    runs = 2 if trace else 0
    n = 3
    while n < 10 and (fixed + per * (n + 1) + runs) * call_s <= limit_s:
        n += 1
    units = fixed + per * n + runs
    return _Plan(True, samples=n, rounds=n, runs=max(runs, 1), seconds=units * call_s,
                 call_s=call_s)  # fmt: skip


def _assemble(counts, main, ceilings, tr, comparison, batch_counts, notes, label, elapsed_s):
    """The pure part of diagnose: floors, evidence, verdict, remedies."""
    fl = floors(counts, ceilings)
    shares = fl.shares(main.median_s)
    busy = busy_evidence(tr)
    batch = None
    if comparison is not None and batch_counts is not None:
        batch = batch_evidence(counts, batch_counts, comparison)
    v = verdict(shares, busy, batch)
    from brrrlib._diagnosis_text import REUSE_REMEDY, precision_remedies

    remedies = precision_remedies(v.regime, counts.precision, ceilings) + REMEDIES[v.regime]
    if v.regime == "memory" and batch is not None and batch.growth["memory"] < FOLLOW_TOLERANCE:
        remedies = (REUSE_REMEDY, *remedies)
    return Diagnosis(
        regime=v.regime, confidence=v.confidence, shares=shares, remedies=remedies, verdict=v,
        floors=fl, timing=main, counts=counts, ceilings=ceilings, busy=busy, batch=batch,
        trace=tr, batch_comparison=comparison, batch_counts=batch_counts,
        notes=tuple(notes) + fl.notes + tuple(getattr(counts, "notes", ())), label=label,
        elapsed_s=elapsed_s,
    )  # fmt: skip


def _weigh(counts, timing, ceilings, trace=None, batch_counts=None, comparison=None) -> Diagnosis:
    """The verdict from measurements already taken (no measuring): for tests and notebooks."""
    return _assemble(counts, timing, ceilings, trace, comparison, batch_counts, [], None, 0.0)
