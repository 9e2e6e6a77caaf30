"""Tests for brrrlib.diagnosis: the verdict's arithmetic, six workloads of known regime, bad input."""

from __future__ import annotations

import dataclasses
import re
import time
from html import escape
from types import SimpleNamespace

import _fakes
import pytest
import torch

import brrrlib as bl
from brrrlib.ceilings import Ceilings
from brrrlib.counting import Counts, OpCount
from brrrlib.diagnosis import (
    REMEDIES,
    Diagnosis,
    double_batch,
    floors,
    precision_remedies,
)
from brrrlib.timing import Comparison, Timing
from brrrlib.trace import Interval, Trace

# ----------------------------------------------------------------- the verdict, by arithmetic

# A made-up machine: 100 GFLOP/s matmul (400 in bf16), 50 GFLOP/s vector, 10 GB/s, 2 µs per op.
CEIL = Ceilings("cpu", "test machine", 100e9, 50e9, 10e9, 2e-6,
                matmul_flops_per_s_by_dtype={"bf16": 400e9})  # fmt: skip
GPU = dataclasses.replace(CEIL, device="cuda", device_name="test GPU")
# Verdict.settled_by's values of more than one word: the batch probe decided the verdict
IDLE_AND_FLAT, FLAT_BATCH = "idle and flat batch", "flat batch"


def _counts(*rows):
    return Counts(rows=tuple(OpCount(*r) for r in rows))


def _timing(seconds):
    return Timing(samples_s=(seconds,) * 5, device="cpu")


def _pair(t1, t2):
    """A doubled-batch comparison whose every round gave t2 / t1."""
    return Comparison(a=_timing(t1), b=_timing(t2), ratios=(t2 / t1,) * 10)


def _busy_trace(busy_fraction, device="cuda", runs=1):
    ivs = tuple(
        Interval("kernel", r * 1e-3, r * 1e-3 + busy_fraction * 1e-3, "device", "pointwise", r)
        for r in range(runs)
    )
    return Trace(ivs, tuple((r * 1e-3, (r + 1) * 1e-3) for r in range(runs)), device)


def _shares(counts, seconds, ceilings):
    return floors(counts, ceilings).shares(seconds)


def _verdict(counts, seconds, ceilings, trace=None, doubled=None, comparison=None):
    """The verdict bl.diagnose weighs from these measurements: floors, busy device, batch x2."""
    return Diagnosis(_timing(seconds), counts, ceilings, trace, comparison, doubled).verdict


def busy_evidence(trace):
    """The busy-device evidence a Diagnosis reads off ``trace``."""
    return Diagnosis(_timing(1.0), _counts(), CEIL, trace).busy


def batch_evidence(counts, doubled, comparison):
    """The batch evidence a Diagnosis reads off the doubled batch's counts and comparison."""
    return Diagnosis(_timing(1.0), counts, CEIL, None, comparison, doubled).batch


def test_an_exp_bound_softmax_reads_compute_and_a_fast_exp_reads_memory():
    # 8 Mi elements of softmax: 5 FLOPs and 8 bytes per element, one exp each, in 20 ms
    n = 8 * 2**20
    c = _counts(("aten::_softmax", "normalization", 1, 5 * n, 8 * n, "fp32", n, "exp"))
    slow_exp = dataclasses.replace(CEIL, special_per_s={"exp": 0.5e9, "tanh": 0.3e9})
    assert floors(c, slow_exp).special_s == {"exp": pytest.approx(n / 0.5e9)}  # 16.8 ms of 20
    shares = _shares(c, 20e-3, slow_exp)
    assert _verdict(c, 20e-3, slow_exp).regime == "compute"
    assert shares["compute"] > 0.8 > 2 * shares["memory"]
    fast_exp = dataclasses.replace(CEIL, special_per_s={"exp": 50e9})
    assert _verdict(c, 20e-3, fast_exp).regime == "memory"
    assert _shares(c, 20e-3, fast_exp)["memory"] == pytest.approx(8 * n / 10e9 / 20e-3)
    # ceilings without special-function rates (an older report) count the exp as one FLOP
    assert floors(c, CEIL).special_s == {}


def test_precision_remedies_follow_what_this_device_runs_fast():
    mm16 = _counts(("aten::mm", "matmul", 1, 10**9, 10**6, "bf16"))
    avx2 = dataclasses.replace(CEIL, matmul_flops_per_s_by_dtype={"bf16": 10e9})  # no fast path
    fast = dataclasses.replace(CEIL, matmul_flops_per_s_by_dtype={"bf16": 400e9})
    # fp32 work: bf16 offered only where it is faster
    assert any("bf16" in r for r in precision_remedies("compute", "fp32", fast))
    assert precision_remedies("compute", "fp32", avx2) == ()
    # bf16 work: never bf16 again; back to fp32 where bf16 is the slow path
    assert precision_remedies("compute", "bf16", fast) == ()
    (back,) = precision_remedies("compute", "bf16", avx2)
    assert "fp32" in back and "bf16" in back
    # 1 GFLOP at the 10 GFLOP/s bf16 roof in 0.12 s: 83%, compute-bound, so the fp32 remedy
    assert _verdict(mm16, 0.12, avx2).regime == "compute"
    # memory-bound: fewer bytes per number, unless already 16-bit or 16-bit is slow here
    assert precision_remedies("memory", "fp32", fast) and not precision_remedies(
        "memory", "bf16", fast
    )
    assert precision_remedies("memory", "fp32", avx2) == ()


def test_verdict_compute():
    # 1 GFLOP of matmul in 20 ms: the matmul floor is 10 ms (50%); 12 MB need 1.2 ms (6%)
    c = _counts(("aten::mm", "matmul", 1, 10**9, 12 * 10**6))
    shares, v = _shares(c, 0.02, CEIL), _verdict(c, 0.02, CEIL)
    assert v.regime == "compute" and v.runner_up == "memory" and v.confidence == "high"
    assert shares["compute"] == pytest.approx(0.5)
    assert shares["memory"] == pytest.approx(0.06)
    assert shares["overhead"] == pytest.approx(2e-6 / 0.02)


def test_floors_judge_each_precision_against_its_own_roof():
    # 4 GFLOP of bf16 matmul take >= 10 ms at the 400 GFLOP/s bf16 roof (not 40 at fp32's)
    bf16 = Counts(rows=(OpCount("aten::mm", "matmul", 1, 4 * 10**9, 10**6, "bf16"),))
    fl = floors(bf16, CEIL)
    assert fl.compute_s == pytest.approx(0.01)
    assert fl.compute_by_precision_s["bf16"] == pytest.approx(0.01)
    assert fl.shares(0.0125)["compute"] == pytest.approx(0.8)  # not 320%
    # fp8 has no ceiling here: judged against the fastest measured, with a note
    fp8 = Counts(rows=(OpCount("aten::mm", "matmul", 1, 4 * 10**9, 10**6, "fp8"),))
    fl = floors(fp8, CEIL)
    (note,) = fl.notes
    assert fl.compute_s == pytest.approx(0.01) and "fp8" in note


def test_verdict_vector_flops_use_the_vector_ceiling():
    # 1 GFLOP of elementwise work is 20 ms at the 50 GFLOP/s vector ceiling, not 10 ms
    c = _counts(("aten::mul", "pointwise", 1, 10**9, 10**6))
    assert _shares(c, 0.04, CEIL)["compute"] == pytest.approx(0.5)


def test_verdict_failed_vector_ceiling_falls_back_to_matmul():
    # torch.compile failed, so the vector ceiling is an eager op's 5 GFLOP/s: elementwise
    # FLOPs are then judged against the 100 GFLOP/s matmul ceiling
    bad = dataclasses.replace(
        CEIL, vector_flops_per_s=5e9, vector_method="eager torch.mul, torch.compile failed (x)"
    )
    c = _counts(("aten::_softmax", "normalization", 1, 10**8, 10**8))
    shares = _shares(c, 0.02, bad)
    assert shares["compute"] == pytest.approx(10**8 / 100e9 / 0.02)
    assert shares["memory"] == pytest.approx(0.5)
    assert any("vector" in n for n in floors(c, bad).notes)  # the floor names its roof
    assert floors(c, CEIL).notes == ()


def test_verdict_overhead_from_op_count_and_idle_device():
    # 100 tiny ops in 400 µs: 100 x 2 µs = 200 µs explains 50%
    c = _counts(("aten::add", "pointwise", 100, 100, 1200))
    assert _verdict(c, 400e-6, CEIL).regime == "overhead"
    assert _shares(c, 400e-6, CEIL)["overhead"] == pytest.approx(0.5)
    # a GPU idle 80% of the time lifts overhead's score to at least 0.8
    v = _verdict(c, 400e-6, GPU, _busy_trace(0.2))
    assert v.regime == "overhead" and v.scores["overhead"] == pytest.approx(0.8)
    assert _shares(c, 400e-6, GPU)["overhead"] == pytest.approx(0.5)  # the floor's own share
    # on a CPU "idle" also holds preemption by other programs: evidence, not a share
    v = _verdict(c, 400e-6, CEIL, _busy_trace(0.2, "cpu"))
    assert v.regime == "overhead" and v.scores["overhead"] == pytest.approx(0.5)


def test_busy_evidence_reads_the_steady_runs():
    # run 0 holds the profiler's set-up: it is left out when there are later runs
    tr = _busy_trace(0.9, runs=3)
    assert busy_evidence(tr).busy == pytest.approx(0.9)
    assert busy_evidence(_busy_trace(0.2)).idle == pytest.approx(0.8)
    assert busy_evidence(None) is None


def test_verdict_idle_device_contradicts_a_memory_verdict():
    c = _counts(("aten::mul", "pointwise", 1, 10**6, 8 * 10**6))  # 0.8 ms of bytes
    v = _verdict(c, 1e-3, CEIL, _busy_trace(0.3, "cpu"))
    assert v.regime == "memory" and v.confidence != "high"
    assert v.against == (("idle", pytest.approx(0.7)),)


def test_verdict_gemv_caveat_flat_time_with_flat_bytes_is_memory():
    # [1, D] x [D, D] with D=4096: 64 MB of weights, 6.4 ms at 10 GB/s; measured 8 ms.
    # Doubling the batch: bytes barely grow, time barely grows, FLOPs double.
    D = 4096
    one = _counts(("aten::mm", "matmul", 1, 2 * D * D, 4 * (D * D + 2 * D)))
    two = _counts(("aten::mm", "matmul", 1, 4 * D * D, 4 * (D * D + 4 * D)))
    v = _verdict(one, 8e-3, GPU, _busy_trace(0.99), two, _pair(8e-3, 8.2e-3))
    assert v.regime == "memory" and v.confidence == "high" and not v.settled_by
    batch = batch_evidence(one, two, _pair(8e-3, 8.2e-3))
    assert batch.time_ratio == pytest.approx(8.2 / 8) and "memory" in batch.follows
    # flat time with flat bytes: not overhead
    assert batch.flat and batch.growth["memory"] < 1.3


def test_verdict_batch_disagreement_lowers_confidence():
    # roofline says compute, but doubling the batch left the time flat and the FLOPs doubled
    one = _counts(("aten::mm", "matmul", 1, 10**9, 10**6))
    two = _counts(("aten::mm", "matmul", 1, 2 * 10**9, 2 * 10**6))
    assert batch_evidence(one, two, _pair(0.02, 0.02)).follows == {"overhead"}
    v = _verdict(one, 0.02, CEIL, None, two, _pair(0.02, 0.02))
    assert v.regime == "compute" and v.confidence != "high"
    assert ("batch", "overhead") in v.against


def test_verdict_close_call_is_low_confidence():
    # compute explains 42%, memory 40%: the workload sits at the ridge
    c = _counts(("aten::mm", "matmul", 1, 42 * 10**7, 4 * 10**7))
    v = _verdict(c, 0.01, CEIL)
    assert (v.regime, v.runner_up, v.confidence) == ("compute", "memory", "low")
    assert v.margin == pytest.approx(42 / 40)


def test_verdict_close_call_settled_by_batch_scaling():
    # 200 ops moving 3.2 MB in 800 µs: overhead explains 400 µs (50%), memory 320 µs (40%).
    one = _counts(("aten::add_", "pointwise", 200, 10**5, 32 * 10**5))
    two = _counts(("aten::add_", "pointwise", 200, 2 * 10**5, 64 * 10**5))
    shares = _shares(one, 800e-6, CEIL)
    assert shares["memory"] == pytest.approx(0.4) and shares["overhead"] == pytest.approx(0.5)
    # doubling the tensors doubled the bytes but the time stayed flat: overhead
    v = _verdict(one, 800e-6, CEIL, None, two, _pair(800e-6, 800e-6))
    assert v.regime == "overhead" and v.confidence == "medium"
    assert v.settled_by == "batch" and v.runner_up == "memory"
    # the same close call, but the time doubled with the bytes: memory, against the lead
    v = _verdict(one, 800e-6, CEIL, None, two, _pair(800e-6, 1600e-6))
    assert v.regime == "memory" and v.confidence == "medium"
    assert v.settled_by == "batch" and v.runner_up == "overhead"


def test_idle_device_and_flat_batch_mean_overhead_whatever_the_bytes():
    # the real encoder at batch 1: 8 MB counted (memory leads), but the CPU's op bodies were
    # busy 32% of the time and doubling the batch left the time flat: overhead
    one = _counts(
        ("aten::embedding", "other", 1, 0, 8 * 10**6), ("aten::add", "pointwise", 40, 10**4, 10**5)
    )
    two = _counts(
        ("aten::embedding", "other", 1, 0, 8 * 10**6 + 2048),
        ("aten::add", "pointwise", 40, 2 * 10**4, 2 * 10**5),
    )
    shares = _shares(one, 1e-3, CEIL)
    assert shares["memory"] > shares["overhead"]
    v = _verdict(one, 1e-3, CEIL, _busy_trace(0.32, "cpu"), two, _pair(1e-3, 1.05e-3))
    assert v.regime == "overhead" and v.confidence == "high" and v.runner_up == "memory"
    assert v.settled_by == IDLE_AND_FLAT


def test_time_growing_far_more_than_the_work_is_the_work_not_overhead():
    # measured in alternating rounds, a decided x10 is this machine's: the doubled data left
    # the cache or page-faulted. No count follows it, and nothing speaks against compute.
    c = _counts(("aten::mm", "matmul", 1, 10**9, 10**6))
    c2 = _counts(("aten::mm", "matmul", 1, 2 * 10**9, 2 * 10**6))
    batch = batch_evidence(c, c2, _pair(0.02, 0.2))
    assert batch.work_grew and not batch.follows
    v = _verdict(c, 0.02, CEIL, None, c2, _pair(0.02, 0.2))
    assert v.regime == "compute" and v.confidence == "high" and v.against == ()


def test_an_undecided_batch_comparison_draws_no_conclusion():
    c = _counts(("aten::mm", "matmul", 1, 10**9, 10**6))
    c2 = _counts(("aten::mm", "matmul", 1, 2 * 10**9, 2 * 10**6))
    wide = Comparison(a=_timing(0.02), b=_timing(0.03), ratios=(0.7, 1.0, 3.1) * 4)
    batch = batch_evidence(c, c2, wide)
    assert not batch.narrow and not batch.follows and not batch.flat and not batch.work_grew
    v = _verdict(c, 0.02, CEIL, None, c2, wide)
    assert v == _verdict(c, 0.02, CEIL)  # the same verdict as without the probe


def test_ceilings_of_another_device_are_refused(shared_ceilings):
    with pytest.raises(ValueError, match="ceilings are of a cuda.*fn runs on cpu"):
        bl.diagnose(tiny_ops, torch.ones(1), ceilings=GPU, progress=False)


def test_double_batch_reaches_into_lists():
    params = [torch.ones(3), torch.ones(2, 2)]
    args2, kwargs2 = double_batch((params, 5), {"scale": torch.tensor(2.0), "w": torch.ones(4)})
    assert [tuple(p.shape) for p in args2[0]] == [(6,), (4, 2)]
    assert args2[1] == 5
    assert kwargs2["scale"].dim() == 0 and kwargs2["w"].shape == (8,)
    assert double_batch((3, "x"), {}) is None


# ----------------------------------------------------------------- six workloads, live

W_MM = torch.randn(1024, 1024)
W_GEMV = torch.randn(4096, 4096)  # 64 MiB: larger than the last-level cache


def big_matmul(a):
    return a @ W_MM


def elementwise_chain(x):
    for _ in range(8):
        x = x * 1.0001 + 0.5  # 16 unfused passes, each reading and writing 16 MB
    return x


def tiny_ops(x):
    for _ in range(200):
        x = x + 1
    return x


def gemv(x):
    return x @ W_GEMV


def softmax(x):
    return torch.softmax(x, dim=-1)


def _tiny_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 10),
    )


WORKLOADS = {
    "big_matmul": (big_matmul, lambda: torch.randn(1024, 1024), "compute"),
    "elementwise_chain": (elementwise_chain, lambda: torch.randn(4_000_000), "memory"),
    "tiny_ops": (tiny_ops, lambda: torch.ones(1), "overhead"),
    "gemv_batch1": (gemv, lambda: torch.randn(1, 4096), "memory"),
    "tiny_mlp_batch1": (_tiny_mlp(), lambda: torch.randn(1, 32), "overhead"),
}


@pytest.fixture(scope="module")
def shared_ceilings(ceilings_cache_dir):
    """The CPU's ceilings on one thread, measured once per test run (tests/test_zoo.py reads
    the same cache file); this module's tests run on one thread.

    These workloads run on the CPU, on any machine. One thread, as the ceilings
    were measured: on a 2-core machine with another program busy on a core, a
    second OpenMP thread waits for the descheduled one at every barrier, which
    is noise about the machine, not the workload, and would make both the
    ceilings and the timings read low by different factors.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield _fakes.measured_for_verdicts()
    finally:
        torch.set_num_threads(threads)


def _floors_for(ceilings, regime: str):
    """``ceilings`` when they can serve as floors for a verdict of ``regime``; else a skip."""
    why = _fakes.disturbed(ceilings, regime)
    if why:
        pytest.skip(f"this CPU's ceilings were measured twice while other programs ran: {why}")
    return ceilings


@pytest.mark.verdict
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_known_regimes(name, shared_ceilings):
    fn, make_input, expected = WORKLOADS[name]
    ceilings = _floors_for(shared_ceilings, expected)
    with torch.no_grad():
        d = bl.diagnose(fn, make_input(), progress=False, label=name, ceilings=ceilings)
    assert isinstance(d, Diagnosis)
    assert d.regime == expected, str(d)
    assert set(REMEDIES[expected]) <= set(d.remedies)
    # the verdict's share leads the runner-up clearly: no coin flips on a busy machine
    others = [v for k, v in d.shares.items() if k != expected]
    assert d.shares[expected] > 1.5 * max(others), str(d)
    assert d.ceilings == ceilings
    assert d.batch_comparison.b is not None and d.trace is not None


@pytest.mark.verdict
def test_softmax_is_judged_with_its_exp_at_the_measured_rate(shared_ceilings):
    """Whether a softmax is memory- or exp-bound depends on the CPU: the test asserts the model.

    Its compute floor holds one exp per element at this machine's measured exp
    rate, and the verdict is the regime whose floor explains the most of the
    time, whichever that is here.
    """
    x = torch.randn(4096, 2048)
    ceilings = _floors_for(shared_ceilings, "memory")
    d = bl.diagnose(softmax, x, progress=False, label="softmax", ceilings=ceilings,
                    batch_probe=False, trace=False)  # fmt: skip
    assert d.counts.special_by_function() == {"exp": x.numel()}
    assert d.floors.special_s["exp"] == pytest.approx(x.numel() / ceilings.special_per_s["exp"])
    # without the batch and busy probes, the verdict is the floor that explains the most
    assert d.regime == max(d.shares, key=d.shares.get) and not d.verdict.settled_by, str(d)
    assert d.verdict.scores == d.shares


@pytest.mark.verdict
def test_gemv_batch_probe_does_not_call_it_overhead(shared_ceilings):
    # the essay's caveat: doubling a batch-1 GEMV does not double the bytes
    ceilings = _floors_for(shared_ceilings, "memory")
    with torch.no_grad():
        d = bl.diagnose(gemv, torch.randn(1, 4096), progress=False, trace=False, ceilings=ceilings)
    assert d.batch_counts.bytes_moved < 1.01 * d.counts.bytes_moved
    assert d.batch_counts.flops == 2 * d.counts.flops
    assert d.regime == "memory"
    assert d.remedies[0].startswith("Batch")  # the weights are read once per call


def test_reprs(shared_ceilings):
    pytest.importorskip("matplotlib")
    with torch.no_grad():
        d = bl.diagnose(
            tiny_ops, torch.ones(1), progress=False, batch_probe=False, ceilings=shared_ceilings
        )
    text, page = str(d), d._repr_html_()
    headline = text.splitlines()[0]
    assert d.regime.upper() in headline and d.confidence in headline and escape(headline) in page
    assert d.remedies and all(r in text and escape(r) in page for r in d.remedies)
    assert "data:image/png;base64," in page
    # one table in both: a header, then a row per probe (three floors at least)
    rows = len(text.splitlines()) - 3 - len(d.above) - len(d.notes) - len(d.remedies)
    assert rows >= 3 and page.count("<tr>") == 1 + rows


def test_progress_lines_go_to_stderr(shared_ceilings, capsys):
    with torch.no_grad():
        bl.diagnose(
            tiny_ops,
            torch.ones(1),
            progress=True,
            batch_probe=False,
            trace=False,
            ceilings=shared_ceilings,
        )
    err = capsys.readouterr().err
    assert "tiny_ops" in err and "[1/4]" in err and "[4/4]" in err


# ----------------------------------------------------------------- bad input


def test_no_tensor_arguments_skips_batch_probe_with_a_note(shared_ceilings, monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "cpu")  # no tensor to say where: the CPU, as its ceilings
    x = torch.ones(1)

    def closure_only():
        return tiny_ops(x)

    d = bl.diagnose(closure_only, progress=False, trace=False, ceilings=shared_ceilings)
    assert d.batch_comparison is None
    assert any("tensor" in n for n in d.notes)
    assert d.regime == "overhead"


def test_weights_as_arguments_skip_the_batch_probe_with_a_note(shared_ceilings):
    # doubling W as well breaks the shapes: the probe is skipped, the error quoted
    d = bl.diagnose(
        torch.mm,
        torch.randn(64, 32),
        torch.randn(32, 16),
        progress=False,
        trace=False,
        ceilings=shared_ceilings,
    )
    assert d.batch_comparison is None
    assert any("RuntimeError" in n and "closure" in n for n in d.notes)  # quoted, and the fix


@pytest.mark.parametrize("error", [AssertionError("batch must be 64"), KeyError("tokens")])
def test_any_failure_of_the_doubled_batch_skips_the_probe(error, shared_ceilings):
    def picky(x):
        if x.shape[0] != 64:
            raise error
        return x + 1

    d = bl.diagnose(picky, torch.ones(64), progress=False, trace=False, ceilings=shared_ceilings)
    assert d.batch_comparison is None and d.regime == "overhead"
    assert any(type(error).__name__ in n for n in d.notes)


def test_out_of_memory_in_the_doubled_batch_says_memory(shared_ceilings):
    def hungry(x):
        if x.shape[0] > 8:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB")
        return x * 2

    d = bl.diagnose(hungry, torch.ones(8, 4), progress=False, trace=False, ceilings=shared_ceilings)
    (note,) = [n for n in d.notes if "batch probe" in n]
    assert "OutOfMemoryError" in note and "released" in note
    assert re.search(r"(\d+)\sB\b", note)[1] == str(16 * 4 * 4)  # the doubled input, 16 x 4 fp32
    assert "closure" not in note


def test_a_slow_call_is_measured_with_fewer_calls(shared_ceilings, monkeypatch):
    from brrrlib import diagnosis

    monkeypatch.setattr(diagnosis, "SLOW_CALL_S", 0.01)  # a call of 20 ms counts as slow
    calls = []

    def slow(x):
        calls.append(1)
        time.sleep(0.02)
        return x + 1

    d = bl.diagnose(slow, torch.ones(4), trace=False, ceilings=shared_ceilings, progress=False,
                    budget_s=0.01, time_limit_s=0.3)  # fmt: skip
    # 3 timed samples, the fewest paired rounds (3), and no untimed first calls in the probe
    c = d.batch_comparison
    assert len(d.timing.samples_s) == 3 and len(c.ratios) + c.rounds_dropped == 3
    # (21 calls here; 23 when the same call is not taken as slow)
    assert len(calls) <= 22 and any("rounds" in n for n in d.notes)  # said in a note
    # a longer time limit affords the usual 10 rounds
    d = bl.diagnose(slow, torch.ones(4), trace=False, ceilings=shared_ceilings, progress=False,
                    budget_s=0.01, time_limit_s=60.0)  # fmt: skip
    c = d.batch_comparison
    assert len(c.ratios) + c.rounds_dropped == 10


def test_errors_from_fn_surface():
    def broken(x):
        raise RuntimeError("the learner's bug")

    with pytest.raises(RuntimeError, match="the learner's bug"):
        bl.diagnose(broken, torch.ones(3), progress=False)


def test_dropout_in_training_mode_gets_a_note(shared_ceilings):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.1))
    d = bl.diagnose(model, torch.ones(4, 8), progress=False, trace=False, batch_probe=False,
                    ceilings=shared_ceilings)  # fmt: skip
    assert any("model.eval()" in n for n in d.notes)
    d = bl.diagnose(model.eval(), torch.ones(4, 8), progress=False, trace=False,
                    batch_probe=False, ceilings=shared_ceilings)  # fmt: skip
    assert not any("model.eval()" in n for n in d.notes)


def test_tensors_on_two_devices_are_a_clear_error():
    model = torch.nn.Linear(4, 4).to("meta")
    with pytest.raises(ValueError, match="on cpu, meta: an op needs its inputs on one device"):
        bl.diagnose(model, torch.ones(2, 4), progress=False)


def test_fn_without_torch_work_is_a_clear_error():
    with pytest.raises(ValueError, match="ran no torch operators"):
        bl.diagnose(lambda x: 3 * 4, torch.ones(3), progress=False)


def test_not_callable():
    with pytest.raises(TypeError, match="fn must be callable"):
        bl.diagnose(torch.ones(3) + 1, progress=False)
    with pytest.raises(ValueError, match="budget_s"):
        bl.diagnose(tiny_ops, torch.ones(1), budget_s=0, progress=False)


# ----------------------------------------------------------------- live GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_known_regimes_on_cuda():
    w = torch.randn(8192, 8192, device="cuda")
    with torch.no_grad():
        big = bl.diagnose(lambda a: a @ w, torch.randn(8192, 8192, device="cuda"), progress=False)
        tiny = bl.diagnose(tiny_ops, torch.ones(1, device="cuda"), progress=False)
        chain = bl.diagnose(
            elementwise_chain, torch.randn(64_000_000, device="cuda"), progress=False
        )
    assert big.regime == "compute", str(big)
    assert tiny.regime == "overhead", str(tiny)
    assert tiny.trace.busy_fraction < 0.5
    assert chain.regime == "memory", str(chain)


# ----------------------------------------------------------------- recorded on an H100
# The verdicts issue reports from an H100 run, replayed on its recorded ceilings: the
# sentence-producing code runs here on a CPU with the GPU's numbers.


@pytest.fixture(scope="module")
def h100():
    from brrrlib import classroom

    (report,) = [r for r in classroom.recorded_reports() if "H100" in r.name]
    return report.machine


def _mm(flops, nbytes, precision, calls=1):
    return OpCount("aten::mm", "matmul", calls, flops, nbytes, precision)


def test_h100_bf16_matmul_is_judged_against_the_bf16_roof(h100):
    # 8192^3 bf16 matmul measured 1,517 µs: 1377% of the fp32 roof, 98% of the bf16 one
    n = 8192
    c = Counts(rows=(_mm(2 * n**3, 3 * 2 * n * n, "bf16"),))
    shares = _shares(c, 1517e-6, h100)
    assert _verdict(c, 1517e-6, h100).regime == "compute" and c.precision == "bf16"
    assert shares["compute"] == pytest.approx(0.98, abs=0.01) and max(shares.values()) < 1.0
    # the same FLOPs in fp32 with TF32 allowed: judged against the 394 TFLOP/s TF32 roof
    c = Counts(rows=(_mm(2 * n**3, 3 * 4 * n * n, "tf32"),))
    compute = _shares(c, 2.9e-3, h100)["compute"]
    assert compute == pytest.approx(2 * n**3 / 393.86e12 / 2.9e-3, rel=1e-3) and compute < 1.0


def test_h100_bf16_encoder_idle_with_a_flat_batch_is_overhead(h100):
    # batch 32, 128 tokens: the GPU idled 87% of the time and doubling the batch cost x1.10.
    # Against the fp32 roof its FLOPs "explained 128%"; against bf16 they explain 9%.
    one = Counts(rows=(_mm(6.6e11, 2e9, "bf16", 72),
                       OpCount("aten::add", "pointwise", 500, 10**8, 10**9)))  # fmt: skip
    two = Counts(rows=(_mm(1.32e12, 3e9, "bf16", 72),
                       OpCount("aten::add", "pointwise", 500, 2 * 10**8, 2 * 10**9)))  # fmt: skip
    v = _verdict(one, 10e-3, h100, _busy_trace(0.13, runs=3), two, _pair(10e-3, 11e-3))
    assert v.regime == "overhead" and v.confidence == "high", v
    assert v.scores["overhead"] == pytest.approx(0.87)  # the idle GPU's share
    shares = _shares(one, 10e-3, h100)
    assert shares["compute"] < 0.15 and max(shares.values()) < 1.0


def test_h100_bf16_resnet_at_71_percent_of_bandwidth_is_memory(h100):
    # channels-last, batch 256: 71% of the bandwidth and 15% of the bf16 roof
    t = 0.1
    c = Counts(rows=(_mm(0.15 * 740.48e12 * t, 0, "bf16", 160),
                     OpCount("aten::add", "pointwise", 160, 0, int(0.71 * 2.986e12 * t))))  # fmt: skip
    v = _verdict(c, t, h100, _busy_trace(0.97, runs=3))
    assert v.regime == "memory" and v.confidence == "high" and v.against == ()
    shares = _shares(c, t, h100)
    assert shares["memory"] == pytest.approx(0.71, abs=0.01)
    assert shares["compute"] == pytest.approx(0.15, abs=0.01)


def test_h100_overhead_floor_is_a_floor(h100):
    # mystery_b: 240 in-place ops measured 2.608 ms; at 7.4 µs each the floor is 68%, not 106%
    c = Counts(rows=(OpCount("aten::add_", "pointwise", 240, 10**5, 10**6),))
    assert _verdict(c, 2.608e-3, h100).regime == "overhead"
    assert _shares(c, 2.608e-3, h100)["overhead"] == pytest.approx(0.68, abs=0.01)


def test_small_floors_and_a_flat_batch_mean_overhead():
    # a tiny model: every floor under 15%, the batch doubled its work and bytes, the time
    # stayed within x0.8-x1.22 (a wide interval, but wholly below 1.3)
    one = _counts(
        ("aten::mm", "matmul", 6, 2 * 10**6, 4 * 10**5),
        ("aten::add", "pointwise", 6, 10**4, 4 * 10**5),
    )
    two = _counts(
        ("aten::mm", "matmul", 6, 4 * 10**6, 8 * 10**5),
        ("aten::add", "pointwise", 6, 2 * 10**4, 8 * 10**5),
    )
    wide_flat = Comparison(
        a=_timing(1e-3), b=_timing(1.08e-3), ratios=(0.8, 1.0, 1.08, 1.2, 1.22) * 2
    )
    batch = batch_evidence(one, two, wide_flat)
    assert not batch.narrow and batch.flat
    v = _verdict(one, 1e-3, CEIL, _busy_trace(0.6, "cpu"), two, wide_flat)
    assert v.regime == "overhead" and v.settled_by == FLAT_BATCH and v.confidence == "medium"


def test_a_noisy_timing_is_said_in_the_headline(shared_ceilings):
    # calls that busy-wait 1, 2, 3 or 4 ms in turn: an IQR of about 60% of the median
    calls = []

    def uneven(x):
        calls.append(1)
        end = time.perf_counter() + 1e-3 * (1 + len(calls) % 4)
        while time.perf_counter() < end:
            pass
        return x + 1

    d = bl.diagnose(uneven, torch.ones(4), progress=False, trace=False, batch_probe=False,
                    budget_s=0.1, ceilings=shared_ceilings)  # fmt: skip
    assert d.timing.noisy
    assert "NOISY" in str(d).splitlines()[0], str(d)  # the headline, beside the IQR


# ------------------------------------------------------------- a floor above the time


class _FakeCounts:
    """Counts with only what the floors read: FLOPs (fp32 matmul), bytes and ops."""

    def __init__(self, flops=0, bytes_moved=0, ops=1):
        self.flops, self.bytes_moved, self.ops, self.work_ops = flops, bytes_moved, ops, ops

    def flops_by_precision(self, category=None):
        return {"fp32": self.flops} if self.flops else {}


def _slow_ceilings(**overrides):
    """A CPU whose cached ceilings are far below anything it really does."""
    values = dict(
        device="cpu",
        matmul_flops_per_s=1e3,
        matmul_flops_per_s_by_dtype={"fp32": 1e3},
        vector_flops_per_s=1e3,
        mem_bandwidth_bytes_per_s=1e3,
        op_overhead_s=1e-12,
        special_per_s={},
        vector_method="compiled",
        matmul_size=64,
    )
    return SimpleNamespace(**{**values, **overrides})


def test_a_read_only_call_is_floored_by_the_read_roof_a_writing_one_by_the_fastest_write():
    c = dataclasses.replace(
        CEIL, bandwidth_by_form_bytes_per_s={"sum (read)": 5e9, "dot (read)": 8e9, "copy_": 10e9}
    )
    llc = bl.machine.last_level_cache_bytes(torch.device("cpu"))
    rows = 2 * llc // (4 * 256)  # weights twice the last-level cache, on the meta device
    w, x = torch.empty(rows, 256, device="meta"), torch.empty(256, device="meta")
    gemv = bl.count(torch.mv, w, x)
    assert bl.diagnosis.floors(gemv, c).memory_s == pytest.approx(gemv.bytes_moved / 8e9)
    small = bl.count(torch.mv, w[:256], x)  # a cache holds it: the faster roof, still a floor
    assert bl.diagnosis.floors(small, c).memory_s == pytest.approx(small.bytes_moved / 10e9)
    add = bl.count(torch.add, x, x)
    assert bl.diagnosis.floors(add, c).memory_s == pytest.approx(add.bytes_moved / 10e9)


def test_a_memory_floor_above_the_time_is_the_cache_only_when_the_bytes_fit():
    llc = bl.machine.last_level_cache_bytes(torch.device("cpu"))
    fits = bl.diagnosis.above_floors(_FakeCounts(bytes_moved=llc // 2), 1e-3, _slow_ceilings())
    assert [(a.regime, a.mechanism) for a in fits] == [("memory", "cache")]
    assert fits[0].evidence_ratio == pytest.approx(2.0)
    big = bl.diagnosis.above_floors(_FakeCounts(bytes_moved=4 * llc), 1e-3, _slow_ceilings())
    assert [(a.regime, a.mechanism) for a in big] == [("memory", "unexplained")]
    # the level named is the nearest cache that holds the bytes
    caches = bl.machine.caches(torch.device("cpu")) or (("last-level", llc),)
    name, nearest = caches[0]
    (small,) = bl.diagnosis.above_floors(_FakeCounts(bytes_moved=nearest), 1e-3, _slow_ceilings())
    assert (small.mechanism, small.level, small.evidence_ratio) == ("cache", name, 1.0)


def test_a_compute_floor_above_the_time_probes_the_cached_ceiling():
    counts, c = _FakeCounts(flops=10**6), _slow_ceilings()
    (probed,) = bl.diagnosis.above_floors(counts, 1e-3, c)
    assert probed.mechanism == "stale_ceiling" and probed.evidence_ratio > 1
    # a ceiling no torch.mm reaches: the probe does not call it stale
    fast = _slow_ceilings(matmul_flops_per_s=1e18, matmul_flops_per_s_by_dtype={"fp32": 1e18})
    assert bl.diagnosis.above_floors(_FakeCounts(flops=10**6), 1e-15, fast)[0].mechanism == (
        "unexplained"
    )


def test_an_overhead_floor_above_the_time_means_cheaper_ops_by_how_much():
    c = _slow_ceilings(op_overhead_s=1.0)
    (above,) = bl.diagnosis.above_floors(_FakeCounts(ops=10), 2.0, c)
    assert above.regime == "overhead" and above.mechanism == "cheaper_ops"
    assert above.share == pytest.approx(5.0) and above.evidence_ratio == pytest.approx(5.0)
    assert bl.diagnosis.above_floors(_FakeCounts(ops=1), 2.0, c) == ()
