"""Declarative sweeps, as triton's ``perf_report``: one parameter swept, a few lines compared."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from brrrlib import _checks, _fmt, counting, machine, timing
from brrrlib.timing import Comparison, Timing

__all__ = ["Sweep", "sweep", "workload_sweep"]


# ------------------------------------------------------------------ points: what one runs, what it measured

#: Seconds of warm-up before a point is timed (a freshly compiled kernel asks for more).
POINT_WARMUP_S = 0.02

# What became of a point: evidence as data; the words are in Point.reason.
MEASURED, TOO_SLOW, NO_MEMORY = "measured", "too_slow", "no_memory"
_STATUSES = (MEASURED, TOO_SLOW, NO_MEMORY)


@dataclass(frozen=True)
class Case:
    """What one point runs: a zero-argument call and the work one call does."""

    fn: Callable[[], Any]
    flops: int  # per call
    bytes_moved: int  # per call
    device: torch.device
    label: str = ""
    warmup_s: float = POINT_WARMUP_S
    no_grad: bool = False  # autograd off around the whole measurement
    size: int = 0  # elements per input
    weight_bytes: int = 0  # read every call, whatever x
    ops: int = 0  # op calls per call
    compile_s: float | None = None  # the first, untimed call of a compiled function


@dataclass(frozen=True, repr=False)
class Point:
    """One point of a sweep: measured, or not measured and why (its rates then raise)."""

    x: int
    line: str
    device: str
    timing: Timing | None = None  # None unless status is "measured"
    flops: int = 0
    bytes_moved: int = 0
    predicted_s: float | None = None
    status: str = MEASURED
    reason: str = ""  # why not measured, in words; on a measured point "" or a note
    size: int = 0
    weight_bytes: int = 0
    ops: int = 0
    compile_s: float | None = None
    cpu_share: float | None = None

    def __post_init__(self) -> None:
        ok = self.status in _STATUSES and (self.timing is not None) == (self.status == MEASURED)
        if not ok or not (self.timing or self.reason):
            raise ValueError(
                f"status={self.status!r}: measured needs a timing, else needs a reason"
            )

    @property
    def measured(self) -> bool:
        """True when the point has a timing."""
        return self.status == MEASURED

    @property
    def waited(self) -> bool:
        """True when a CPU measurement waited for cores (``cpu_share`` below ``WAITED_SHARE``)."""
        return self.cpu_share is not None and self.cpu_share < timing.WAITED_SHARE

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        if self.timing is None:
            raise ValueError(f"{self.line} at x={self.x} was not measured: {self.reason}")
        return self.timing.median_s

    @property
    def achieved_flops_per_s(self) -> float:
        """Counted FLOPs over the median time."""
        return self.flops / self.median_s

    @property
    def achieved_bytes_per_s(self) -> float:
        """Counted bytes moved over the median time: compare with the bandwidth ceiling."""
        return self.bytes_moved / self.median_s

    @property
    def intensity_flops_per_byte(self) -> float:
        """FLOPs per byte moved: the point's place on the roofline's x axis."""
        return self.flops / self.bytes_moved if self.bytes_moved else math.inf

    @property
    def per_x_s(self) -> float:
        """Median seconds per unit of ``x``: the time per sample when ``x`` is the batch."""
        return self.median_s / self.x

    @property
    def model_ratio(self) -> float | None:
        """Measured time over the model's time (None without a model or a timing)."""
        no_model = self.predicted_s is None or self.timing is None
        return None if no_model else self.median_s / self.predicted_s

    def __repr__(self) -> str:
        said = [f"{self.status}: {self.reason}"]
        if self.measured:
            said = [_fmt.seconds(self.median_s), _fmt.si(self.achieved_bytes_per_s, "B/s")]
            said.append(_fmt.si(self.achieved_flops_per_s, "FLOP/s"))
        return f"Point({', '.join([f'x={self.x}', f'line={self.line!r}', self.device, *said])})"


@dataclass(frozen=True)
class Pair:
    """Two points timed together in alternating rounds: ``comparison.ratio`` is b's time over a's."""

    a: tuple[int, str]
    b: tuple[int, str]
    comparison: Comparison
    remeasured: bool = False  # measured a second time because the first looked implausible


def waited_words(*points: Point | None) -> str:
    """Words for measurements that waited for cores (see ``Point.waited``); "" if none did."""
    said = timing.waited_caveat(min((p.cpu_share for p in points if p and p.waited), default=None))
    return said and f"{said}; close it or re-measure"


#: Seconds of timed runs for a point alone (bl.benchmark's budget_s): a slider move stays short.
POINT_BUDGET_S = 0.15
#: At most this many seconds of alternating rounds for a pair (bl.compare's budget_s).
COMPARE_BUDGET_S = 2.0
#: More work may measure this much faster unquestioned (two sizes may get different code).
SLACK = 0.1

# y= of Sweep.plot: (the Point attribute, the axis label, the unit, the model's divisor or None)
_Y = {
    "time": ("median_s", "s/call", "s", lambda x: 1),
    "per_x": ("per_x_s", "s/{x}", "s", lambda x: x),
    "flops": ("achieved_flops_per_s", "FLOP/s", "FLOP/s", None),
    "bytes": ("achieved_bytes_per_s", "B/s", "B/s", None),
}


#: A sweep table's columns after x.
_COLUMNS = "line", "median", "model", "measured/model", "FLOP/s", "B/s", "CPU", "note"


@dataclass(frozen=True, repr=False)
class Sweep:
    """The result of :func:`sweep`: every point, the pairs, the model; a table and a plot."""

    x_name: str
    x_label: str
    points: tuple[Point, ...]
    pairs: tuple[Pair, ...] = ()
    predicted: tuple[tuple[int, str, float], ...] = ()  # (x, line, the model's seconds)
    title: str = ""

    @property
    def lines(self) -> tuple[str, ...]:
        """The lines, in the order they first appear."""
        keys = [p.line for p in self.points] + [line for _x, line, _p in self.predicted]
        return tuple(dict.fromkeys(keys))

    def point(self, x: int, line: str) -> Point | None:
        """The point at ``x`` on ``line``, or None if the sweep never got there."""
        return next((p for p in self.points if (p.x, p.line) == (x, line)), None)

    def line(self, line: str) -> tuple[Point, ...]:
        """The points of one line, by ``x``."""
        return tuple(sorted((p for p in self.points if p.line == line), key=lambda p: p.x))

    def comparison(self, a: tuple[int, str], b: tuple[int, str]) -> Comparison | None:
        """The paired comparison of ``b`` against ``a`` (b's time over a's), if measured."""
        return next((q.comparison for q in self.pairs if (q.a, q.b) == (a, b)), None)

    def says(self, a: tuple[int, str], b: tuple[int, str]) -> str:
        """``b`` against ``a`` in words: the comparison's, or why no ratio can be read."""
        c = self.comparison(a, b)
        return "not measured together" if c is None else c.says()

    def without(self, keys: Iterable[tuple[int, str]]) -> Sweep:
        """This sweep without the points at ``keys`` and the pairs they were in (to re-measure)."""
        drop = set(keys)
        return replace(
            self,
            points=tuple(p for p in self.points if (p.x, p.line) not in drop),
            pairs=tuple(q for q in self.pairs if q.a not in drop and q.b not in drop),
        )

    # -- rendering ------------------------------------------------------------------
    def _rows(self) -> list[tuple[str, ...]]:
        def row(p: Point) -> tuple[str, ...]:
            if not p.measured:
                return (str(p.x), p.line, *"-----", "", f"{p.status}: {p.reason}")
            m, r, c = p.predicted_s, p.model_ratio, p.cpu_share
            model = "-" if m is None else _fmt.seconds(m), "-" if r is None else f"x{r:.2f}"
            rates = (
                _fmt.si(p.achieved_flops_per_s, "FLOP/s"),
                _fmt.si(p.achieved_bytes_per_s, "B/s"),
            )
            share = "" if c is None else f"{c:.0%}"
            return (str(p.x), p.line, _fmt.seconds(p.median_s), *model, *rates, share, p.reason)

        return [row(p) for p in sorted(self.points, key=lambda p: (self.lines.index(p.line), p.x))]

    def _table(self) -> tuple[list[str], tuple[str, ...], list[tuple[str, ...]], str]:
        x = self.x_name
        says = [
            f"{x} {q.b[0]} {q.b[1]} vs {q.a[0]} {q.a[1]}: {q.comparison.says()}" for q in self.pairs
        ]
        return says, (x, *_COLUMNS), self._rows(), "r" * 8

    def table(self) -> str:
        """The points as a text table, one row per point, with the pairs' verdicts below."""
        says, header, rows, align = self._table()
        return "\n".join([_fmt.text_table(header, rows, align), *says])

    __repr__ = table

    def _repr_html_(self) -> str:
        says, header, rows, align = self._table()
        return _fmt.html_table(header, rows, caption="; ".join(says), align=align)

    def plot(
        self, ax: Any = None, *, y: str = "time", colours: dict | None = None, legend: bool = True
    ) -> Any:
        """Each line against ``x``, model dashed; ``y``: "time", "per_x", "flops" or "bytes"."""
        attr, label, unit, per = _Y[_checks.one_of("y", y, _Y)]
        from matplotlib import ticker

        if ax is None:
            import matplotlib.pyplot as plt

            _fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
        ax.set_xscale("log", base=2)  # before plotting: one point on a log axis is fine then
        ax.set_yscale("log")
        for i, name in enumerate(self.lines):
            colour = (colours or {}).get(name, f"C{i}")
            model = sorted((x, s) for x, line, s in self.predicted if line == name and per)
            if model:
                xs, ys = [x for x, _ in model], [s / per(x) for x, s in model]
                ax.plot(xs, ys, "--", color=colour, lw=1.0, alpha=0.7, label=f"{name} (model)")
            if pts := [p for p in self.line(name) if p.measured]:
                xs, ys = [p.x for p in pts], [getattr(p, attr) for p in pts]
                ax.plot(xs, ys, "o-", color=colour, lw=1.2, label=f"{name} (measured)")
        ax.set_xlabel(self.x_label or self.x_name)
        ax.set_ylabel(label.format(x=self.x_name))
        _fmt.plain_x_ticks(ax)  # y: "20 ms", "5 GB/s"; 1-2-5 ticks over up to three decades
        low, high = ax.dataLim.intervaly  # the data's extent (get_ylim would autoscale now)
        few = low > 0 and high > low and math.log10(high / low) <= 3
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0) if few else (1.0,)))
        ax.yaxis.set_major_formatter(ticker.EngFormatter(unit=unit))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(True, alpha=0.25)
        if self.title:
            ax.set_title(self.title, fontsize=10)
        if legend:
            ax.legend(fontsize=8)
        return ax


# ------------------------------------------------------------------ measuring


def sweep(
    x_name: str,
    x_values: Sequence[int],
    lines: Sequence[str],
    setup: Callable[[int, str], Case],
    *,
    pairs: Sequence[tuple[tuple[int, str], tuple[int, str]]] = (),
    predict: Callable[[int, str], float] | None = None,
    skip: Callable[[int, str], str | None] | None = None,
    memory: Callable[[int, str], int] | None = None,
    device: str | torch.device | None = None,
    budget_s: float = POINT_BUDGET_S,
    into: Sweep | None = None,
    x_label: str = "",
    title: str = "",
    progress: bool = False,
) -> Sweep:
    """Measure every ``line`` at every ``x`` through ``setup(x, line) -> Case``; returns a Sweep."""
    _checks.some("x_values", x_values, "[1, 2, 4]")
    _checks.some("lines", lines, "['eager']")
    if into is not None and into.x_name != x_name:
        raise ValueError(f"into= holds a sweep over {into.x_name!r}, not {x_name!r}")
    old = into or Sweep(x_name, "", ())
    run = _Run(setup, skip, memory, machine.resolve(device), budget_s, old)
    keys = list(itertools.product(x_values, lines))
    say = _fmt.Progress(progress, len(keys), prefix=f"sweep {x_name}")
    # 1. the model
    predicted = {(x, line): s for x, line, s in old.predicted}
    if predict is not None:
        predicted.update({k: predict(*k) for k in [*keys, *(k for pair in pairs for k in pair)]})
    run.predicted = predicted
    # 2. pairs, measured together
    for a, b in pairs:
        if (a, b) not in run.pairs:
            run.measure(a, b)
    # 3. every other point, alone
    for key in keys:
        if key not in run.points or not run.points[key].measured:
            run.measure(key)
        say(repr(run.points[key]))
    # 4. implausible neighbours, measured again paired
    for line in lines:
        run.recheck(line)
    model = tuple((x, line, p) for (x, line), p in predicted.items())
    measured, paired = tuple(run.points.values()), tuple(run.pairs.values())
    return Sweep(x_name, x_label or old.x_label, measured, paired, model, title or old.title)


def workload_sweep(
    x_name: str,
    x_values: Sequence[int],
    lines: Mapping[str, Callable[[int], tuple]],
    *,
    pairs: Sequence[tuple[tuple[int, str], tuple[int, str]]] = (),
    x_label: str = "",
) -> Sweep:
    """A :func:`sweep` of workload factories ``lines[name](x) -> (fn, args)``, each counted."""
    _checks.some("lines", lines, "dict(eager=make_workload)")

    def setup(x: int, line: str) -> Case:
        fn, args = lines[line](x)[:2]
        n, label = counting.count(fn, *args), f"{line} {x_name}={x}"
        call, dev = functools.partial(fn, *args), machine.of(args)
        return Case(call, int(n.flops), int(n.bytes_moved), dev, label, size=x, ops=int(n.ops))

    return sweep(x_name, x_values, list(lines), setup, pairs=pairs, x_label=x_label)


class _Run:
    """The working state of one :func:`sweep` call: points and pairs by key."""

    def __init__(self, setup, skip, memory, dev, budget_s, old: Sweep) -> None:
        self.setup, self.skip, self.memory, self.dev = setup, skip, memory, dev
        self.x_name = old.x_name
        self.budget_s = budget_s
        self.points = {(p.x, p.line): p for p in old.points if p.measured}
        self.pairs = {(q.a, q.b): q for q in old.pairs}
        self.predicted: dict = {}
        self.fresh: set[tuple[int, str]] = set()

    def refused(self, keys: Sequence[tuple[int, str]]) -> bool:
        """Record why ``keys`` cannot be measured now (too slow, no memory); False if they can."""
        for key in keys:
            reason = self.skip(*key) if self.skip is not None else None
            if reason:
                self._unmeasured(key, TOO_SLOW, reason)
                return True
        if self.memory is None or not (needed := sum(self.memory(*key) for key in keys)):
            return False  # nothing to allocate: nothing to refuse
        try:
            machine._refuse_over_headroom(needed, self.dev, f"{self.x_name}={keys[-1][0]}", "size")
        except ValueError as err:
            self._unmeasured(keys[-1], NO_MEMORY, str(err))
            return True
        return False

    def _unmeasured(self, key, status: str, reason: str) -> None:
        if key not in self.points or not self.points[key].measured:
            predicted = self.predicted.get(key)
            self.points[key] = Point(*key, str(self.dev), None, 0, 0, predicted, status, reason)

    def _keep(self, key, case: Case, t: Timing) -> None:
        self.fresh.add(key)
        names = ("flops", "bytes_moved", "size", "weight_bytes", "ops", "compile_s")
        work = {k: getattr(case, k) for k in names} | {"predicted_s": self.predicted.get(key)}
        share = t.cpu_share if case.device.type == "cpu" else None
        self.points[key] = Point(*key, str(case.device), t, cpu_share=share, **work)

    def measure(self, *keys, remeasured: bool = False) -> Pair | None:
        """2. to 4.: one point timed by bl.benchmark, or two together by bl.compare."""
        if self.refused(keys):
            return None
        with _out_of_memory(self, keys):
            cases = [self.setup(*k) for k in keys]
            how = dict(warmup_s=max(c.warmup_s for c in cases), device=cases[0].device)
            with torch.no_grad() if cases[0].no_grad else contextlib.nullcontext():
                if len(cases) == 1:
                    label = cases[0].label or None
                    timed = [
                        timing.benchmark(cases[0].fn, budget_s=self.budget_s, label=label, **how)
                    ]
                else:
                    zipped = zip(cases, keys, strict=True)
                    labels = tuple(c.label or f"{k[1]} at {k[0]}" for c, k in zipped)
                    fns = (c.fn for c in cases)
                    pair = timing.compare(*fns, budget_s=COMPARE_BUDGET_S, labels=labels, **how)
                    self.pairs[keys] = Pair(*keys, pair, remeasured)
                    timed = [pair.a, pair.b]
            for key, case, t in zip(keys, cases, timed, strict=True):
                self._keep(key, case, t)
        return self.pairs.get(keys)

    def recheck(self, line: str) -> None:
        """4.: neighbours on ``line`` where more work took clearly less time, measured paired."""
        pts = [p for p in self.points.values() if p.line == line and p.measured]
        pts.sort(key=lambda p: p.x)
        for lo, hi in zip(pts, pts[1:], strict=False):
            a, b = (lo.x, line), (hi.x, line)
            known = self.pairs.get((a, b))
            # more work (hi) clearly faster than less (lo): beyond the interval, or both spreads
            if known is not None:
                implausible = not known.remeasured and known.comparison.below(1 - SLACK)
            else:
                implausible = hi.timing.quantile(0.75) < (1 - SLACK) * lo.timing.quantile(0.25)
            if not ({a, b} & self.fresh) or not implausible:
                continue
            q = self.measure(a, b, remeasured=True)
            if q is not None and q.comparison.below(1 - SLACK):
                self.points[b] = replace(
                    self.points[b],
                    reason=f"faster than {lo.x} when paired ({q.comparison.says()}): other code",
                )


@contextlib.contextmanager
def _out_of_memory(run: _Run, keys) -> Iterator[None]:
    """Turn running out of memory into a point that says so, after releasing cached blocks."""
    try:
        yield
    except Exception as exc:  # only an allocation failure is caught; anything else goes on up
        if not machine.is_out_of_memory(exc):
            raise
        machine.release_cached_memory(run.dev)
        needed = sum(run.memory(*k) for k in keys) if run.memory else 0
        size = f" (needs {_fmt.binary_bytes(needed)})" * bool(needed)
        why = f"out of memory{size}: {_fmt.error_line(exc)}; pick a smaller size"
        run._unmeasured(keys[-1], NO_MEMORY, why)
