"""Which regime is *my* code in, and what do I do about it? (chapter 04)"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from html import escape
from typing import Any

from brrrlib import _fmt

__all__ = [
    "Diagnosis",
    "Floors",
    "above_floors",
    "diagnose",
    "floors",
    "matmul_now",
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
    """The least time each regime's model allows for one call (probe a)."""

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
    """The three floors of one call, from its counts and this machine's ceilings (pure)."""
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
        memory_s=counts.bytes_moved / _bandwidth(ceilings, _pattern(counts, ceilings)),
        overhead_s=work_ops * ceilings.op_overhead_s,
        compute_by_precision_s=split,
        notes=tuple(notes),
        special_s=special_s,
    )


def _pattern(counts: Any, ceilings: Any) -> str:
    """The roof a memory floor uses: the read roof for a read-only run whose bytes outgrow the last-
    level cache (decode's weights), else the fastest writing form (a run the cache holds streams
    faster than either, so the faster roof keeps the floor a lower bound).
    """
    pattern = getattr(counts, "pattern", "write")
    if pattern != "read":
        return pattern
    from brrrlib import machine

    dev = machine.resolve(getattr(ceilings, "device", None))
    return "read" if counts.bytes_moved > machine.last_level_cache_bytes(dev) else "write"


def _bandwidth(ceilings: Any, pattern: str) -> float:
    """The roof of ``pattern`` ("read" or "write", ``Counts.pattern``): measured ceilings know each
    pattern's; a spec sheet or a pair of numbers has one bandwidth for all.
    """
    by_pattern = getattr(ceilings, "bandwidth_for", None)
    return by_pattern(pattern) if by_pattern else ceilings.mem_bandwidth_bytes_per_s


@dataclass(frozen=True)
class AboveFloor:
    """A floor above the measured time and the measured mechanism: ``"cache"`` (``level`` holds the
    bytes), ``"stale ceiling"``, ``"cheaper ops"`` or ``"unexplained"``.
    """

    regime: str
    share: float  # the floor over the measured time
    mechanism: str
    evidence_ratio: float | None = None  # cache / bytes, mm now / ceiling, ceiling / op time
    level: str = ""  # the nearest cache that holds the bytes (bl.machine.caches)

    def __str__(self) -> str:
        by = f" (x{self.evidence_ratio:.2f})" if self.evidence_ratio else ""
        level = f" ({self.level})" if self.level else ""
        return f"{self.regime} floor {self.share:.0%} of the time: {self.mechanism}{level}{by}"


def above_floors(
    counts: Any, seconds: float, ceilings: Any, *, probe: bool = True
) -> tuple[AboveFloor, ...]:
    """Each floor of ``counts`` above ``seconds``, with the mechanism that explains it."""
    from brrrlib import machine  # torch only when a floor is above the time

    fl = floors(counts, ceilings)
    found = []
    for regime, share in fl.shares(seconds).items():
        if share <= 1.0:
            continue
        mechanism, ratio, level = "unexplained", None, ""
        if regime == "memory":
            dev = machine.resolve(getattr(ceilings, "device", None))
            sizes = machine.caches(dev) or (("last-level", machine.last_level_cache_bytes(dev)),)
            held = [(n, b) for n, b in sizes if counts.bytes_moved <= b]
            if held:
                (level, size), mechanism = held[0], "cache"
                ratio = size / counts.bytes_moved
        elif regime == "compute" and probe and _largest(fl.compute_by_precision_s) == "fp32":
            now = matmul_now(ceilings)
            if now > ceilings.matmul_flops_per_s:
                mechanism, ratio = "stale ceiling", now / ceilings.matmul_flops_per_s
        elif regime == "overhead":
            ops = max(getattr(counts, "work_ops", counts.ops), 1)
            mechanism, ratio = "cheaper ops", ceilings.op_overhead_s / (seconds / ops)
        found.append(AboveFloor(regime, share, mechanism, ratio, level))
    return tuple(found)


def _largest(parts: Mapping[str, float]) -> str | None:
    return max(parts, key=parts.get) if parts else None


def matmul_now(ceilings: Any) -> float:
    """FLOP/s of an fp32 ``torch.mm`` at the ceiling's size, now (a short benchmark)."""
    import torch

    from brrrlib.timing import benchmark

    n = int(getattr(ceilings, "matmul_size", 0) or 1024)
    dev = torch.device(getattr(ceilings, "device", "cpu"))
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    return 2 * n**3 / benchmark(torch.mm, a, b, budget_s=0.3).median_s


# ----------------------------------------------------------------------- (b) batch


@dataclass(frozen=True)
class BatchEvidence:
    """What doubling the batch did (probe b), as numbers."""

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
        "overhead": _fmt.ratio(
            getattr(doubled, "work_ops", doubled.ops), getattr(counts, "work_ops", counts.ops)
        ),
    }
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
    """How busy the device was while ``fn`` ran (probe c), from ``bl.profile``."""

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
    """The regime, how sure, and why (as data: rendered to words by the Diagnosis)."""

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
    """The regime of a workload, with its evidence, confidence and remedies."""

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
    above: tuple[AboveFloor, ...] = ()

    @property
    def seconds(self) -> float:
        """The measured time of one call (median)."""
        return self.timing.median_s

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
                roofline.RooflinePoint(
                    self.label or "workload",
                    self.counts.flops,
                    self.counts.bytes_moved,
                    self.seconds,
                    self.precision,
                ),
            )
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
    """Measure ``fn(*args, **kwargs)`` and name its regime, with evidence and remedies."""
    from brrrlib import machine, timing
    from brrrlib import trace as trace_mod

    _check_arguments(fn, ceilings, budget_s)
    _check_one_device(fn, args, kwargs)
    label = label or _name_of(fn)
    say = _fmt.Progress(progress, 4 + int(batch_probe) + int(trace), f"diagnose {label}")
    say("counting FLOPs, bytes and ops (bl.count)")
    counts, call_s = _count(fn, args, kwargs, label)
    plan = _plan(call_s, batch_probe, trace, time_limit_s)
    notes: list[str] = _train_mode_notes(fn)
    if plan.slow:
        say.say(plan.words)
        notes.append(plan.words)

    def timed():
        say("timing (bl.benchmark)")
        return timing.benchmark(
            fn, *args, budget_s=budget_s, label=label, min_samples=plan.samples, **kwargs
        )

    # a slow call's timing is the first side of its batch probe's rounds
    main = None if plan.slow and batch_probe else timed()
    ceilings = _ceilings_for(str(machine.of(args, kwargs)), ceilings, say, progress)
    notes += _ceilings_notes(ceilings, counts)
    comparison = batch_counts = None
    if batch_probe:
        say("batch probe: the call against its doubled batch (bl.compare)")
        comparison, batch_counts = _run_batch_probe(
            fn, args, kwargs, 4 * budget_s, plan.rounds, notes, slow=plan.slow
        )
        if main is None and comparison is not None:
            main = dataclasses.replace(comparison.a, label=label)
    main = main or timed()  # a slow call whose batch probe could not run
    tr = None
    if trace:
        say("tracing (bl.profile)")
        tr = trace_mod.profile(
            fn, *args, runs=plan.runs, warmup=int(not plan.slow), label=label, **kwargs
        )
    say("weighing the evidence")
    d = _assemble(counts, main, ceilings, tr, comparison, batch_counts, notes, label)
    if any(a.regime == "compute" for a in d.above):  # measure the probe the pure part skipped
        d = dataclasses.replace(d, above=above_floors(counts, main.median_s, ceilings))
    return d


def _count(fn, args, kwargs, label: str) -> tuple[Any, float]:
    """``bl.count`` of one call (its errors surface here), and one call's seconds."""
    from brrrlib import counting

    t0 = time.perf_counter()
    counts = counting.count(fn, *args, **kwargs)
    call_s = time.perf_counter() - t0
    if counts.ops == 0:
        raise ValueError(
            f"fn={label!r} ran no torch operators, so there is nothing to diagnose. Pass a "
            "function that does tensor work on its arguments (the function, not its result)."
        )
    if call_s > SLOW_CALL_S:
        call_s = _one_call_s(fn, args, kwargs)
    return counts, call_s


def _one_call_s(fn, args, kwargs) -> float:
    """Seconds of one plain, synced call of ``fn`` (no counting around it)."""
    from brrrlib import machine

    dev = machine.of(args, kwargs)
    machine.sync(dev)
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    machine.sync(dev)
    return time.perf_counter() - t0


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
    """The calls a slow call can afford within ``limit_s``, counted in units of one call."""
    if call_s <= SLOW_CALL_S:
        return _Plan(slow=False)
    fixed, per = (2 + 5, 3) if batch_probe else (2 + 2, 1)
    runs = 2 if trace else 0
    n = 3
    while n < 10 and (fixed + per * (n + 1) + runs) * call_s <= limit_s:
        n += 1
    units = fixed + per * n + runs
    return _Plan(
        True, samples=n, rounds=n, runs=max(runs, 1), seconds=units * call_s, call_s=call_s
    )


def _assemble(counts, main, ceilings, tr, comparison, batch_counts, notes, label):
    """The pure part of diagnose: floors, evidence, verdict, remedies."""
    fl = floors(counts, ceilings)
    shares = fl.shares(main.median_s)
    busy = busy_evidence(tr)
    batch = None
    if comparison is not None and batch_counts is not None:
        batch = batch_evidence(counts, batch_counts, comparison)
    v = verdict(shares, busy, batch)
    remedies = precision_remedies(v.regime, counts.precision, ceilings) + REMEDIES[v.regime]
    if v.regime == "memory" and batch is not None and batch.growth["memory"] < FOLLOW_TOLERANCE:
        remedies = (REUSE_REMEDY, *remedies)
    return Diagnosis(
        regime=v.regime,
        confidence=v.confidence,
        shares=shares,
        remedies=remedies,
        verdict=v,
        floors=fl,
        timing=main,
        counts=counts,
        ceilings=ceilings,
        busy=busy,
        batch=batch,
        trace=tr,
        batch_comparison=comparison,
        batch_counts=batch_counts,
        notes=tuple(notes) + fl.notes + tuple(getattr(counts, "notes", ())),
        label=label,
        above=above_floors(counts, main.median_s, ceilings, probe=False),
    )


def _weigh(counts, timing, ceilings, trace=None, batch_counts=None, comparison=None) -> Diagnosis:
    """The verdict from measurements already taken (no measuring): for tests and notebooks."""
    return _assemble(counts, timing, ceilings, trace, comparison, batch_counts, [], None)


# ------------------------------------------------------------------ running diagnose: checks, ceilings, the batch probe


def _check_arguments(fn, ceilings, budget_s) -> None:
    if not callable(fn):
        raise TypeError(
            f"fn must be callable (a function or nn.Module), got {type(fn).__name__}; "
            "pass the function itself: bl.diagnose(model, x), not bl.diagnose(model(x))"
        )
    needed = (
        "matmul_flops_per_s",
        "vector_flops_per_s",
        "mem_bandwidth_bytes_per_s",
        "op_overhead_s",
        "device",
    )
    if ceilings is not None and not all(hasattr(ceilings, a) for a in needed):
        raise TypeError(
            f"ceilings must be measured Ceilings (bl.measure_ceilings()), got "
            f"{type(ceilings).__name__}; a spec sheet has no op overhead to judge overhead by"
        )
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or budget_s <= 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {budget_s!r}")


def _check_one_device(fn, args, kwargs) -> None:
    """A workload whose tensors sit on two devices cannot run: say so before measuring."""
    import torch

    found = {str(t.device) for t in _tensors((args, kwargs))}
    if isinstance(fn, torch.nn.Module):
        found |= {str(p.device) for p in fn.parameters()}
    if len({torch.device(d).type for d in found}) > 1:
        raise ValueError(
            f"fn's tensors and parameters are on {', '.join(sorted(found))}: an op needs its "
            "inputs on one device. Move them first, e.g. model.to(x.device) or x.to('cuda')."
        )


def _ceilings_notes(ceilings: Any, counts: Any) -> list[str]:
    """The ceilings' noise, only for the ceilings this workload's floors use."""
    uses = {"memory", "overhead"}
    uses |= {
        "matmul" if p == "fp32" else f"matmul_{p}" for p in counts.flops_by_precision("matmul")
    }
    if counts.flops > sum(counts.flops_by_precision("matmul").values()):
        uses.add("vector")
    if counts.special_by_function():
        uses.add("special")
    notes = getattr(ceilings, "noise_notes", None)
    noise = tuple(notes(uses)) if notes else ()
    if not noise:
        return []
    return [
        "the ceilings these shares use were noisy when measured (" + "; ".join(noise) + "): a "
        "share can read too high, even above 100%. bl.measure_ceilings(refresh=True) on a "
        "quiet machine, then diagnose again."
    ]


def _train_mode_notes(fn) -> list[str]:
    import torch

    if isinstance(fn, torch.nn.Module) and fn.training:
        dropout = any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in fn.modules())
        if dropout:
            return [
                "fn is in training mode with dropout: each call draws new random masks (extra "
                "work and bytes an inference run does not do). For inference numbers, call "
                "model.eval() first; for training, diagnose the whole step."
            ]
    return []


def _ceilings_for(device: str, ceilings: Any, say: Any, progress: bool) -> Any:
    """The given ceilings (checked to be of the workload's device), else this device's."""
    import torch

    from brrrlib.ceilings import measure_ceilings

    dev = torch.device(device)
    if ceilings is None:
        say(f"ceilings of {dev} (bl.measure_ceilings; cached after the first time)")
        return measure_ceilings(dev, progress=progress)
    if ceilings.device != dev.type:
        raise ValueError(
            f"ceilings are of a {ceilings.device} ({ceilings.device_name}) but fn ran on "
            f"{dev.type}: a workload is judged against its own device's ceilings. Pass "
            f"ceilings=bl.measure_ceilings({dev.type!r}), or leave ceilings out."
        )
    say(f"ceilings given: {ceilings.device_name}")
    return ceilings


def _run_batch_probe(fn, args, kwargs, budget_s, rounds, notes, slow=False):
    """Compare ``fn`` with its doubled batch; (None, None) and a note when it cannot run."""
    from brrrlib import counting
    from brrrlib.timing import compare

    try:
        doubled = double_batch(args, kwargs)
    except Exception as err:  # noqa: BLE001 -- any failure skips this probe, said in a note
        _skip(notes, "could not build the doubled input", err)
        return None, None
    if doubled is None:
        notes.append(
            "batch probe skipped: no argument is a tensor with a batch dimension. Pass the "
            "input as an argument, e.g. bl.diagnose(model, x), to get it."
        )
        return None, None
    args2, kwargs2 = doubled
    try:
        batch_counts = counting.count(fn, *args2, **kwargs2)
        comparison = compare(
            functools.partial(fn, *args, **kwargs),
            functools.partial(fn, *args2, **kwargs2),
            budget_s=1e-6 if slow else budget_s,
            min_rounds=rounds,
            labels=("batch", "batch x2"),
            warm=slow,
            warmup_s=0.0 if slow else 0.05,
        )
    except Exception as err:  # noqa: BLE001 -- an assert, a KeyError, out of memory: skip, say why
        what = "fn failed when every tensor argument's first dimension was doubled"
        _skip(notes, what, err, _tensor_bytes((args2, kwargs2)))
        return None, None
    return comparison, batch_counts


def _skip(notes: list[str], what: str, err: BaseException, doubled_bytes: int = 0) -> None:
    from brrrlib import machine

    first = _fmt.error_line(err)
    if machine.is_out_of_memory(err):
        machine.release_cached_memory()
        notes.append(
            f"batch probe skipped: the doubled batch ran out of memory ({type(err).__name__}: "
            f"{first}); its inputs alone take {_fmt.binary_bytes(doubled_bytes)}, and the call "
            "needs room for twice the activations too. The cached memory was released."
        )
        return
    notes.append(
        f"batch probe skipped: {what} ({type(err).__name__}: {first}). If a weight is passed "
        "as an argument, pass weights inside fn (a closure or an nn.Module) instead."
    )


def _tensors(tree: Any) -> list:
    """Every tensor in nested tuples, lists and dicts."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _tensor_bytes(tree: Any) -> int:
    """Bytes of every tensor in nested tuples, lists and dicts."""
    return sum(t.numel() * t.element_size() for t in _tensors(tree))


def double_batch(args: tuple, kwargs: dict):
    """Every tensor argument with a dimension, repeated along dim 0; None if there is none."""
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


def _name_of(fn) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return "workload" if name == "<lambda>" else name


# ------------------------------------------------------------------ a diagnosis in words: remedies and evidence

#: What to do in each regime: the essay's table ("Making Deep Learning Go Brrrr", 2022).
REMEDIES: Mapping[str, tuple[str, ...]] = {
    "compute": (
        "Spend fewer FLOPs (a smaller model, or an algorithm that skips work), or buy a bigger "
        "device once the matmuls run near this one's peak (the compute share above); well "
        "below it, larger matmuls (a bigger batch) use this one better first.",
    ),
    "memory": (
        "Fuse operators so intermediates stay in registers/cache: torch.compile (or a "
        "hand-written Triton kernel) turns a chain of elementwise ops into one pass.",
        "Make fewer passes over the data: reuse what is loaded, avoid needless copies, "
        ".contiguous() and recomputation of big intermediates from memory.",
    ),
    "overhead": (
        "Launch fewer kernels: torch.compile fuses ops into fewer, bigger ones (its wrapper is "
        "still Python, so on a GPU mode='reduce-overhead' adds CUDA graphs, which replay "
        "every launch at once), or capture a CUDA graph yourself.",
        "Do the same work in fewer, larger ops: vectorise Python loops, batch small ops "
        "(torch._foreach_* handles a list of tensors per launch, as optimizers' foreach=True "
        "does; fused=True goes further, one kernel), one matmul instead of many.",
        "Give each op more work: a bigger batch costs almost nothing extra while you are "
        "overhead-bound.",
    ),
}

#: Added for memory-bound work whose bytes do not grow with the batch (weights dominate).
REUSE_REMEDY = (
    "Batch more: the bytes here are the weights, read once per call whatever the batch, so "
    "more rows per call reuse each loaded weight (higher FLOP/byte) almost for free."
)

_WHERE = {"cuda": "the GPU", "mps": "the GPU", "cpu": "the CPU (inside ops)"}


def precision_remedies(regime: str, used: str, ceilings: Any) -> tuple[str, ...]:
    """The essay's precision remedies, as far as they hold here: never the precision the workload
    already uses, never one this device runs no faster (read from its ceilings).
    """
    from brrrlib.ceilings import _DTYPES

    peaks = dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {}) or {})
    fast_path = getattr(ceilings, "fast_path", lambda p: p in peaks)
    out = []
    if regime == "compute":
        if used in peaks and used != "fp32" and not fast_path(used):
            out.append(
                f"Run the matmuls in fp32: {ceilings.precision_note(used)}, so {used} costs "
                "time here instead of saving it."
            )
        fast = getattr(ceilings, "fast_precision", "fp32")
        if fast != "fp32" and fast != used and used in peaks:
            gain = peaks[fast] / peaks[used]
            how = (
                "torch.set_float32_matmul_precision('high')"
                if fast == "tf32"
                else f"torch.autocast('{ceilings.device}', dtype={_DTYPES[fast]})"
            )
            out.append(
                f"Use the faster units: matmuls in {fast} ({how}) measured {gain:.1f}x the {used} "
                "ceiling here."
            )
    half = getattr(ceilings, "fast_precision", "fp32")
    if regime == "memory" and used in ("fp32", "fp64", "tf32") and half in ("bf16", "fp16"):
        out.append(
            f"Store tensors in fewer bytes ({half}, int8 weights where accuracy allows): half "
            "the bytes per number, so twice the numbers per second through the same memory."
        )
    return tuple(out)


# ---------------------------------------------------------------------- the verdict, in words


def _margin_words(v: Any) -> str:
    runner = v.scores[v.runner_up]
    if runner <= 0:
        return "nothing else explains any"
    margin = v.margin
    if margin > 100:
        return f"more than 100x the runner-up ({v.runner_up})"
    return f"{margin:.1f}x the runner-up ({v.runner_up})"


def _lead_words(d: Any) -> str:
    """What the verdict's own share is, and where the number came from."""
    v, share = d.verdict, d.verdict.scores[d.regime]
    own = d.shares[d.regime]
    if d.regime == "overhead" and d.busy is not None and share > own + 1e-9:
        return (
            f"{_WHERE.get(d.busy.device, 'the device')} sat idle {d.busy.idle:.0%} of the time, "
            f"waiting for the host (ops x op overhead alone explain {own:.0%})"
        )
    text = f"{d.regime} explains {share:.0%} of the measured time, {_margin_words(v)}"
    text += "".join(f" ({a})" for a in d.above if a.regime == d.regime)
    return text


def _against_words(item: tuple[str, Any]) -> str:
    kind, value = item
    if kind == "batch":
        return f"batch scaling points to {value}"
    if kind == "idle":
        return f"the device idled {value:.0%} of the time"
    return f"the GPU was busy {value:.0%} of the time"


def reason(d: Any) -> str:
    """Why the verdict is what it is, and how sure: one paragraph from the data."""
    v = d.verdict
    against = "; ".join(_against_words(a) for a in v.against)
    if v.settled_by == "idle and flat batch":
        b = d.batch
        text = (
            f"the device idled {d.busy.idle:.0%} of the time and doubling the batch left the "
            f"time flat (x{b.time_ratio:.2f}, interval x{b.low:.2f}-x{b.high:.2f}): the work is "
            "not what takes the time, whatever the bytes or FLOPs say"
        )
    elif v.settled_by == "flat batch":
        b = d.batch
        text = (
            f"no floor explains more than {max(d.shares.values()):.0%} of the time, and doubling "
            f"the batch doubled the work and bytes but left the time flat (x{b.time_ratio:.2f}, "
            f"interval x{b.low:.2f}-x{b.high:.2f}): the time is a fixed cost per call, overhead"
        )
    elif v.settled_by == "batch":
        s_top, s_run = d.shares[d.regime], d.shares[v.runner_up]
        text = (
            f"the roofline cannot separate {d.regime} ({s_top:.0%}) from {v.runner_up} "
            f"({s_run:.0%}), but when the batch doubled the time followed {d.regime}. The "
            "workload sits near the boundary: improving either side helps"
        )
    else:
        text = _lead_words(d)
    if against:
        text += f"; but {against}"
    if not v.settled_by and v.margin < MEDIUM_MARGIN:
        text += ". Two regimes are close: the workload sits near the boundary, improving either side helps"
    top = max(d.shares.values())
    if top < HIGH_SHARE and not v.settled_by:
        text += (
            f". No floor explains more than {top:.0%} of the time: the ops are slower than any "
            "ceiling predicts (data in odd layouts, slow kernels for this shape, or another "
            "program sharing the cores)"
        )
    if v.confidence == "high" and not against:
        text += "; the other probes agree"
    return text + "."


# ---------------------------------------------------------------------- evidence rows


def _compute_row(d: Any) -> tuple[str, str, str]:
    c, fl, share = d.ceilings, d.floors, d.shares["compute"]
    parts = [
        f"{p} matmul {_fmt.si(c.matmul_flops_per_s_by_dtype.get(p, c.matmul_flops_per_s), 'FLOP/s')}"
        for p in fl.compute_by_precision_s
        if p != "vector"
    ]
    parts.append(f"vector {_fmt.si(c.vector_flops_per_s, 'FLOP/s')}")
    special = getattr(fl, "special_s", {}) or {}
    parts += [f"{k} {_fmt.si(c.special_per_s.get(k, 0.0), '/s')}" for k in special]
    text = (
        f"{_fmt.si(d.counts.flops, 'FLOP')} need >= {_fmt.seconds(fl.compute_s)} at this "
        f"machine's {', '.join(parts)}"
    )
    if special and sum(special.values()) >= 0.5 * fl.compute_s:
        top = max(special, key=special.get)
        text += (
            f"; most of it is {top}: {_fmt.si(d.counts.special_by_function()[top])} evaluations "
            f"take >= {_fmt.seconds(special[top])}, a special function costing tens of "
            "instructions, not one FLOP"
        )
    return (
        "roofline: compute",
        f"{_fmt.si(d.achieved_flops_per_s, 'FLOP/s')} = {share:.0%} of the {d.precision} roof",
        text,
    )


def _memory_row(d: Any) -> tuple[str, str, str]:
    share, c = d.shares["memory"], d.ceilings
    pattern = _pattern(d.counts, c)
    return (
        "roofline: memory",
        f"{_fmt.si(d.achieved_bytes_per_s, 'B/s')} = {share:.0%} of the {pattern} roof",
        f"{_fmt.si(d.counts.bytes_moved, 'B')} moved need >= {_fmt.seconds(d.floors.memory_s)} at "
        f"{_fmt.si(_bandwidth(c, pattern), 'B/s')}",
    )


def _overhead_row(d: Any) -> tuple[str, str, str]:
    share, c = d.shares["overhead"], d.ceilings
    ops = getattr(d.counts, "work_ops", d.counts.ops)
    return (
        "overhead: op count",
        f"{ops} ops x {_fmt.seconds(c.op_overhead_s)} = {share:.0%} of time",
        f"the cheapest op costs {_fmt.seconds(c.op_overhead_s)} here (in place, no allocation), "
        f"so {ops} ops that do work cost >= {_fmt.seconds(d.floors.overhead_s)} of the "
        f"{_fmt.seconds(d.seconds)} measured",
    )


def _over_100(d: Any, regime: str) -> str:
    return "".join(f" ({a})" for a in d.above if a.regime == regime) + "."


def _busy_row(d: Any) -> tuple[str, str, str, str]:
    b = d.busy
    where = _WHERE.get(b.device, "the device")
    if b.busy < BUSY_LOW:
        says, text = "overhead", f"{where} sat idle {b.idle:.0%} of the time, waiting for the host."
    elif b.busy >= BUSY_HIGH:
        says = "compute or memory"
        text = f"{where} was busy {b.busy:.0%} of the time: the time is the ops' own work"
        text += "." if b.device != "cpu" else "; on a CPU an op's own dispatch counts as busy."
        if b.queued_s >= 10e-6 and b.device != "cpu":
            text += (
                f" Kernels queued up to {_fmt.seconds(b.queued_s)} behind earlier work: the host "
                "ran ahead, as it should."
            )
    else:
        says, text = "-", f"{where} was idle {b.idle:.0%} of the time: some overhead."
    if b.outside_ops >= 0.2:
        text += (
            f" The host spent {b.outside_ops:.0%} of the time outside any op (Python between "
            "ops, module calls, hooks): overhead no op count sees."
        )
    return ("device busy (profile)", f"{b.busy:.0%} busy", says, text)


def _batch_row(d: Any) -> tuple[str, str, str, str]:
    b = d.batch
    g = b.growth
    growth = f"FLOPs x{g['compute']:.2f}, bytes x{g['memory']:.2f}, ops x{g['overhead']:.2f}"
    measured = f"time x{b.time_ratio:.2f} (x{b.low:.2f}-x{b.high:.2f})"
    if not b.narrow and not b.flat:
        return (
            "batch x2",
            measured,
            "-",
            f"the interval (x{b.low:.2f}-x{b.high:.2f}) is too wide to tell which count the "
            "time follows; this probe says nothing. Close other programs and diagnose again.",
        )
    if b.follows:
        says = " or ".join(r for r in ("compute", "memory", "overhead") if r in b.follows)
        text = f"time follows {says} ({growth})."
    elif b.work_grew:
        says = "compute or memory"
        text = (
            f"time grew more than the work ({growth}): the doubled data left the cache, fresh "
            "memory page-faulted, or the library picked a slower kernel. The work, not "
            "overhead, sets the time."
        )
    else:
        says, text = "-", f"time follows none of {growth}."
    if b.flat and g["memory"] < FOLLOW_TOLERANCE:
        text += (
            " Flat time is not proof of overhead here: the bytes did not grow either (the "
            "weights dominate), so a memory-bound op stays flat too."
        )
    elif b.flat:
        text += " Twice the work for about the same time: the work was not what took the time."
    return ("batch x2", measured, says, text)


def rows(d: Any) -> list[tuple[str, str, str, str]]:
    """(probe, measured, says, reading) for each piece of evidence, in order."""
    out = []
    for regime, row in zip(REGIMES, (_compute_row, _memory_row, _overhead_row), strict=True):
        probe, measured, text = row(d)
        says = regime if d.shares[regime] >= max(d.shares.values()) else "-"
        out.append((probe, measured, says, text + _over_100(d, regime)))
    if d.busy is not None:
        out.append(_busy_row(d))
    if d.batch is not None:
        out.append(_batch_row(d))
    return out


# ---------------------------------------------------------------------- the page


def _headline(d: Any) -> str:
    what = f"{d.label}: " if d.label else ""
    return (
        f"{what}{d.regime.upper()}-bound ({d.confidence} confidence) - "
        f"{_fmt.seconds(d.seconds)} per call on {d.timing.device}"
    )


def render_text(d: Any) -> str:
    """The diagnosis as plain text (``str(d)``)."""
    lines = [_headline(d), f"  why: {reason(d)}", "  evidence:"]
    table = rows(d)
    width = max(len(r[0]) for r in table)
    for probe, measured, says, reading in table:
        lines.append(f"    {probe:<{width}}  {measured:<34} -> {says}: {reading}")
    lines.extend(f"  note: {n}" for n in d.notes)
    lines.append("  what to do:")
    lines.extend(f"    - {r}" for r in d.remedies)
    return "\n".join(lines)


def render_html(d: Any) -> str:
    """The diagnosis for a notebook: verdict, reasons, roofline picture, evidence table."""
    table = _fmt.html_table(("probe", "measured", "says", "reading"), rows(d), tags={2: "b"})
    notes = "".join(f"<li>{escape(n)}</li>" for n in d.notes)
    label = escape(d.label + ": ") if d.label else ""
    return (
        f"<div><h3 style='margin:0'>{label}{escape(d.regime)}-bound "
        f"<small>({escape(d.confidence)} confidence, {escape(_fmt.seconds(d.seconds))} per call "
        f"on {escape(d.timing.device)})</small></h3><p>{escape(reason(d))}</p>{_roofline_img(d)}"
        + table
        + (f"<ul>{notes}</ul>" if notes else "")
        + f"<p><b>What to do ({escape(d.regime)}-bound):</b></p><ul>"
        + "".join(f"<li>{escape(r)}</li>" for r in d.remedies)
        + "</ul></div>"
    )


def _roofline_img(d: Any) -> str:
    """The roofline as an inline PNG, drawn on a pyplot-free Figure (no stray plots)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 3.4), dpi=90)
    ax = fig.add_subplot()
    d.plot(ax=ax)
    alt = (
        f"Roofline of {d.ceilings.device_name} ({d.precision} roof) with {d.label or 'the workload'}"
        f" at {d.counts.flops / max(d.counts.bytes_moved, 1):.3g} FLOP/byte and "
        f"{_fmt.si(d.achieved_flops_per_s, 'FLOP/s')}"
    )
    return _fmt.figure_img(fig, alt, "480px")
