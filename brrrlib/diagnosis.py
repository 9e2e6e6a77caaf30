"""Which regime is *my* code in, and what do I do about it? (chapter 04)"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from html import escape
from typing import Any

from brrrlib import _checks, _fmt

__all__ = ["Diagnosis", "Floors", "above_floors", "diagnose", "floors", "matmul_now"]


REGIMES = ("compute", "memory", "overhead")
_COUNTED = {"compute": "flops", "memory": "bytes_moved", "overhead": "work_ops"}  # on Counts

# Thresholds, named so the method can be read off them.
#: A batch-probe growth within this factor of a count's growth "follows" it.
FOLLOW_TOLERANCE = 1.3
#: Doubling the batch and the time grows less than this: flat (the whole interval below it).
FLAT = 1.3
#: Device busy below this fraction is evidence for overhead; above BUSY_HIGH, against.
BUSY_LOW, BUSY_HIGH = 0.5, 0.8
#: "high" confidence: the verdict explains at least HIGH_SHARE and HIGH_MARGIN x the runner-up;
#: "medium": MEDIUM_MARGIN x the runner-up.
HIGH_SHARE, HIGH_MARGIN, MEDIUM_MARGIN = 0.25, 2.0, 1.3
#: The strongest settling of a verdict: the device idle and the doubled batch's time flat.
IDLE_AND_FLAT = "idle and flat batch"
#: A call longer than this (seconds) is measured with fewer samples and rounds.
SLOW_CALL_S = 0.5
#: A slow call's diagnosis is planned to stay under this many seconds (``time_limit_s``).
TIME_LIMIT_S = 45.0


@dataclass(frozen=True)
class Floors:
    """The least time each regime's model allows for one call (probe a)."""

    compute_s: float
    memory_s: float
    overhead_s: float
    compute_by_precision_s: Mapping[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    special_s: Mapping[str, float] = field(default_factory=dict)
    pattern: str = "write"  # the memory roof: "read" for read-only bytes past the last cache

    def shares(self, measured_s: float) -> dict[str, float]:
        """Each floor as a fraction of the measured time: the share that regime explains."""
        return {r: getattr(self, f"{r}_s") / measured_s for r in REGIMES}


def floors(counts: Any, ceilings: Any) -> Floors:
    """The three floors of one call, from its counts and this machine's ceilings (pure)."""
    by_precision = {k: v for k, v in counts.flops_by_precision("matmul").items() if v}
    measured = dict(getattr(ceilings, "matmul_flops_per_s_by_dtype", {}) or {})
    measured.setdefault("fp32", ceilings.matmul_flops_per_s)
    fastest = max(measured, key=measured.get)
    split = {p: f / measured.get(p, measured[fastest]) for p, f in by_precision.items()}
    judged = {p: fastest for p in by_precision if p not in measured}  # at a faster roof
    # Special functions (an exp per softmax element, an erf per gelu element) at their own
    # measured rates: one FLOP in the count, tens of instructions on a CPU.
    rates = dict(getattr(ceilings, "special_per_s", {}) or {})
    special = getattr(counts, "special_by_function", dict)() if rates else {}
    special_s = {f: n / (rates.get(f) or max(rates.values())) for f, n in special.items()}
    other_flops = counts.flops - sum(by_precision.values()) - sum(special.values())
    vector = ceilings.vector_flops_per_s
    if str(getattr(ceilings, "vector_method", "")).startswith("eager"):
        vector = max(vector, ceilings.matmul_flops_per_s)
        judged["vector"] = "matmul"  # the eager vector ceiling is below the compiled one
    split["vector"] = max(0, other_flops) / vector
    compute_s = sum(split.values()) + sum(special_s.values())
    pattern = getattr(counts, "pattern", "write")
    if pattern == "read":  # a cache holds the bytes: the faster writing roof stays a floor
        from brrrlib import machine

        dev = machine.resolve(getattr(ceilings, "device", None))
        pattern = "read" if counts.bytes_moved > machine.last_level_cache_bytes(dev) else "write"
    # measured ceilings know each access pattern's roof; a spec sheet has one
    by_pattern = getattr(ceilings, "bandwidth_for", None)
    bandwidth = by_pattern(pattern) if by_pattern else ceilings.mem_bandwidth_bytes_per_s
    overhead_s = counts.work_ops * ceilings.op_overhead_s
    memory_s = counts.bytes_moved / bandwidth
    notes = tuple(
        f"{k} FLOPs judged at the {roof} ceiling (optimistic)" for k, roof in judged.items()
    )
    return Floors(compute_s, memory_s, overhead_s, split, notes, special_s, pattern)


@dataclass(frozen=True)
class AboveFloor:
    """A floor above the measured time and why: cache, stale_ceiling, cheaper_ops, unexplained."""

    regime: str
    share: float  # the floor over the measured time
    mechanism: str
    evidence_ratio: float | None = None  # cache / bytes, mm now / ceiling, ceiling / op time
    level: str = ""  # the nearest cache that holds the bytes (bl.machine.caches)

    def __str__(self) -> str:
        by = f" (x{self.evidence_ratio:.2f})" if self.evidence_ratio else ""
        level = f" ({self.level})" if self.level else ""
        return f"{self.regime} floor {self.share:.0%} of the time: {self.mechanism}{level}{by}"


def above_floors(counts: Any, seconds: float, ceilings: Any) -> tuple[AboveFloor, ...]:
    """Each floor of ``counts`` above ``seconds``, with the mechanism that explains it."""
    from brrrlib import machine  # torch only when a floor is above the time

    fl = floors(counts, ceilings)
    by_precision, found = fl.compute_by_precision_s, []
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
        elif regime == "compute" and max(by_precision, key=by_precision.get) == "fp32":
            now = matmul_now(ceilings)
            if now > ceilings.matmul_flops_per_s:
                mechanism, ratio = "stale_ceiling", now / ceilings.matmul_flops_per_s
        elif regime == "overhead":
            ops = max(counts.work_ops, 1)
            mechanism, ratio = "cheaper_ops", ceilings.op_overhead_s / (seconds / ops)
        found.append(AboveFloor(regime, share, mechanism, ratio, level))
    return tuple(found)


def matmul_now(ceilings: Any) -> float:
    """FLOP/s of an fp32 ``torch.mm`` at the ceiling's size, now (a short benchmark)."""
    import torch

    from brrrlib.timing import benchmark

    n = int(getattr(ceilings, "matmul_size", 0) or 1024)
    a, b = torch.randn(2, n, n, device=getattr(ceilings, "device", "cpu"))
    return 2 * n**3 / benchmark(torch.mm, a, b, budget_s=0.3).median_s


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
    work_grew: bool  # the time grew more than any count did (cache spill, page faults...)


@dataclass(frozen=True)
class BusyEvidence:
    """How busy the device was while ``fn`` ran (probe c), from ``bl.profile``."""

    device: str
    busy: float
    outside_ops: float = 0.0
    queued_s: float = 0.0

    idle = property(lambda self: 1.0 - self.busy)


@dataclass(frozen=True)
class Verdict:
    """The regime, how sure, and why (as data: the Diagnosis renders it)."""

    regime: str
    confidence: str
    scores: Mapping[str, float]
    runner_up: str
    margin: float  # the verdict's score over the runner-up's (inf when that explains nothing)
    against: tuple[tuple[str, Any], ...] = ()
    settled_by: str = ""


#: What to do in each regime: the essay's table ("Making Deep Learning Go Brrrr", 2022).
REMEDIES: Mapping[str, tuple[str, ...]] = {
    "compute": (
        "Spend fewer FLOPs (a smaller model); near the peak buy a bigger device, else batch more.",
    ),
    "memory": (
        "Fuse ops so intermediates stay in cache: torch.compile or a Triton kernel.",
        "Make fewer passes over the data: no needless copies, .contiguous() or recomputation.",
    ),
    "overhead": (
        "Launch fewer kernels: torch.compile; on a GPU, mode='reduce-overhead' (CUDA graphs).",
        "Fewer, larger ops: batch more (free here), vectorise loops, torch._foreach_*, fused=True.",
    ),
}
#: Added for memory-bound work whose bytes do not grow with the batch (weights dominate).
REUSE_REMEDY = "Batch more: each weight is read once per call, so more rows reuse it for free."
_TORCH_DTYPE = {"bf16": "bfloat16", "fp16": "float16"}


def precision_remedies(regime: str, used: str, ceilings: Any) -> tuple[str, ...]:
    """The essay's precision remedies that hold here: not the one in use, nor a slower one."""
    peaks, fast, out = ceilings.matmul_flops_per_s_by_dtype, ceilings.fast_precision, []
    if regime == "compute" and used in peaks:
        if used != "fp32" and not ceilings.fast_path(used):
            out.append(f"Run the matmuls in fp32: {ceilings.precision_note(used)}.")
        if fast not in ("fp32", used):
            how = f"torch.autocast('{ceilings.device}', dtype=torch.{_TORCH_DTYPE.get(fast)})"
            if fast == "tf32":
                how = "torch.set_float32_matmul_precision('high')"
            speedup = peaks[fast] / peaks[used]
            out.append(f"Use the faster units: {fast} matmuls ({how}), x{speedup:.1f} here.")
    if regime == "memory" and used in ("fp32", "fp64", "tf32") and fast in _TORCH_DTYPE:
        out.append(f"Store tensors in fewer bytes ({fast}, int8 weights): half the bytes to move.")
    return tuple(out)


@dataclass(frozen=True)
class Diagnosis:
    """A workload's measurements, and the regime, evidence and remedies they give."""

    timing: Any  # bl.benchmark of one call
    counts: Any  # bl.count of one call
    ceilings: Any
    trace: Any = None  # bl.profile of a few calls (probe c)
    batch_comparison: Any = None  # bl.compare against the doubled batch (probe b)
    batch_counts: Any = None  # bl.count of the doubled batch
    notes: tuple[str, ...] = ()
    label: str | None = None
    above: tuple[AboveFloor, ...] = ()  # measured: a floor above the time may time a torch.mm

    seconds = property(lambda self: self.timing.median_s)  # one call's, the median
    precision = property(lambda self: self.counts.precision)  # the roof it is judged against

    @cached_property
    def floors(self) -> Floors:
        """The three floors of one call (probe a)."""
        return floors(self.counts, self.ceilings)

    shares = property(lambda self: self.floors.shares(self.seconds))

    @cached_property
    def busy(self) -> BusyEvidence | None:
        """The device busy in the trace's steady runs (median); None without a trace."""
        tr = self.trace
        if tr is None or not tr.runs:
            return None
        steady, wall, outside = tr.steady_runs, tr.wall_s, tr.outside_ops_s
        busy = _fmt.median([tr.busy_fraction_per_run[r] for r in steady])
        shares = [outside[r] / wall[r] for r in steady if outside and wall[r] > 0] or [0.0]
        return BusyEvidence(tr.device, busy, _fmt.median(shares), max(tr.queued_s, default=0.0))

    @cached_property
    def batch(self) -> BatchEvidence | None:
        """The doubled batch's time read against its counted growth; None without the probe."""
        cmp, one, two = self.batch_comparison, self.counts, self.batch_counts
        if cmp is None:
            return None
        growth = {r: _fmt.ratio(getattr(two, n), getattr(one, n)) for r, n in _COUNTED.items()}
        (low, high), narrow, tol = cmp.interval, cmp.narrow, FOLLOW_TOLERANCE
        follows = frozenset(r for r, g in growth.items() if narrow and low / tol <= g <= high * tol)
        grew = narrow and not follows and low >= tol
        return BatchEvidence(cmp.ratio, low, high, narrow, growth, follows, high < FLAT, grew)

    @cached_property
    def verdict(self) -> Verdict:
        """The three probes weighed: ranking by (a), then (c) and (b)."""
        shares, busy, batch = self.shares, self.busy, self.batch
        follows = batch.follows if batch is not None else frozenset()
        idle = busy is not None and busy.busy < BUSY_LOW
        on_gpu = busy is not None and busy.device == "cuda"
        scores = dict(shares)
        if on_gpu and busy.busy < BUSY_HIGH:
            scores["overhead"] = max(scores["overhead"], busy.idle)
        regime, runner_up = sorted(REGIMES, key=lambda k: -scores[k])[:2]
        settles = [r for r in (regime, runner_up) if r in follows]
        # The time flat while the work doubled, and the device idle or every floor small: the
        # essay's batch test decides. (Flat bytes would be a GEMV's weights: memory, not overhead.)
        flat = regime != "overhead" and batch is not None and batch.flat
        bytes_grew = batch is not None and batch.growth["memory"] >= FOLLOW_TOLERANCE
        small = flat and bytes_grew and max(shares.values()) < HIGH_SHARE
        settled_by = IDLE_AND_FLAT if flat and idle else "flat batch" if small else ""
        if settled_by:
            regime, runner_up = "overhead", regime
        elif len(settles) == 1 and _fmt.ratio(scores[regime], scores[runner_up]) < MEDIUM_MARGIN:
            settled_by = "batch"  # the regime whose count the time followed leads
            regime, runner_up = sorted((regime, runner_up), key=lambda r: r not in follows)
        against: list[tuple[str, Any]] = []
        if follows and regime not in follows:
            against.append(("batch", _either(follows)))
        if regime == "overhead" and on_gpu and busy.busy >= BUSY_HIGH:
            against.append(("busy", busy.busy))
        if idle and regime != "overhead":
            against.append(("idle", busy.idle))
        top, margin = scores[regime], _fmt.ratio(scores[regime], scores[runner_up])
        if settled_by:  # the batch probe decided: sure only with an idle device besides
            levels = ("low", "medium", "high")
            confidence = levels[(2 if settled_by == IDLE_AND_FLAT else 1) - bool(against)]
        elif top >= HIGH_SHARE and margin >= HIGH_MARGIN and not against:
            confidence = "high"
        else:
            confidence = "medium" if margin >= MEDIUM_MARGIN and len(against) <= 1 else "low"
        return Verdict(regime, confidence, scores, runner_up, margin, tuple(against), settled_by)

    regime = property(lambda self: self.verdict.regime)
    confidence = property(lambda self: self.verdict.confidence)

    @property
    def remedies(self) -> tuple[str, ...]:
        """What to do in this regime, precision first (and batching, where weights dominate)."""
        regime, batch = self.regime, self.batch
        out = precision_remedies(regime, self.precision, self.ceilings) + REMEDIES[regime]
        if regime == "memory" and batch is not None and batch.growth["memory"] < FOLLOW_TOLERANCE:
            return (REUSE_REMEDY, *out)
        return out

    def plot(self, ax=None):
        """The workload on this machine's roofline, against the roof of its own precision."""
        from brrrlib import roofline

        c, name = self.counts, self.label or "workload"
        point = (name, c.flops, c.bytes_moved, self.seconds, self.precision)
        points = (roofline.RooflinePoint(*point),) if c.flops > 0 and c.bytes_moved > 0 else ()
        return roofline.plot(self.ceilings, points, ax=ax, title=name)

    def _page(self) -> tuple[str, list, list[str]]:
        """The headline; the evidence table's rows (floors, then the probes); the lines below."""
        v, t, c, fl, ceil = self.verdict, self.timing, self.counts, self.floors, self.ceilings
        by = f", settled by {v.settled_by}" if v.settled_by else ""
        name, regime = self.label or "workload", self.regime.upper()
        noisy = "NOISY" if t.noisy else "-"  # the timing's own judgement of its spread
        head = f"{name} on {t.device}: {regime}-bound ({self.confidence} confidence{by})"
        head += f" {noisy}" * t.noisy
        shares, special = self.shares, getattr(c, "special_by_function", dict)()
        lead, per_op = max(shares, key=shares.get), _fmt.seconds(ceil.op_overhead_s)
        table = (
            ("compute", f"{self.precision} roof", _fmt.si(c.flops, "FLOP"), fl.compute_s),
            ("memory", f"{fl.pattern} roof", _fmt.si(c.bytes_moved, "B"), fl.memory_s),
            ("overhead", f"{per_op}/op", f"{c.work_ops} ops", fl.overhead_s),
            *(
                (f"  {k}", _fmt.si(special[k] / s, "/s"), _fmt.si(special[k]), s)
                for k, s in fl.special_s.items()
            ),
        )
        rows = [("bl.benchmark", _fmt.seconds(self.seconds), f"IQR {t.relative_iqr:.0%}", noisy)]
        rows += [
            (
                f"{r}, {roof}",
                f"{n} >= {_fmt.seconds(s)}",
                f"{s / t.median_s:.0%}",
                r if r == lead else "-",
            )
            for r, roof, n, s in table
        ]
        if (b := self.busy) is not None:
            says = "overhead" if b.busy < BUSY_LOW else "-" if b.busy < BUSY_HIGH else _WORK
            queued = f", queued {_fmt.seconds(b.queued_s)}" if b.queued_s >= 10e-6 else ""
            evidence = f"{b.busy:.0%} busy, {b.outside_ops:.0%} outside ops{queued}"
            rows.append(("bl.profile", evidence, f"{b.idle:.0%} idle", says))
        if (b := self.batch) is not None:
            grew = ", ".join(f"{_COUNTED[r]} x{g:.2f}" for r, g in b.growth.items())
            evidence = f"{grew}: time x{b.time_ratio:.2f} (x{b.low:.2f}-x{b.high:.2f})"
            says = _WORK if b.work_grew else _either(b.follows) or "-"
            rows.append(("bl.compare", evidence, "flat" if b.flat else "", says))
        lines = [*(f"  {a}" for a in self.above), *(f"  note: {n}" for n in self.notes)]
        return head, rows, [*lines, "  remedies:", *(f"    - {r}" for r in self.remedies)]

    def __str__(self) -> str:
        head, rows, lines = self._page()
        return "\n".join([head, _fmt.text_table(_HEADER, rows), *lines])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        from matplotlib.figure import Figure  # pyplot-free: no stray plots

        head, rows, lines = self._page()
        fig = Figure(figsize=(5.0, 3.4), dpi=90)
        self.plot(ax=fig.add_subplot())
        return (
            f"<div><h3>{escape(head)}</h3>{_fmt.figure_img(fig, head, '480px')}"
            + _fmt.html_table(_HEADER, rows, tags={3: "b"})
            + "<br>".join(escape(line) for line in lines)
            + "</div>"
        )


_HEADER = ("probe", "evidence", "share", "says")


def _either(regimes: Collection[str]) -> str:
    """``"compute or memory"``: the regimes a probe could not tell apart, in REGIMES' order."""
    return " or ".join(r for r in REGIMES if r in regimes)


_WORK = "compute or memory"  # what a busy device or a time outgrowing the work says


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
    import torch

    from brrrlib import counting, timing
    from brrrlib import trace as tracing
    from brrrlib.ceilings import measure_ceilings

    dev = _check(fn, args, kwargs, ceilings, budget_s)
    label = label or getattr(fn, "__name__", type(fn).__name__).replace("<lambda>", "workload")
    say = _fmt.Progress(progress, 4 + int(batch_probe) + int(trace), f"diagnose {label}")
    say("bl.count")
    t0 = time.perf_counter()
    counts = counting.count(fn, *args, **kwargs)
    if counts.ops == 0:
        raise ValueError(f"fn={label!r} ran no torch operators: nothing to diagnose")
    few = time.perf_counter() - t0 > SLOW_CALL_S  # counted slowly: the fewest samples
    say("bl.benchmark")
    main = timing.benchmark(
        fn, *args, budget_s=budget_s, label=label, min_samples=3 if few else 5, **kwargs
    )
    # the batch probe's paired rounds: 10, or as many as a slow call fits in the time limit
    # (about 15 calls besides: counting both batches, timing, estimates, the trace; 3 a round)
    slow = main.median_s > SLOW_CALL_S
    rounds = max(3, min(10, int(time_limit_s / main.median_s - 15) // 3))
    notes = [f"slow call ({_fmt.seconds(main.median_s)}): {rounds} batch rounds"] * slow
    if isinstance(fn, torch.nn.Module) and fn.training:
        if any(isinstance(m, torch.nn.modules.dropout._DropoutNd) for m in fn.modules()):
            notes.append("dropout in training mode: model.eval() first")
    say(f"ceilings: {getattr(ceilings, 'device_name', 'bl.measure_ceilings')}")
    if ceilings is None:
        ceilings = measure_ceilings(dev, progress=progress)
    comparison = batch_counts = tr = None
    if batch_probe:
        say("bl.compare")
        comparison, batch_counts = _run_batch_probe(
            fn, args, kwargs, 4 * budget_s, rounds, notes, warm=slow
        )
    if trace:
        say("bl.profile")
        tr = tracing.profile(fn, *args, runs=3 - slow, warmup=int(not slow), label=label, **kwargs)
    say("verdict")
    notes = (*notes, *floors(counts, ceilings).notes, *counts.notes)
    above = above_floors(counts, main.median_s, ceilings)
    return Diagnosis(main, counts, ceilings, tr, comparison, batch_counts, notes, label, above)


def _check(fn, args, kwargs, ceilings, budget_s) -> Any:
    """Refuse what cannot be diagnosed before measuring anything; the workload's device."""
    import torch

    from brrrlib import machine
    from brrrlib.ceilings import Ceilings

    _checks.function("fn", fn)
    if ceilings is not None:  # a spec sheet has no overhead ceiling
        _checks.kind("ceilings", ceilings, Ceilings, "bl.measure_ceilings()")
    _checks.seconds("budget_s", budget_s)
    found = {str(t.device) for t in _tensors((args, kwargs))}
    if isinstance(fn, torch.nn.Module):
        found |= {str(p.device) for p in fn.parameters()}
    if len({torch.device(d).type for d in found}) > 1:
        where = ", ".join(sorted(found))
        raise ValueError(f"fn's tensors are on {where}: an op needs its inputs on one device")
    dev = machine.of(args, kwargs)
    if ceilings is not None and ceilings.device != dev.type:
        raise ValueError(f"ceilings are of a {ceilings.device}, fn runs on {dev.type}: omit them")
    return dev


def _run_batch_probe(fn, args, kwargs, budget_s, rounds, notes, warm):
    """Compare ``fn`` with its doubled batch; (None, None) and a note when it cannot run."""
    from brrrlib import counting, machine, timing

    try:
        doubled = double_batch(args, kwargs)
        if doubled is None:
            notes.append("batch probe skipped: no tensor argument to double")
            return None, None
        batch_counts = counting.count(fn, *doubled[0], **doubled[1])
        calls = [functools.partial(fn, *a, **k) for a, k in ((args, kwargs), doubled)]
        comparison = timing.compare(
            *calls, budget_s=budget_s, min_rounds=rounds, labels=("batch", "doubled"), warm=warm
        )
    except Exception as err:  # noqa: BLE001 -- an assert, a KeyError, out of memory: skip, say why
        fix = "pass weights inside fn (a closure), not as arguments"
        if machine.is_out_of_memory(err):
            machine.release_cached_memory()
            size = sum(t.numel() * t.element_size() for t in _tensors((args, kwargs)) if t.dim())
            fix = f"doubled inputs {_fmt.binary_bytes(2 * size)}; cached memory released"
        notes.append(f"batch probe skipped: {type(err).__name__}: {_fmt.error_line(err)}; {fix}")
        return None, None
    return comparison, batch_counts


def _tensors(tree: Any) -> list:
    """Every tensor in nested tuples, lists and dicts."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]


def double_batch(args: tuple, kwargs: dict):
    """Every tensor argument with a dimension, repeated along dim 0; None if there is none."""
    import torch
    from torch.utils._pytree import tree_map

    def double(v):  # a leaf keeps requires_grad; a graph's intermediate comes out detached
        if not isinstance(v, torch.Tensor) or v.dim() == 0:
            return v
        return torch.cat([v.detach()] * 2).requires_grad_(v.is_leaf and v.requires_grad)

    if not any(t.dim() for t in _tensors((args, kwargs))):
        return None
    return tree_map(double, (args, kwargs))
