"""bl.benchmark and Timing: statistics, validation, and agreement with torch.utils.benchmark."""

import statistics
import time

import pytest
import torch
from torch.utils.benchmark import Timer

import brrrlib as bl
from brrrlib import timing
from brrrlib.timing import Timing

# ---------------------------------------------------------------- Timing ---


def test_quantiles_match_hand_computed_values():
    t = Timing(samples_s=(4.0, 1.0, 3.0, 2.0, 5.0), device="cpu")
    assert t.median_s == 3.0
    assert t.min_s == 1.0 and t.max_s == 5.0
    assert t.mean_s == 3.0
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
    text = repr(t)
    assert f"2.5{unit} median" in text
    assert "IQR" in text and "cpu" in text and "op:" in text and "5 samples x 10 calls" in text
    html = t._repr_html_()
    assert "<b>op</b>" in html and f"2.5{unit}" in html


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
    assert set(seen) == {(1, 2)}
    # a no-op takes well under 1 µs: samples are blocks of many calls
    assert t.calls_per_sample > 10
    assert len(seen) >= t.calls  # first call + estimate + warm-up + timed calls
    assert t.label == "noop" and t.device == "cpu"
    assert len(t.samples_s) >= 5


def test_benchmark_on_a_slow_call_takes_min_samples_of_one_call():
    t = bl.benchmark(time.sleep, 0.02, budget_s=0.01, warmup_s=0.0)
    assert t.calls_per_sample == 1
    assert len(t.samples_s) == timing._MIN_SAMPLES
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
    assert t.flush_cache and t.calls_per_sample == 1 and "cache flushed" in repr(t)


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
    samples = timing._measure_cuda(
        lambda: calls.append(1), torch.device("cuda"), None, number=4, n_samples=3
    )
    assert len(calls) == 12  # 3 blocks of 4 calls
    assert len(synced) == 1  # one synchronize, after all blocks, never inside them
    assert samples == [pytest.approx(1e-3 / 4)] * 3  # 1 ms per block / 4 calls, in seconds


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_benchmark_and_graph_replay_live():
    x = torch.randn(1 << 20, device="cuda")
    eager = bl.benchmark(torch.relu, x)
    graphed = bl.benchmark(torch.relu, x, cuda_graph=True)
    assert eager.device.startswith("cuda") and graphed.cuda_graph
    # replaying a captured kernel is never much slower than launching it
    assert graphed.median_s < 2 * eager.median_s


# ----------------------------------------- agreement with torch's Timer ---

# From a ~1 µs op to a ~50 ms op on this CPU (single thread, see below).
_A = {n: (torch.randn(n, n), torch.randn(n, n)) for n in (128, 512, 1280)}
_AGREEMENT = {
    "add 1 element (~1 µs)": (torch.add, (torch.ones(1), torch.ones(1))),
    "add 64Ki elements (~10 µs)": (torch.add, (torch.ones(1 << 16), torch.ones(1 << 16))),
    "mm 128 (~50 µs)": (torch.mm, _A[128]),
    "mm 512 (~3 ms)": (torch.mm, _A[512]),
    "mm 1280 (~50 ms)": (torch.mm, _A[1280]),
}


# Below this share of one core for our (single-threaded) process, other
# processes own the CPU: Timer's ~10 ms blocks then always include their time
# slices, while bl.benchmark's ~1 ms blocks mostly fit between them, so the
# two disagree about the *machine*, not about the op.
_MIN_CPU_SHARE = 0.9


def _compare(fn, args, rounds=3):
    """Median of bl.benchmark / median of Timer.blocked_autorange, interleaved
    round by round, and the share of a core this process got meanwhile."""
    ours, theirs = [], []
    timer = Timer("fn(*args)", globals={"fn": fn, "args": args}, num_threads=1)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(rounds):
        ours.append(bl.benchmark(fn, *args).median_s)
        theirs.append(timer.blocked_autorange(min_run_time=0.2).median)
    share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    return statistics.median(ours) / statistics.median(theirs), share


@pytest.fixture
def one_thread():
    """One intra-op thread for both timers: on a busy 2-core machine an OpenMP
    barrier waiting for a descheduled thread adds whole scheduler ticks (4 ms)
    at random. The agreement test is about the timers, not the parallelism."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("name", list(_AGREEMENT))
def test_agrees_with_torch_utils_benchmark_within_10_percent(name, one_thread):
    fn, args = _AGREEMENT[name]
    # At most one retry, documented: a burst of load from another process during
    # one of the six interleaved runs can still move a median; twice is a bug.
    for _attempt in range(2):
        ratio, share = _compare(fn, args)
        if 1 / 1.1 < ratio < 1.1:
            return
    if share < _MIN_CPU_SHARE:
        pytest.skip(
            f"{name}: machine saturated (this process got {share:.0%} of a core), "
            f"ratio {ratio:.2f} says nothing about the timers; run again on a quieter machine"
        )
    assert 1 / 1.1 < ratio < 1.1, f"{name}: bl.benchmark / Timer = {ratio:.3f} ({share:.0%} CPU)"
