"""bl.benchmark, bl.compare and Timing: the method checked with fake clocks, then live.

Statistical agreement with torch.utils.benchmark lives in
benchmarks/timer_agreement.py (it depends on how quiet the machine is); here
the timer's logic is checked deterministically, with fake clocks and workloads
whose cost is known by construction, so these tests cannot flake.
"""

import functools
import inspect
import re
import time

import pytest
import torch

import brrrlib as bl
from brrrlib import timing
from brrrlib.timing import Comparison, Timing


def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


# ---------------------------------------------------------------- Timing ---


def test_quantiles_match_hand_computed_values():
    t = Timing(samples_s=(4.0, 1.0, 3.0, 2.0, 5.0), device="cpu")
    assert t.median_s == 3.0
    assert t.min_s == 1.0
    assert t.quantile(0.25) == 2.0 and t.quantile(0.75) == 4.0
    assert t.iqr_s == 2.0
    assert t.quantile(0.1) == pytest.approx(1.4)  # linear interpolation, numpy's default
    assert t.quantile(0.0) == 1.0 and t.quantile(1.0) == 5.0
    assert t.calls == 5


def test_quantile_agrees_with_torch_quantile():
    xs = tuple(float(x) for x in torch.rand(37, generator=torch.Generator().manual_seed(0)) + 0.1)
    t = Timing(samples_s=xs, device="cpu")
    ref = torch.tensor(xs, dtype=torch.float64)
    for q in (0.1, 0.2, 0.5, 0.8, 0.9):
        assert t.quantile(q) == pytest.approx(torch.quantile(ref, q).item())


def test_noisy_uses_the_ten_percent_threshold():
    quiet = Timing(samples_s=(1.0, 1.01, 1.02, 1.03, 1.04), device="cpu")
    loud = Timing(samples_s=(1.0, 1.5, 2.0, 2.5, 3.0), device="cpu")
    assert not quiet.noisy and loud.noisy
    assert timing.NOISY_IQR_RATIO == 0.1
    assert "NOISY" in repr(loud) and "NOISY" not in repr(quiet)


@pytest.mark.parametrize(
    ("seconds", "unit"), [(2.5, " s"), (2.5e-3, " ms"), (2.5e-6, " µs"), (2.5e-9, " ns")]
)
def test_repr_picks_units_and_shows_spread_and_device(seconds, unit):
    t = Timing(samples_s=(seconds,) * 5, device="cpu", label="op", calls_per_sample=10)
    header, row = repr(t).splitlines()
    assert row.split()[:3] == ["op", "2.5", unit.strip()] and "IQR" in header
    assert re.search(r"\b5 x 10\b", row) and row.endswith("cpu")
    html = t._repr_html_()
    assert ">op</td>" in html and f"2.5{unit}" in html


def test_timing_rejects_bad_samples():
    with pytest.raises(ValueError, match="samples_s"):
        Timing(samples_s=(), device="cpu")
    with pytest.raises(ValueError, match="samples_s"):
        Timing(samples_s=(1.0, -1.0), device="cpu")
    with pytest.raises(ValueError, match="q must be"):
        Timing(samples_s=(1.0,), device="cpu").quantile(1.5)


def test_timing_is_frozen_and_stores_a_tuple():
    t = Timing(samples_s=[1.0, 2.0], device="cpu")
    assert t.samples_s == (1.0, 2.0)
    with pytest.raises(AttributeError):
        t.label = "x"


# ------------------------------------------------------------- benchmark ---


def test_benchmark_validates_its_arguments():
    x = torch.ones(4)
    with pytest.raises(TypeError, match="fn must be callable"):
        bl.benchmark(x.sum(), x)
    with pytest.raises(ValueError, match="budget_s"):
        bl.benchmark(torch.neg, x, budget_s=0)
    with pytest.raises(ValueError, match="budget_s"):
        bl.benchmark(torch.neg, x, budget_s=-1)
    with pytest.raises(TypeError, match="budget_s"):
        bl.benchmark(torch.neg, x, budget_s="1")
    with pytest.raises(ValueError, match="warmup_s"):
        bl.benchmark(torch.neg, x, warmup_s=float("nan"))
    with pytest.raises(TypeError, match="label"):
        bl.benchmark(torch.neg, x, label=3)
    with pytest.raises(ValueError, match="device"):
        bl.benchmark(torch.neg, x, device="nonsense")
    with pytest.raises(TypeError, match="device"):
        bl.benchmark(torch.neg, x, device=3)


def test_cuda_graph_on_cpu_raises_a_clear_error():
    with pytest.raises(ValueError, match="cuda_graph=True needs a CUDA device"):
        bl.benchmark(torch.neg, torch.ones(4), cuda_graph=True)


def test_benchmark_calls_fn_with_args_and_kwargs_and_blocks_tiny_calls():
    seen = []

    def fn(a, *, b):
        seen.append((a, b))

    t = bl.benchmark(fn, 1, b=2, budget_s=0.05, warmup_s=0.01, label="noop")
    # no tensor arguments: the course's device (cuda on a GPU machine, where events time it)
    assert t.device == str(bl.device())
    t = bl.benchmark(fn, 1, b=2, budget_s=0.05, warmup_s=0.01, label="noop", device="cpu")
    assert set(seen) == {(1, 2)}
    # a no-op takes well under 1 µs: samples are blocks of many calls
    assert t.calls_per_sample > 10
    assert len(seen) >= t.calls  # first call + estimate + warm-up + timed calls
    assert t.label == "noop" and t.device == "cpu"
    assert len(t.samples_s) >= 5


def test_benchmark_on_a_slow_call_takes_min_samples_of_one_call():
    t = bl.benchmark(time.sleep, 0.02, budget_s=0.01, warmup_s=0.0)
    assert t.calls_per_sample == 1
    assert len(t.samples_s) == _default(bl.benchmark, "min_samples")
    # sleep never returns early; generous upper margin for a busy machine
    assert 0.02 <= t.median_s < 0.2


def test_benchmark_respects_its_time_budget():
    x = torch.ones(1000)
    start = time.perf_counter()
    bl.benchmark(torch.neg, x, budget_s=0.1, warmup_s=0.02)
    # budget + warm-up + estimate is ~0.13 s; allow a busy machine 10x
    assert time.perf_counter() - start < 1.3


def test_flush_cache_times_one_call_per_sample():
    x = torch.ones(1000)
    t = bl.benchmark(torch.neg, x, budget_s=0.05, warmup_s=0.0, flush_cache=True)
    assert t.flush_cache and t.calls_per_sample == 1 and "flush_cache" in repr(t)


def test_device_is_inferred_from_tensor_arguments():
    t = bl.benchmark(torch.neg, torch.ones(4, device="cpu"), budget_s=0.02, warmup_s=0.0)
    assert t.device == "cpu"


def test_cuda_event_path_arithmetic_with_fake_events(monkeypatch):
    """The CUDA measurement loop without a GPU: fake events tick 2 ms per block."""

    class FakeEvent:
        clock = 0.0

        def __init__(self, enable_timing=False):
            assert enable_timing
            self.t = None

        def record(self):
            FakeEvent.clock += 1.0  # ms; start/end alternate, so each block is 1 ms + 1 ms
            self.t = FakeEvent.clock

        def elapsed_time(self, other):
            return other.t - self.t  # milliseconds, like torch.cuda.Event

    synced = []
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda dev=None: synced.append(dev))
    calls = []
    # fake CUDA: the event loop has no public entry without a GPU
    samples = timing._measure_blocks(
        lambda: calls.append(1), torch.device("cuda"), lambda: None, number=4, n_samples=3
    )
    assert len(calls) == 12  # 3 blocks of 4 calls
    assert len(synced) == 1  # one synchronize, after all blocks, never inside them
    assert samples == [(pytest.approx(1e-3 / 4), None)] * 3  # 1 ms per block / 4 calls, in seconds


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_benchmark_and_graph_replay_live():
    x = torch.randn(1 << 20, device="cuda")
    eager = bl.benchmark(torch.relu, x)
    graphed = bl.benchmark(torch.relu, x, cuda_graph=True)
    assert eager.device.startswith("cuda") and graphed.cuda_graph
    # replaying a captured kernel is never much slower than launching it
    assert graphed.median_s < 2 * eager.median_s


# ------------------------------------------------- the method, with fake clocks ---


class FakeMachine:
    """A wall clock and a thread CPU clock that only move when a fake workload says so.

    ``work(s)`` is a call that computes for ``s`` seconds; ``stolen`` adds
    seconds of wall time during which another program had the core (the CPU
    clock does not move), as a preempted time slice does.
    """

    def __init__(self):
        self.wall = 0.0
        self.cpu = 0.0
        self.calls = 0

    def clocks(self):
        return (lambda: self.wall, lambda: self.cpu)

    def work(self, seconds, stolen=0.0):
        self.calls += 1
        self.wall += seconds + stolen
        self.cpu += seconds


@pytest.fixture
def machine(monkeypatch):
    m = FakeMachine()
    monkeypatch.setattr(timing, "_CLOCKS", m.clocks())  # fake clocks: exact, load-free times
    return m


def test_fake_workload_of_known_cost_is_timed_exactly(machine):
    t = bl.benchmark(lambda: machine.work(1e-6), budget_s=0.05, warmup_s=0.01, device="cpu")
    assert t.median_s == pytest.approx(1e-6) and t.iqr_s == pytest.approx(0, abs=1e-15)
    assert t.calls_per_sample in (1000, 1001)  # blocks of >= 1 ms (1001: float rounding)
    assert len(t.samples_s) in (49, 50) and t.dropped == 0  # 0.05 s of 1 ms blocks


def test_preempted_samples_are_dropped_and_replaced(machine):
    def call():
        # every 8000th call loses a 4 ms time slice to another program
        machine.work(1e-6, stolen=4e-3 if machine.calls % 8000 == 7999 else 0.0)

    t = bl.benchmark(call, budget_s=0.05, warmup_s=0.0, device="cpu")
    assert t.dropped >= 5  # ~1 block in 8 was hit
    assert len(t.samples_s) in (49, 50)  # all replaced within the budget
    assert all(s == pytest.approx(1e-6) for s in t.samples_s)
    assert all(s > 4e-6 for s in t.dropped_s)  # 1 ms of work + 4 ms stolen, per 1000 calls
    assert repr(t).splitlines()[1].split()[-2] == str(t.dropped)  # the "dropped" column


def test_a_partial_preemption_is_caught_by_the_cpu_share(machine):
    calls_per_block = 1000

    def call():
        # every 4th block loses 0.3 ms: 23% of its wall time, under the 3x time criterion
        block = machine.calls // calls_per_block
        last_in_block = machine.calls % calls_per_block == calls_per_block - 1
        machine.work(1e-6, stolen=0.3e-3 if block % 4 == 3 and last_in_block else 0.0)

    t = bl.benchmark(call, budget_s=0.04, warmup_s=0.0, device="cpu")
    assert t.dropped > 0
    assert t.median_s == pytest.approx(1e-6) and max(t.samples_s) == pytest.approx(1e-6)


def test_a_workload_that_waits_is_not_judged_by_its_cpu_share(machine):
    # A sleep (or a wait on a GPU) uses no CPU: every sample has share 0, none is disturbed.
    t = bl.benchmark(lambda: setattr(machine, "wall", machine.wall + 2e-3), budget_s=0.02,
                     warmup_s=0.0, device="cpu")  # fmt: skip
    assert t.dropped == 0 and t.median_s == pytest.approx(2e-3)


def test_replacements_stop_at_twice_the_budget(machine):
    def call():
        # 3 in 5 of all 1 ms calls lose 10 ms: most samples are disturbed
        machine.work(1e-3, stolen=10e-3 if machine.calls % 5 in (1, 2, 4) else 0.0)

    start = machine.wall
    t = bl.benchmark(call, budget_s=0.05, warmup_s=0.0, device="cpu")
    # first call + estimate + samples + replacements, bounded by 3 x budget (+ one 11 ms call)
    assert machine.wall - start < 0.05 * (1 + 2) + 0.1
    assert t.median_s == pytest.approx(1e-3)  # the quiet 90th percentile sets the reference
    assert all(s == pytest.approx(11e-3) for s in t.dropped_s) and t.dropped > 0


# ------------------------------------------------------------------- compare ---


def test_compare_of_known_costs_gives_their_exact_ratio(machine):
    c = bl.compare(lambda: machine.work(1e-6), lambda: machine.work(2e-6), device="cpu")
    assert isinstance(c, Comparison)
    assert c.ratio == pytest.approx(2.0) and c.interval == pytest.approx((2.0, 2.0))
    assert c.decided and c.narrow and c.direction == "slower"
    assert c.above(1.9) and c.below(2.1) and not c.above(2.1)
    assert c.versus(1.5) == "above" and c.versus(2.5) == "below"
    assert len(c.ratios) == _default(bl.compare, "min_rounds")  # decided as soon as allowed
    assert c.speedup == pytest.approx(0.5)
    faster = bl.compare(lambda: machine.work(2e-6), lambda: machine.work(1e-6), device="cpu")
    assert faster.direction == "faster" and faster.speedup == pytest.approx(2.0)


def test_compare_alternates_which_side_goes_first(machine):
    order = []

    def side(name, cost):
        def call():
            order.append(name)
            machine.work(cost)

        return call

    bl.compare(side("a", 1e-3), side("b", 1e-3), device="cpu", warmup_s=0.0)
    firsts = [order[i] for i in range(len(order)) if i == 0 or order[i] != order[i - 1]]
    # after the first calls and estimates: ... a b b a a b b a ... (runs of one block each)
    assert "".join(firsts[-8:]) in ("abababab", "babababa")
    assert order[-4:] in (["a", "b", "b", "a"], ["b", "a", "a", "b"], list("abab"), list("baba"))


def test_compare_drops_rounds_another_program_disturbed(machine):
    b_calls = []

    def b():
        b_calls.append(1)
        machine.work(3e-6, stolen=5e-3 if len(b_calls) % 500 == 499 else 0.0)

    c = bl.compare(lambda: machine.work(1e-6), b, device="cpu")
    assert c.rounds_dropped > 0
    assert c.ratio == pytest.approx(3.0) and c.decided


def test_compare_cannot_tell_when_the_interval_stays_wide(machine):
    state = {"round": 0}

    def b():
        # B's cost swings 1x-4x from block to block: no stable ratio exists
        machine.work(1e-6 * (1 + 3 * ((machine.calls // 1000) % 2)))

    c = bl.compare(lambda: machine.work(1e-6), b, device="cpu", budget_s=0.1)
    assert not c.narrow and c.versus(2.5) not in (
        "above",
        "below",
    )  # x2.5 inside: no side  # the size is unknown...
    assert c.decided and c.direction == "slower"  # ...but B is never faster than A

    def either(factor):
        return lambda: machine.work(1e-6 * factor((machine.calls // 1000) % 2))

    # A's and B's costs swap from block to block: the interval contains x1
    c = bl.compare(either(lambda i: 1 + i), either(lambda i: 2 - i), device="cpu", budget_s=0.1)
    assert c.low < 1 < c.high and not c.decided and c.direction not in ("faster", "slower")
    assert len(c.ratios) > _default(
        bl.compare, "min_rounds"
    )  # it tried more rounds within the budget
    assert state["round"] == 0


def test_compare_validates_its_arguments():
    with pytest.raises(TypeError, match="a must be callable"):
        bl.compare(3, lambda: None)
    with pytest.raises(ValueError, match="budget_s"):
        bl.compare(lambda: None, lambda: None, budget_s=-1)


def test_compare_infers_the_device_of_partials():
    x = torch.ones(4)
    c = bl.compare(functools.partial(torch.neg, x), functools.partial(torch.abs, x),
                   budget_s=0.05)  # fmt: skip
    assert c.a.device == "cpu" and c.a.label == "A" and c.b.label == "B"


# ------------------------------------------------------- live, known by construction ---


_ONE = (torch.ones(1), torch.ones(1))


def _adds(n):
    a, b = _ONE
    for _ in range(n):
        a.add_(b)


def test_live_ratio_of_one_and_four_times_the_same_work():
    """20 vs 80 in-place adds: the ratio is ~4 by construction (minus a call's own cost).

    Measured on a 2-core VM, 10 runs quiet and 10 with one core busy: 3.91-4.00,
    every one decided in 10 rounds (0.1 s). The margin [2.5, 6] is ~15x that noise.
    """
    c = bl.compare(functools.partial(_adds, 20), functools.partial(_adds, 80), budget_s=3.0)
    assert 2.5 < c.ratio < 6, c
    assert c.decided or 2.5 < c.low, c


def test_compare_says_when_the_calls_waited_for_cores(machine):
    # every block: 1 ms of wall time of which the calling thread ran 0.3 ms (it waited at a
    # barrier for a descheduled worker): the direction is clear, and the waiting is flagged
    c = bl.compare(lambda: machine.work(0.3e-6, stolen=0.7e-6),
                   lambda: machine.work(0.6e-6, stolen=1.4e-6), device="cpu", budget_s=0.1)  # fmt: skip
    assert c.cpu_share == pytest.approx(0.3) and c.waited
    assert c.decided and c.direction == "slower"
    # on a quiet machine the same ratio is decided
    q = bl.compare(lambda: machine.work(1e-6), lambda: machine.work(2e-6), device="cpu")
    assert q.cpu_share == pytest.approx(1.0) and not q.waited and q.decided


def test_a_few_surviving_rounds_never_decide():
    few = Comparison(a=Timing((1.0,) * 2, "cpu"), b=Timing((2.85,) * 2, "cpu"), ratios=(2.85, 2.85))
    assert few.interval == (2.85, 2.85) and not few.decided and not few.narrow
    assert few.direction not in ("faster", "slower")


def test_a_timing_carries_the_calling_threads_cpu_share(machine):
    # the thread ran 0.3 of each call's wall time (it waited at a barrier): nothing dropped
    t = bl.benchmark(lambda: machine.work(0.3e-6, stolen=0.7e-6), budget_s=0.02, warmup_s=0.0,
                     device="cpu")  # fmt: skip
    assert t.cpu_share == pytest.approx(0.3) and t.dropped == 0


def test_alternating_rounds_meet_every_call_once_a_round(machine):
    order = []

    def call(name, seconds):
        return lambda: (order.append(name), machine.work(seconds))

    calls = {"a": call("a", 1e-3), "b": call("b", 2e-3)}
    got, _calls_per_block = timing.rounds(calls, torch.device("cpu"), n=3)
    seconds = {k: [s for s, _share in v] for k, v in got.items()}
    assert seconds["a"] == [pytest.approx(1e-3)] * 3 and seconds["b"] == [pytest.approx(2e-3)] * 3
    runs = [name for i, name in enumerate(order) if i == 0 or order[i - 1] != name]
    assert runs == list("ababab")  # first calls and estimates, then rounds a b, b a, a b


@pytest.mark.parametrize(
    ("seconds_by_threads", "kept"),
    [
        ({4: 8e-3, 3: 6e-3, 2: 20e-6, 1: 40e-6}, 2),  # two of four threads wait: keep two
        ({4: 8e-3, 3: 8e-3, 2: 8e-3, 1: 40e-6}, 1),
        ({4: 12e-6, 3: 15e-6, 2: 20e-6, 1: 40e-6}, 4),  # a quiet machine keeps them all
        ({4: 0.5e-3, 3: 0.5e-3, 2: 0.5e-3, 1: 40e-6}, 4),  # slow, but under a millisecond
    ],
)
def test_the_threads_kept_are_the_most_that_do_not_stall(
    machine, monkeypatch, seconds_by_threads, kept
):
    # a seam: the probe's in-place add lasts what the fake machine says for the thread count
    monkeypatch.setattr(torch.Tensor, "add_", lambda *_: machine.work(
        seconds_by_threads[torch.get_num_threads()]))  # fmt: skip
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        bl.timing.settle_threads.cache_clear()  # a fresh process: it runs once per process
        said = bl.timing.settle_threads()
        assert torch.get_num_threads() == kept
        assert bool(said) == (kept < 4)
        torch.set_num_threads(4)
        assert bl.timing.settle_threads() == said and torch.get_num_threads() == 4  # once
    finally:
        bl.timing.settle_threads.cache_clear()
        torch.set_num_threads(threads)
