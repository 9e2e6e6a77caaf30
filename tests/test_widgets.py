"""Tests for brrrlib.sweeps and the explorers of brrrlib.widgets (chapters 02 and 03).

Most tests run the real measuring path (bl.benchmark, bl.compare) on a fake
clock: each fake workload advances the clock by the seconds it is meant to
take, so every timing, ratio and interval is known exactly and nothing depends
on how busy the machine is. They check the logic: what is measured, what is
paired, what is re-measured, what the readout says. A few smoke tests measure
tiny workloads for real and assert orderings with wide margins.
"""

from __future__ import annotations

import base64
import importlib.util
from pathlib import Path

import pytest
import torch
from _fakes import fake_ceilings
from matplotlib.figure import Figure
from torch import nn

import brrrlib as bl
from brrrlib import _fmt, machine, sweeps, timing, widgets
from brrrlib.sweeps import Case
from brrrlib.widgets import _batch_explorer, _explorer

PNG_MAGIC = b"\x89PNG"
# Doubling.reading's verdicts that are two words (the others are one)
CANT_TELL, OTHER_CODE = "can't tell", "other code"
CPU = torch.device("cpu")


class FakeClock:
    """Wall and CPU clocks that only move when a fake workload runs."""

    def __init__(self, cpu_share: float = 1.0) -> None:
        self.now, self.cpu_s, self.cpu_share = 0.0, 0.0, cpu_share

    def wall(self) -> float:
        return self.now

    def cpu(self) -> float:
        return self.cpu_s

    def work(self, *seconds: float):
        """A zero-argument call taking ``seconds`` (cycling through them, call by call)."""
        calls = [0]

        def call() -> None:
            s = seconds[calls[0] % len(seconds)]
            calls[0] += 1
            self.now += s
            self.cpu_s += s * self.cpu_share

        return call


@pytest.fixture
def make_clock(monkeypatch):
    """Install a FakeClock: a seam, so that the timings do not depend on this machine's load."""

    def make(cpu_share: float = 1.0) -> FakeClock:
        c = FakeClock(cpu_share)
        monkeypatch.setattr(timing, "_CLOCKS", (c.wall, c.cpu))
        return c

    return make


@pytest.fixture
def clock(make_clock):
    return make_clock()


@pytest.fixture
def ceilings(monkeypatch):
    """A plausible laptop: 40 GFLOP/s vector, 10 GB/s, 5 µs per op (knee at repeat 32), and
    a 32 MiB last-level cache (the explorers size their data past it: on a CPU that reports
    a 480 MiB one, 1 GiB tensors whose repeat points take too long to measure)."""
    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda device=None: 32 * 2**20)
    return fake_ceilings(
        device_name="test CPU",
        vector_flops_per_s=40e9,
        mem_bandwidth_bytes_per_s=10e9,
        op_overhead_s=5e-6,
    )


@pytest.fixture(autouse=True)
def fast_png(request, monkeypatch):
    """Skip rasterising (the slow part of a redraw) except in tests that ask for real_png: a seam
    for speed only.

    The figure is still built, so the drawing code runs; each "PNG" is
    distinct, so a test can still see that a move redrew the plot.
    """
    if "real_png" in request.fixturenames:
        return
    counter = iter(range(10**9))
    monkeypatch.setattr(_explorer, "_render", lambda canvas: None)
    monkeypatch.setattr(_explorer, "_png", lambda canvas: PNG_MAGIC + b"%d" % next(counter))


@pytest.fixture
def real_png():
    """Marker fixture: this test renders real PNG bytes (see fast_png)."""


@pytest.fixture
def plenty_of_memory(monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 64 * 2**30)


class FakeRepeat:
    """Records every (size, repeat, mode) set up; its calls take a roofline-shaped fake time."""

    def __init__(self, clock: FakeClock, fail: BaseException | None = None, scale=None) -> None:
        self.clock, self.fail, self.calls = clock, fail, []
        self.scale = scale or {}  # (repeat, mode) -> factor on the time, or a tuple to cycle

    def __call__(self, *, size, repeat, mode, device):
        self.calls.append((size, repeat, mode))
        if self.fail is not None:
            raise self.fail
        one_pass_s = 8 * size / 10e9
        t = repeat * one_pass_s if mode == "eager" else max(one_pass_s, repeat * size / 40e9)
        factors = self.scale.get((repeat, mode), 1.0)
        factors = factors if isinstance(factors, tuple) else (factors,)
        moved = (repeat if mode == "eager" else 1) * 8 * size
        return Case(self.clock.work(*(t * f for f in factors)), repeat * size, moved, CPU,
                    size=size, ops=repeat if mode == "eager" else 1)  # fmt: skip


def _repeat(ceilings, fake, **kwargs):
    return widgets.repeat_explorer(device="cpu", ceilings=ceilings, setup=fake, **kwargs)


# ------------------------------------------------------------------ sweeps


def test_sweep_measures_each_point_once_and_reuses_it(clock):
    made = []

    def setup(x, line):
        made.append((x, line))
        return Case(clock.work(1e-3 * x * (2 if line == "slow" else 1)), 100 * x, 800 * x, CPU)

    first = sweeps.sweep("n", [1, 2, 4], ["fast", "slow"], setup, x_label="n (items)")
    assert len(first.points) == 6 and all(p.measured for p in first.points)
    assert first.point(4, "slow").median_s == pytest.approx(8e-3)
    assert first.point(2, "fast").achieved_flops_per_s == pytest.approx(100 * 2 / 2e-3)
    assert first.point(2, "fast").achieved_bytes_per_s == pytest.approx(800 * 2 / 2e-3)
    again = sweeps.sweep("n", [1, 2, 4, 8], ["fast", "slow"], setup, into=first)
    assert made[6:] == [(8, "fast"), (8, "slow")]  # nothing measured twice
    assert [p.x for p in again.line("fast")] == [1, 2, 4, 8]


def test_sweep_pairs_are_measured_together_with_an_interval(clock):
    setup = lambda x, line: Case(clock.work(1e-3 * x), x, x, CPU)  # noqa: E731
    result = sweeps.sweep("n", [2], ["l"], setup, pairs=[((1, "l"), (2, "l"))])
    c = result.comparison((1, "l"), (2, "l"))
    assert c.ratio == pytest.approx(2.0) and c.decided and c.above(1.7)
    # both points carry the paired timings, one sample per round
    assert result.point(1, "l").timing is c.a and result.point(2, "l").timing is c.b
    assert c.says() in result.table()


def test_sweep_skipped_point_says_why_never_nan(clock, real_png):
    import matplotlib

    matplotlib.use("Agg")
    setup = lambda x, line: Case(clock.work(1e-3 * x), x, 8 * x, CPU)  # noqa: E731
    why, x_label = "too slow here", "repeat (count)"
    result = sweeps.sweep(
        "repeat", [1, 64], ["eager"], setup, skip=lambda x, _l: why if x > 8 else None,
        predict=lambda x, _l: 1e-3 * x, x_label=x_label,
    )  # fmt: skip
    skipped = result.point(64, "eager")
    assert skipped.status == sweeps.TOO_SLOW and skipped.reason == why
    assert "nan" not in result.table().lower() and why in result.table()
    with pytest.raises(ValueError, match="was not measured: too slow here"):
        _ = skipped.median_s
    assert result.point(1, "eager").model_ratio == pytest.approx(1.0)
    ax = result.plot(y="time")
    assert ax.get_xlabel() == x_label and "s/" in ax.get_ylabel()
    model, measured = [t.get_text() for t in ax.get_legend().get_texts()]  # the model first
    assert "eager" in model and "model" in model and "eager" in measured and "measured" in measured
    assert result._repr_html_().count("<tr") == 1 + len(result.points)
    with pytest.raises(ValueError, match="y must be one of"):
        result.plot(ax, y="speed")


def test_sweep_remeasures_implausible_neighbours_paired(clock):
    # x=4 is meant to take 4 ms but measures 1 ms when alone: less time for more work.
    alone = {"n": 0}

    def setup(x, line):
        if x == 4 and alone["n"] == 0:
            alone["n"] += 1
            return Case(clock.work(1e-3), x, x, CPU)
        return Case(clock.work(1e-3 * x), x, x, CPU)

    result = sweeps.sweep("n", [2, 4], ["l"], setup)
    assert result.comparison((2, "l"), (4, "l")).ratio == pytest.approx(2.0)
    assert result.point(4, "l").median_s == pytest.approx(4e-3)  # the paired timing is kept


def test_sweep_keeps_a_confirmed_drop_with_a_note(clock):
    setup = lambda x, line: Case(clock.work(1e-3 if x == 4 else 2e-3), x, x, CPU)  # noqa: E731
    result = sweeps.sweep("n", [2, 4], ["l"], setup)
    (pair,) = result.pairs
    assert pair.remeasured and pair.comparison.below(1 - sweeps.SLACK)  # a confirmed drop
    assert pair.comparison.says() in result.point(4, "l").reason  # kept, with the paired ratio


def test_sweep_refuses_what_does_not_fit_before_allocating(clock, monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 1000)
    made = []
    result = sweeps.sweep(
        "n", [1], ["l"], lambda x, _line: made.append(x), memory=lambda x, _line: 2**30
    )
    p = result.point(1, "l")
    assert made == [] and p.status == sweeps.NO_MEMORY
    assert _fmt.binary_bytes(2**30) in p.reason and "smaller" in p.reason


def test_sweep_never_refuses_a_point_that_allocates_nothing(clock, monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: -1)  # MPS can read so
    setup = lambda x, line: Case(clock.work(1e-3), x, x, CPU)  # noqa: E731
    result = sweeps.sweep("n", [1, 2], ["l"], setup, memory=lambda x, _line: 0)
    assert [p.status for p in result.points] == [sweeps.MEASURED] * 2


def test_sweep_out_of_memory_releases_cached_blocks(clock, monkeypatch):
    released = []
    monkeypatch.setattr(bl.machine, "release_cached_memory", lambda dev: released.append(dev))

    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def setup(x, line):
        raise oom

    result = sweeps.sweep("n", [1], ["l"], setup, memory=lambda x, _line: 3 * 2**20)
    p = result.point(1, "l")
    assert released == [CPU] and p.status == sweeps.NO_MEMORY
    assert _fmt.binary_bytes(3 * 2**20) in p.reason and str(oom) in p.reason


def test_point_checks_itself():
    with pytest.raises(ValueError, match="needs a reason"):
        sweeps.Point(x=1, line="l", device="cpu", status=sweeps.TOO_SLOW)
    with pytest.raises(ValueError, match="needs a timing"):
        sweeps.Point(x=1, line="l", device="cpu")
    p = sweeps.Point(x=4, line="fused", device="cpu", timing=_timing(2e-6), flops=4000,
                     bytes_moved=8000, cpu_share=0.5)  # fmt: skip
    assert p.achieved_flops_per_s == pytest.approx(2e9)
    assert p.achieved_bytes_per_s == pytest.approx(4e9)
    assert p.intensity_flops_per_byte == pytest.approx(0.5) and p.per_x_s == pytest.approx(5e-7)
    assert p.waited and "GB/s" in repr(p)


def _timing(seconds: float) -> bl.Timing:
    return bl.Timing(samples_s=(seconds,) * 5, device="cpu", label="fake")


def test_workload_sweep_counts_each_point_and_times_its_call(clock):
    made = []

    def factory(scale):
        def make(n):
            made.append((n, scale))
            x = torch.ones(n)
            return (lambda t: (clock.work(scale * 1e-6 * t.numel())(), t.mul_(1.0))[1]), (x,)

        return make

    res = sweeps.workload_sweep("n", [1000, 4000], {"fast": factory(1), "slow": factory(3)},
                                pairs=[((4000, "fast"), (4000, "slow"))])  # fmt: skip
    assert sorted(made) == [(1000, 1), (1000, 3), (4000, 1), (4000, 3)]  # each point built once
    p = res.point(4000, "slow")
    assert p.bytes_moved == 8 * 4000 and p.flops == 4000  # bl.count of x.mul_(1.0): 1 FLOP, 8 B
    assert p.median_s == pytest.approx(3 * 4e-3)
    assert res.comparison((4000, "fast"), (4000, "slow")).ratio == pytest.approx(3.0)
    with pytest.raises(ValueError, match="lines"):
        sweeps.workload_sweep("n", [1], {})


# ------------------------------------------------------------------ repeat explorer


def test_repeat_dom_contract(clock, ceilings, plenty_of_memory, real_png):
    ex = _repeat(ceilings, FakeRepeat(clock))
    assert "brrr-repeat-explorer" in ex.widget._dom_classes
    images = [w for w in _descendants(ex.widget) if "brrr-plot" in w._dom_classes]
    assert len(images) == 1 and bytes(images[0].value).startswith(PNG_MAGIC)
    p = ex.current
    assert (p.x, p.line) == (1, "eager")
    assert _fmt.si(p.achieved_bytes_per_s, "B/s") in ex.readout
    assert _fmt.si(p.achieved_flops_per_s, "FLOP/s") in ex.readout
    assert "brrr-error" not in _part(ex, "brrr-readout")._dom_classes
    sliders = [w for w in _descendants(ex.widget) if getattr(w, "description", "") == "repeat"]
    assert sliders and sliders[0].continuous_update is False
    buttons = [w for w in _descendants(ex.widget) if getattr(w, "description", "") == "re-measure"]
    assert len(buttons) == 1


def test_repeat_readout_states_model_and_ratio(clock, ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(clock, scale={(1, "eager"): 1.25}))
    p = ex.current
    # model: 8 B/element at 10 GB/s plus 5 µs of op overhead
    assert p.predicted_s == pytest.approx(8 * ex.size / 10e9 + 5e-6)
    assert p.model_ratio == pytest.approx(1.25, rel=0.01)
    assert _fmt.times(p.model_ratio) in ex.readout


def test_repeat_measures_initial_point_once_and_caches(clock, ceilings, plenty_of_memory):
    fake = FakeRepeat(clock)
    ex = _repeat(ceilings, fake)
    size = ex.size
    assert fake.calls == [(size, 1, "eager")]
    ex.set(repeat=8)
    ex.set(repeat=1)
    ex.set(repeat=8)
    assert fake.calls == [(size, 1, "eager"), (size, 8, "eager")]
    assert [(p.x, p.line) for p in ex.points] == [(1, "eager"), (8, "eager")]
    assert ex.current.x == 8 and ex.current.line == "eager"


def test_repeat_flipping_mode_pairs_eager_and_fused(clock, ceilings, plenty_of_memory):
    fake = FakeRepeat(clock)
    ex = _repeat(ceilings, fake)
    ex.set(repeat=8)
    ex.set(mode="fused")  # eager 8 exists: fused 8 is measured together with it
    assert fake.calls[2:] == [(ex.size, 8, "fused"), (ex.size, 8, "eager")]
    c = ex.sweeps[ex.size].comparison((8, "fused"), (8, "eager"))
    assert c.ratio == pytest.approx(8.0) and c.decided
    assert c.says() in ex.readout
    ex.set(mode="eager")  # both measured: nothing more
    assert len(fake.calls) == 4 and c.says() in ex.readout


def test_repeat_noisy_pair_draws_no_conclusion(clock, ceilings, plenty_of_memory):
    fake = FakeRepeat(clock, scale={(2, "eager"): (1.0, 3.0)})  # every other call 3x slower
    ex = _repeat(ceilings, fake, repeat=2, mode="fused")
    ex.set(mode="eager")
    c = ex.sweeps[ex.size].comparison((2, "fused"), (2, "eager"))
    assert not c.narrow and c.says() in ex.readout
    assert ex.current.timing.noisy and "noisy" in ex.readout  # the point's own spread, noted


def test_repeat_one_set_with_three_changes_measures_once(clock, ceilings, plenty_of_memory):
    fake = FakeRepeat(clock)
    ex = _repeat(ceilings, fake)
    other = next(s for s in ex.size_options if s != ex.size)
    ex.set(repeat=4, size=other, mode="fused")
    assert fake.calls[1:] == [(other, 4, "fused")]


def test_repeat_slider_move_measures_and_going_back_only_redraws_marks(
    clock, ceilings, plenty_of_memory, monkeypatch
):
    fake = FakeRepeat(clock)
    ex = _repeat(ceilings, fake)
    before = _part(ex, "brrr-plot").value
    _slider(ex, "repeat").value = 16  # what the browser does
    assert fake.calls[-1] == (ex.size, 16, "eager")
    assert ex.current.x == 16 and _part(ex, "brrr-plot").value != before
    bases = []
    subplots = Figure.subplots  # each base picture is drawn on a new figure's subplots
    monkeypatch.setattr(Figure, "subplots", lambda fig, *a: (bases.append(1), subplots(fig, *a))[1])
    shown = _part(ex, "brrr-plot").value
    _slider(ex, "repeat").value = 1  # measured already: the base picture is reused, marks move
    assert bases == [] and _part(ex, "brrr-plot").value != shown and ex.current.x == 1
    assert len(fake.calls) == 2


def test_repeat_knee_and_default_slider(clock, ceilings, plenty_of_memory):
    # repeat* = vector FLOP/s x 8 bytes / bandwidth = 40e9 x 8 / 10e9 = 32
    ex = _repeat(ceilings, FakeRepeat(clock))
    assert ex.predicted_knee_repeat == pytest.approx(32)
    assert max(ex.repeat_options) == 256  # the power of two >= 6 x knee
    assert ex.repeat_options[:6] == (1, 2, 3, 4, 6, 8)


def test_repeat_max_repeat_argument(clock, ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(clock), max_repeat=20)
    assert max(ex.repeat_options) == 20 and 16 in ex.repeat_options


def test_repeat_readout_states_a_share_over_100_percent(clock, ceilings, plenty_of_memory):
    # a fused chain of 64 taking half the model's time multiplies at 2x the vector ceiling
    ex = _repeat(ceilings, FakeRepeat(clock, scale={(64, "fused"): 0.5}), repeat=64, mode="fused")
    over = ex.current
    assert over.achieved_flops_per_s == pytest.approx(2 * ceilings.vector_flops_per_s, rel=0.01)
    assert "200%" in ex.readout  # of the vector roof
    ex.set(repeat=4)  # one pass at the bandwidth ceiling, multiplies well below theirs
    share = _fmt.percent(ex.current.achieved_flops_per_s, ceilings.vector_flops_per_s)
    assert "200%" not in ex.readout and share in ex.readout and share == "12%"


def test_repeat_bad_arguments(clock, ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(clock))
    with pytest.raises(ValueError, match="repeat"):
        ex.set(repeat=5)
    with pytest.raises(ValueError, match="mode"):
        ex.set(mode="jit")
    with pytest.raises(ValueError, match="size"):
        ex.set(size=12345)
    with pytest.raises(ValueError, match="max_repeat"):
        _repeat(ceilings, FakeRepeat(clock), max_repeat=0)
    with pytest.raises(ValueError, match="device"):
        widgets.repeat_explorer(device="not-a-device", ceilings=ceilings, setup=FakeRepeat(clock))
    with pytest.raises(ValueError, match="mode"):
        widgets.repeat_case(1024, 2, "lazy", "cpu")
    with pytest.raises(ValueError, match="mode"):
        widgets.repeat_case(1024, 2, "fused", "cpu", fresh_output=True)


def test_repeat_refuses_what_does_not_fit(clock, ceilings, monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 1000)
    fake = FakeRepeat(clock)
    ex = _repeat(ceilings, fake)  # the kernel stays alive: no exception
    assert fake.calls == [] and ex.current is None
    assert "brrr-error" in _part(ex, "brrr-readout")._dom_classes
    assert ex.sweeps[ex.size].point(1, "eager").status == sweeps.NO_MEMORY
    assert _fmt.binary_bytes(3 * 4 * ex.size) in ex.error  # input and two buffers, fp32
    assert bytes(_part(ex, "brrr-plot").value).startswith(PNG_MAGIC)  # still draws the predictions
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 64 * 2**30)
    assert ex.set(repeat=2) is not None
    assert ex.error is None and "brrr-error" not in _part(ex, "brrr-readout")._dom_classes


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 GB"),
    ],
)
def test_repeat_out_of_memory_is_reported(clock, ceilings, plenty_of_memory, exc):
    fake = FakeRepeat(clock, fail=exc)
    ex = _repeat(ceilings, fake)
    assert ex.sweeps[ex.size].point(1, "eager").status == sweeps.NO_MEMORY and ex.current is None
    assert _fmt.binary_bytes(3 * 4 * ex.size) in ex.error
    assert "brrr-error" in _part(ex, "brrr-readout")._dom_classes
    fake.fail = None
    ex.set(repeat=2)
    assert ex.error is None and "brrr-error" not in _part(ex, "brrr-readout")._dom_classes
    assert ex.current.x == 2


def test_repeat_other_errors_are_shown_not_raised(clock, ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(clock, fail=ValueError("boom")))
    assert "boom" in ex.error and "boom" in ex.readout
    assert isinstance(ex.exception, ValueError)  # kept for the learner to inspect
    assert ex.points == ()


def test_repeat_busy_message_says_compiling(clock, ceilings, plenty_of_memory):
    seen = []

    class Spy(FakeRepeat):
        def __call__(self, **kw):
            seen.append((ex.readout, set(_part(ex, "brrr-readout")._dom_classes)))
            return super().__call__(**kw)

    ex = None
    ex = _repeat(ceilings, Spy(clock))
    ex.set(mode="fused")
    text, classes = seen[-1]
    assert "compiling" in text and "brrr-busy" in classes
    assert "brrr-busy" not in _part(ex, "brrr-readout")._dom_classes


def test_repeat_skips_slow_eager_points_unless_forced(clock, ceilings, plenty_of_memory):
    fake = FakeRepeat(clock)
    # one pass over 64 Mi elements: 8 B x 2^26 / 10 GB/s = 54 ms; a point takes 8 calls
    ex = _repeat(ceilings, fake, size=2**26)
    ex.set(repeat=16)  # 8 calls x 16 passes: 6.9 s, under the 10 s allowed one point
    ex.set(repeat=24)  # 8 calls x 24 passes: 10.3 s, over it
    assert [c[1] for c in fake.calls] == [1, 16]
    assert ex.current is None and ex.error is None
    skipped = ex.sweeps[ex.size].point(24, "eager")
    assert skipped.status == sweeps.TOO_SLOW and skipped.reason in ex.readout
    ex.set(mode="fused")  # one pass: always measured
    ex.set(mode="eager", force=True)  # measured together with fused 24
    assert [c[1:] for c in fake.calls[2:]] == [(24, "fused"), (24, "fused"), (24, "eager")]


def test_repeat_implausible_point_is_remeasured_before_drawn(clock, ceilings, plenty_of_memory):
    fake = FakeRepeat(clock, scale={(4, "eager"): 0.25})  # repeat 4 "as fast as" repeat 1
    ex = _repeat(ceilings, fake, repeat=2)
    ex.set(repeat=4)
    # repeat 4 looked 2x faster than repeat 2: both set up again and timed together
    assert fake.calls[1:] == [(ex.size, 4, "eager"), (ex.size, 2, "eager"), (ex.size, 4, "eager")]
    (pair,) = [p for p in ex.sweeps[ex.size].pairs if p.remeasured]
    assert pair.remeasured and ex.current.reason in ex.readout
    assert pair.comparison.says() in ex.current.reason


def test_repeat_waiting_for_cores_is_said(ceilings, plenty_of_memory, make_clock):
    slow_clock = make_clock(cpu_share=0.5)  # this thread ran half the time: cores were taken
    ex = _repeat(ceilings, FakeRepeat(slow_clock))
    words = sweeps.waited_words(ex.current)
    assert ex.current.waited and "50%" in words and words in ex.readout
    assert "50%" in ex.sweeps[ex.size].table()
    ex.set(mode="fused")  # paired with eager: the ratio comes with the waiting said
    c = ex.sweeps[ex.size].comparison((1, "fused"), (1, "eager"))
    assert c.waited and c.says() in ex.readout


# ------------------------------------------------------------------ batch explorer


class FakeBatch:
    """Records every batch set up; time = fixed + per-sample x batch (or a cycle of factors)."""

    def __init__(self, clock, fixed_s=1e-3, per_sample_s=1e-6, weight_bytes=1000, fail=None):
        self.clock, self.calls, self.fail = clock, [], fail
        self.fixed_s, self.per_sample_s, self.weight_bytes = fixed_s, per_sample_s, weight_bytes
        self.scale: dict[int, tuple[float, ...]] = {}

    def __call__(self, *, batch, device):
        self.calls.append(batch)
        if self.fail is not None:
            raise self.fail
        t = self.fixed_s + self.per_sample_s * batch
        work = self.clock.work(*(t * f for f in self.scale.get(batch, (1.0,))))
        return Case(work, 2 * 64 * 64 * batch, self.weight_bytes + 4 * 128 * batch, CPU,
                    weight_bytes=self.weight_bytes, ops=3, size=batch, no_grad=True)  # fmt: skip


def _tiny_model():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _batch(ceilings, fake, **kwargs):
    kwargs.setdefault("model", _tiny_model())
    return widgets.batch_explorer(ceilings=ceilings, setup=fake, **kwargs)


def test_batch_dom_contract_and_initial_point(clock, ceilings, plenty_of_memory, real_png):
    fake = FakeBatch(clock)
    ex = _batch(ceilings, fake)
    assert fake.calls == [1]
    assert "brrr-batch-explorer" in ex.widget._dom_classes
    classes = [c for w in _descendants(ex.widget) for c in w._dom_classes]
    assert classes.count("brrr-plot") == 1 and classes.count("brrr-readout") == 1
    assert bytes(_part(ex, "brrr-plot").value).startswith(PNG_MAGIC)
    assert ex.current.x == 1 and _fmt.seconds(ex.current.per_x_s) in ex.readout


def test_batch_measures_each_batch_with_its_half(clock, ceilings, plenty_of_memory):
    fake = FakeBatch(clock)
    ex = _batch(ceilings, fake, max_batch=64)
    assert ex.batch_options == (1, 2, 4, 8, 16, 32, 64)
    ex.set(batch=8)
    assert fake.calls == [1, 4, 8]  # half and batch, set up together for one comparison
    ex.set(batch=8)
    ex.set(batch=1)
    assert fake.calls == [1, 4, 8]
    ex.set(batch=16)
    assert fake.calls == [1, 4, 8, 8, 16]
    assert [p.x for p in ex.points] == [1, 4, 8, 16]
    assert ex.sweep.comparison((8, "batch"), (16, "batch")) is not None


def test_batch_reading_names_the_regime_from_the_interval(clock, ceilings, plenty_of_memory):
    # fixed 1 ms, 1 µs per sample: flat at small batch, linear past ~1000.
    ex = _batch(ceilings, FakeBatch(clock, fixed_s=1e-3, per_sample_s=1e-6), max_batch=65536)
    ex.set(batch=8)
    d = ex.doubling()
    assert d.batch == 8 and d.ratio == pytest.approx(1.008 / 1.004, abs=1e-3)
    assert d.reading == "overhead" and d.fixed_share[1] > 0.95
    assert ex.sweep.says((4, "batch"), (8, "batch")) in ex.readout  # the ratio, its interval
    ex.set(batch=65536)
    d = ex.doubling()
    assert d.ratio == pytest.approx(1.97, abs=0.01) and d.versus_double == "below"
    assert d.reading == "work" and d.fixed_share[2] < 0.05
    assert ex.doubling(8).reading == "overhead"  # earlier pairs keep their reading


def test_batch_knee_is_named_only_where_measured(clock, ceilings, plenty_of_memory):
    # fixed 1 ms, 0.3 ms per sample: the knee (fixed = work) at batch 3.3.
    ex = _batch(ceilings, FakeBatch(clock, fixed_s=1e-3, per_sample_s=0.3e-3), max_batch=8)
    ex.set(batch=2)  # 1.6 / 1.3 = x1.23: the fixed cost is 77% of the batch-1 call
    assert ex.doubling().reading == "overhead" and ex.measured_knee is None
    ex.set(batch=4)  # 2.2 / 1.6 = x1.375: 62%, still below x1.5
    assert ex.measured_knee is None
    ex.set(batch=8)  # 3.4 / 2.2 = x1.55: past x1.5, so the knee lies between 2 and 4
    assert ex.measured_knee == (2, 4)


def test_batch_reading_at_the_knee(clock, ceilings, plenty_of_memory):
    # fixed 1 ms, 0.5 ms per sample: batch 2 -> 4 costs 3 / 2 = x1.5: fixed share 50%.
    ex = _batch(ceilings, FakeBatch(clock, fixed_s=1e-3, per_sample_s=0.5e-3), max_batch=8)
    ex.set(batch=4)
    d = ex.doubling()
    assert d.ratio == pytest.approx(1.5) and d.narrow and d.reading == "knee"


def test_batch_noise_draws_no_conclusion(clock, ceilings, plenty_of_memory):
    fake = FakeBatch(clock)
    fake.scale[2] = (1.0, 3.0)  # every other batch-2 call 3x slower: a busy machine
    ex = _batch(ceilings, fake, max_batch=8)
    ex.set(batch=2)
    c = ex.sweep.comparison((1, "batch"), (2, "batch"))
    assert not c.narrow and c.says() in ex.readout
    assert ex.doubling().reading in (CANT_TELL, OTHER_CODE)
    assert ex.doubling().reading != "overhead"


def test_batch_growth_far_below_the_knee_is_questioned(clock, ceilings, plenty_of_memory):
    fake = FakeBatch(clock, fixed_s=1e-3, per_sample_s=1e-6)
    ex = _batch(ceilings, fake, max_batch=65536)
    fake.scale[2] = (3.0,)  # the batch-2 call is 3x slower: more than twice the work's time
    ex.set(batch=2)
    d = ex.doubling()
    assert d.versus_double == "above" and d.reading == OTHER_CODE


def test_batch_doubling_a_little_under_two_is_work_not_a_jump(clock, ceilings, plenty_of_memory):
    # the AVX2 VM's 1 -> 2 read x1.95: the work is most of the call, nothing "jumped"
    fake = FakeBatch(clock, fixed_s=0.05e-3, per_sample_s=1e-3)
    ex = _batch(ceilings, fake, max_batch=4)
    ex.set(batch=2)
    d = ex.doubling()
    assert d.ratio == pytest.approx(2.05 / 1.05, abs=1e-3) and d.versus_double == "below"
    assert d.reading == "work"


def test_batch_weights_bound_is_not_called_overhead(clock, ceilings, plenty_of_memory):
    # 100 MB of weights at 10 GB/s: 10 ms to read them, the whole 10 ms call.
    ex = _batch(ceilings, FakeBatch(clock, fixed_s=10e-3, weight_bytes=100_000_000), max_batch=8)
    ex.set(batch=4)
    assert ex.doubling().reading == "weights"


def test_batch_time_falling_is_remeasured_then_called_different_code(
    clock, ceilings, plenty_of_memory
):
    fake = FakeBatch(clock)
    fake.scale[2] = (0.5,)  # twice the work in half the time, every time
    ex = _batch(ceilings, fake, max_batch=8)
    ex.set(batch=2)
    assert fake.calls == [1, 1, 2, 1, 2]  # paired, then paired again before it is drawn
    assert ex.doubling().reading == OTHER_CODE
    ex.remeasure()
    assert fake.calls[5:] == [1, 2, 1, 2]


def test_batch_waiting_for_cores_is_too_noisy(ceilings, plenty_of_memory, make_clock):
    slow_clock = make_clock(cpu_share=0.4)
    ex = _batch(ceilings, FakeBatch(slow_clock), max_batch=8)
    ex.set(batch=2)
    c = ex.sweep.comparison((1, "batch"), (2, "batch"))
    assert c.waited and c.says() in ex.readout
    assert ex.doubling().reading == CANT_TELL  # no regime from calls that waited for cores


def _paired(ratios):
    """A real Comparison from hand-made per-round ratios (times of 1 ms against ratio ms)."""
    a = timing.Timing(samples_s=[1e-3] * len(ratios), device="cpu")
    b = timing.Timing(samples_s=[1e-3 * r for r in ratios], device="cpu")
    return timing.Comparison(a=a, b=b, ratios=tuple(ratios))


@pytest.mark.parametrize(
    ("ratios", "weights_share", "reading"),
    [
        ([1.10, 1.11, 1.12] * 4, 0.1, "overhead"),  # fixed share 88-90%: the ops' overhead
        ([1.10, 1.11, 1.12] * 4, 0.8, "weights"),  # the same, but reading the weights is most
        ([1.49, 1.50, 1.51] * 4, 0.1, "knee"),  # fixed share about 50%, measured narrowly
        ([1.90, 1.95, 1.99] * 4, 0.1, "work"),  # below x2 but the work is most of the call
        ([1.95, 2.00, 2.05] * 4, 0.1, "work"),  # about twice the time, narrowly
        ([2.60, 2.70, 2.80] * 4, 0.1, "other code"),  # more than twice the work's time
        ([0.50, 0.52, 0.54] * 4, 0.1, "other code"),  # less time for twice the work
        ([1.10, 1.90, 1.30, 2.40] * 3, 0.1, "can't tell"),  # wide around the 50% border
        ([0.90, 1.10, 1.00] * 4, 0.1, "can't tell"),  # x1 inside the interval
    ],
)
def test_read_doubling_reads_only_what_the_interval_allows(ratios, weights_share, reading):
    d = _batch_explorer.read_doubling(2, _paired(ratios), weights_share)
    assert d.reading == reading, d
    share, low, high = d.fixed_share
    assert low <= share <= high and share == pytest.approx(2 - d.ratio)


def test_batch_refuses_what_does_not_fit(clock, ceilings, monkeypatch):
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 64 * 2**30)
    fake = FakeBatch(clock)
    ex = _batch(ceilings, fake, max_batch=1024)
    monkeypatch.setattr(machine, "available_memory_bytes", lambda device: 10)
    assert ex.set(batch=1024) is None
    assert fake.calls == [1] and "brrr-error" in _part(ex, "brrr-readout")._dom_classes
    assert ex.sweep.point(1024, "batch").status == sweeps.NO_MEMORY and "1024" in ex.error
    ex.set(batch=1)  # measured: no memory needed, error cleared
    assert ex.error is None and "brrr-error" not in _part(ex, "brrr-readout")._dom_classes


def test_batch_out_of_memory_is_reported(clock, ceilings, plenty_of_memory):
    fake = FakeBatch(clock)
    ex = _batch(ceilings, fake, max_batch=8)
    fake.fail = torch.OutOfMemoryError("CUDA out of memory")
    assert ex.set(batch=8) is None and ex.sweep.point(8, "batch").status == sweeps.NO_MEMORY


def test_batch_bad_arguments(clock, ceilings, plenty_of_memory):
    with pytest.raises(TypeError, match="model"):
        _batch(ceilings, FakeBatch(clock), model="mlp")
    with pytest.raises(ValueError, match="make_input"):
        _batch(ceilings, FakeBatch(clock), model=nn.Sequential(nn.ReLU()))
    with pytest.raises(ValueError, match="max_batch"):
        _batch(ceilings, FakeBatch(clock), max_batch=-1)
    ex = _batch(ceilings, FakeBatch(clock), max_batch=8)
    with pytest.raises(ValueError, match="batch"):
        ex.set(batch=3)


def test_batch_bad_make_input_is_named(ceilings, plenty_of_memory):
    t = torch.ones(1, 8)
    with pytest.raises(TypeError, match=r"make_input\(2\).*got list"):
        widgets.batch_explorer(model=_tiny_model(), make_input=lambda b: [t])
    with pytest.raises(ValueError, match="make_input must build"):
        widgets.batch_explorer(model=_tiny_model(), ceilings=ceilings,
                              make_input=lambda b: torch.ones(b, 7))  # fmt: skip
    with pytest.raises(TypeError, match=r"make_input\(2\).*\(3, 8\)"):
        widgets.batch_explorer(model=_tiny_model(), ceilings=ceilings,
                              make_input=lambda b: torch.ones(3, 8))  # fmt: skip


def test_batch_compute_line_uses_the_models_precision(clock, plenty_of_memory):
    c = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 800e9})
    ex = _batch(c, FakeBatch(clock), model=_tiny_model().to(torch.bfloat16), max_batch=8)
    assert ex.precision == ex.peak_precision == "bf16" and ex.peak_flops_per_s == 800e9
    ex = _batch(c, FakeBatch(clock), model=_tiny_model().to(torch.float16), max_batch=8)
    assert ex.precision == "fp16"  # not measured here: the compute line uses the fp32 roof
    assert ex.peak_precision == "fp32" and ex.peak_flops_per_s == c.matmul_flops_per_s


def test_tf32_is_the_precision_of_fp32_on_cuda_when_allowed(monkeypatch):
    precision = _batch_explorer._precision  # the rule itself: no CUDA device here for an explorer
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    assert precision(torch.float32, cuda) == "tf32"
    assert precision(torch.float32, CPU) == "fp32"
    assert precision(torch.bfloat16, cuda) == "bf16"
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "highest")
    assert precision(torch.float32, cuda) == "fp32"


def test_default_mlp_width_follows_the_ceilings(clock, ceilings, plenty_of_memory):
    small = _batch(ceilings, FakeBatch(clock), model=None, max_batch=2).model
    assert small[0].in_features == 128  # sqrt(5e-6 x 200e9 / 32) = 177 -> nearest power of two
    fast = fake_ceilings(matmul_flops_per_s=50e12, op_overhead_s=5e-6)
    assert _batch(fast, FakeBatch(clock), model=None, max_batch=2).model[0].in_features == 2048
    again = _batch(ceilings, FakeBatch(clock), model=None, max_batch=2).model
    assert torch.equal(small[0].weight, again[0].weight)  # seeded, reproducible


# ------------------------------------------------------------------ real measurements


def _measure_repeat(size, repeat, mode, device, fresh_output=False):
    """One point of the repeat experiment, as the explorer and repeat_sweep measure it."""
    case = lambda r, m: widgets.repeat_case(size, r, m, device, fresh_output=fresh_output)  # noqa: E731
    return sweeps.sweep("repeat", [repeat], [mode], case, device=device, budget_s=0.01).point(
        repeat, mode
    )


def test_measure_repeat_real_tiny():
    p = _measure_repeat(4096, 3, "eager", "cpu")
    assert p.flops == 3 * 4096  # one FLOP per element per multiply (bl.count)
    assert p.bytes_moved == 3 * 2 * 4 * 4096  # each multiply reads and writes 4 bytes
    assert p.median_s > 0 and p.compile_s is None and p.ops == 3
    assert p.timing.device == "cpu"
    fresh = _measure_repeat(4096, 3, "eager", "cpu", fresh_output=True)
    assert (fresh.flops, fresh.bytes_moved) == (p.flops, p.bytes_moved)


def test_repeat_case_computes_the_same_either_way():
    torch.manual_seed(0)
    eager = widgets.repeat_case(1000, 5, "eager", "cpu").fn()
    torch.manual_seed(0)
    fused = widgets.repeat_case(1000, 5, "fused", "cpu")
    x, out = fused.fn.args
    fused.fn()
    assert torch.equal(out, x * 32) and torch.equal(eager, x * 32)
    assert fused.bytes_moved == 8 * 1000 and fused.compile_s is not None
    assert fused.warmup_s > widgets.repeat_case(8, 1, "eager").warmup_s


def test_repeat_sweep_skips_every_point_over_its_time_allowance(ceilings):
    res = widgets.repeat_sweep(
        4096, (1, 2), "cpu", ceilings=ceilings, max_point_s=0, progress=False
    )
    assert sorted((p.x, p.line) for p in res.points) == [
        (1, "eager"),
        (1, "fused"),
        (2, "eager"),
        (2, "fused"),
    ]
    assert {p.status for p in res.points} == {sweeps.TOO_SLOW}  # nothing measured or compiled
    assert res.point(2, "eager").predicted_s == pytest.approx(2 * (8 * 4096 / 10e9 + 5e-6))


def test_repeat_explorer_real_tiny(ceilings, plenty_of_memory):
    ex = widgets.repeat_explorer(size=4096, device="cpu", ceilings=ceilings, max_repeat=8)
    ex.set(repeat=8)
    one, eight = (p for p in ex.points if p.line == "eager")
    assert (one.x, eight.x) == (1, 8)
    assert eight.flops == 8 * one.flops and eight.bytes_moved == 8 * one.bytes_moved
    # Eight passes cost more than one; generous margin for a busy machine.
    assert eight.median_s > 1.2 * one.median_s
    assert ex.error is None


def test_batch_explorer_real_tiny(ceilings, plenty_of_memory):
    ex = widgets.batch_explorer(model=_tiny_model(), device="cpu", ceilings=ceilings, max_batch=4)
    ex.set(batch=4)
    assert [p.x for p in ex.points] == [1, 2, 4]
    two, four = ex.points[1:]
    assert four.flops == 2 * two.flops >= 4 * 2 * (8 * 16 + 16 * 4)  # the matmuls, at least
    assert four.weight_bytes == (8 * 16 + 16 + 16 * 4 + 4) * 4
    c = ex.sweep.comparison((2, "batch"), (4, "batch"))
    assert 0.3 < c.ratio < 3.0  # a tiny model: overhead-bound, far from x2 either way
    assert ex.error is None and ex.current.x == 4


def test_explorer_displays_its_vbox_with_its_picture_and_words(clock, ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(clock))
    bundle = ex._repr_mimebundle_()  # what Jupyter asks of the last expression of a cell
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == ex.widget.model_id  # JupyterLab: the live VBox
    assert base64.b64decode(bundle["image/png"]).startswith(PNG_MAGIC)  # a static page
    name, _, words = bundle["text/plain"].partition(": ")
    assert "repeat" in name and words and "<" not in words


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_explorers_on_cuda(ceilings):
    free = machine.available_memory_bytes(torch.device("cuda"))
    assert free > 0
    # 2**25 floats: 128 MiB, past any GPU's L2, so each pass costs its bytes, not a launch
    # (at 2**20, 4 MiB, an H100 ran four eager launches in 77 µs, one compiled call in 136)
    p = _measure_repeat(2**25, 4, "eager", "cuda")
    assert p.device.startswith("cuda") and p.bytes_moved == 4 * 8 * 2**25 and p.cpu_share is None
    f = _measure_repeat(2**25, 4, "fused", "cuda")
    assert f.bytes_moved == 8 * 2**25 and f.compile_s is not None
    assert f.median_s < p.median_s  # one pass against four
    model = _tiny_model().to("cuda")
    ex = widgets.batch_explorer(model=model, device="cuda", ceilings=ceilings, max_batch=4)
    ex.set(batch=4)
    assert ex.error is None and ex.sweep.comparison((2, "batch"), (4, "batch")) is not None


def test_batch_model_on_other_device_is_refused(ceilings):
    with pytest.raises(ValueError, match="model.to"):
        widgets.batch_explorer(model=_tiny_model().to("meta"), device="cpu", ceilings=ceilings)
    with pytest.raises(ValueError, match="device='meta' is not a device brrr knows"):
        widgets.batch_explorer(model=_tiny_model(), device="meta", ceilings=ceilings)


def test_measured_knee_from_a_roofline_shaped_sweep(clock):
    # benchmarks/repeat_model.py reads the knee of a measured sweep this way
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "repeat_model.py"
    spec = importlib.util.spec_from_file_location("repeat_model", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    # fused: flat 3 ms, then repeat x 0.15 ms: knee at 20
    def setup(x, line):
        return Case(clock.work(max(3e-3, x * 0.15e-3)), x, 8, CPU)

    result = sweeps.sweep("repeat", [1, 4, 8, 64, 128], ["fused"], setup)
    assert bench.measured_knee_repeat(result) == pytest.approx(20)
    assert bench.measured_knee_repeat(sweeps.sweep("repeat", [1, 2], ["fused"], setup)) is None


# ------------------------------------------------------------------ helpers


def _part(ex, css_class):
    """The explorer's widget of ``css_class``, found as the browser finds it."""
    (part,) = [w for w in _descendants(ex.widget) if css_class in w._dom_classes]
    return part


def _slider(ex, description):
    (control,) = [
        w for w in _descendants(ex.widget) if getattr(w, "description", "") == description
    ]
    return control


def _descendants(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _descendants(child)
