"""Tests for brrrlib.diagnosis: the verdict's arithmetic, six workloads of known regime, bad input."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import brrrlib as bl
from brrrlib.ceilings import Ceilings
from brrrlib.counting import Counts, OpCount
from brrrlib.diagnosis import REMEDIES, Diagnosis, _weigh
from brrrlib.timing import Timing
from brrrlib.trace import Interval, Trace

# ----------------------------------------------------------------- the verdict, by arithmetic

# A made-up machine: 100 GFLOP/s matmul, 50 GFLOP/s vector, 10 GB/s, 2 µs per op.
CEIL = Ceilings("cpu", "test machine", 100e9, 50e9, 10e9, 2e-6)


def _counts(*rows):
    return Counts(rows=tuple(OpCount(*r) for r in rows))


def _timing(seconds):
    return Timing(samples_s=(seconds,) * 5, device="cpu")


def _busy_trace(busy_fraction, device="cuda"):
    iv = Interval("kernel", 0.0, busy_fraction * 1e-3, "device", "pointwise", 0)
    return Trace((iv,), ((0.0, 1e-3),), device)


def test_weigh_compute():
    # 1 GFLOP of matmul in 20 ms: the matmul model needs 10 ms (50%); 12 MB need 1.2 ms (6%)
    c = _counts(("aten::mm", "matmul", 1, 10**9, 12 * 10**6))
    regime, confidence, _, shares, evidence = _weigh(c, _timing(0.02), CEIL, None, None, None)
    assert regime == "compute"
    assert shares["compute"] == pytest.approx(0.5)
    assert shares["memory"] == pytest.approx(0.06)
    assert shares["overhead"] == pytest.approx(2e-6 / 0.02)
    assert confidence == "high"
    assert [e.probe for e in evidence][:3] == [
        "roofline: compute",
        "roofline: memory",
        "overhead: op count",
    ]


def test_weigh_vector_flops_use_the_vector_ceiling():
    # 1 GFLOP of elementwise work is 20 ms at the 50 GFLOP/s vector ceiling, not 10 ms
    c = _counts(("aten::mul", "pointwise", 1, 10**9, 10**6))
    _, _, _, shares, _ = _weigh(c, _timing(0.04), CEIL, None, None, None)
    assert shares["compute"] == pytest.approx(0.5)


def test_weigh_failed_vector_ceiling_falls_back_to_matmul():
    # torch.compile failed, so the vector ceiling is an eager op's 5 GFLOP/s: elementwise
    # FLOPs are then judged against the 100 GFLOP/s matmul ceiling
    bad = dataclasses.replace(
        CEIL, vector_flops_per_s=5e9, vector_method="eager addcmul, torch.compile failed (x)"
    )
    c = _counts(("aten::_softmax", "normalization", 1, 10**8, 10**8))
    _, _, _, shares, _ = _weigh(c, _timing(0.02), bad, None, None, None)
    assert shares["compute"] == pytest.approx(10**8 / 100e9 / 0.02)
    assert shares["memory"] == pytest.approx(0.5)


def test_weigh_overhead_from_op_count_and_idle_device():
    # 100 tiny ops in 400 µs: 100 x 2 µs = 200 µs explains 50%
    c = _counts(("aten::add", "pointwise", 100, 100, 1200))
    regime, _, _, shares, _ = _weigh(c, _timing(400e-6), CEIL, None, None, None)
    assert regime == "overhead" and shares["overhead"] == pytest.approx(0.5)
    # a GPU idle 80% of the time lifts overhead's share to at least 0.8
    regime, _, _, shares, evidence = _weigh(c, _timing(400e-6), CEIL, _busy_trace(0.2), None, None)
    assert shares["overhead"] == pytest.approx(0.8)
    busy = [e for e in evidence if e.probe.startswith("device busy")][0]
    assert busy.says == "overhead" and busy.value == pytest.approx(0.2)
    # on a CPU "idle" also holds preemption by other programs: evidence, not a share
    _, _, _, shares, evidence = _weigh(
        c, _timing(400e-6), CEIL, _busy_trace(0.2, "cpu"), None, None
    )
    assert shares["overhead"] == pytest.approx(0.5)
    assert evidence[-1].says == "overhead"


def test_weigh_idle_device_contradicts_a_memory_verdict():
    c = _counts(("aten::mul", "pointwise", 1, 10**6, 8 * 10**6))  # 0.8 ms of bytes
    _, confidence, reason, _, _ = _weigh(
        c, _timing(1e-3), CEIL, _busy_trace(0.3, "cpu"), None, None
    )
    assert confidence != "high" and "idled 70%" in reason


def test_weigh_gemv_caveat_flat_time_with_flat_bytes_is_memory():
    # [1, D] x [D, D] with D=4096: 64 MB of weights, 6.4 ms at 10 GB/s; measured 8 ms.
    # Doubling the batch: bytes barely grow, time barely grows, FLOPs double.
    D = 4096
    one = _counts(("aten::mm", "matmul", 1, 2 * D * D, 4 * (D * D + 2 * D)))
    two = _counts(("aten::mm", "matmul", 1, 4 * D * D, 4 * (D * D + 4 * D)))
    regime, confidence, _, _, evidence = _weigh(
        one, _timing(8e-3), CEIL, _busy_trace(0.99), two, _timing(8.2e-3)
    )
    assert regime == "memory" and confidence == "high"
    batch = evidence[-1]
    assert batch.probe == "batch x2" and batch.value == pytest.approx(8.2 / 8)
    assert "memory" in batch.says
    assert "not proof of overhead" in batch.reading


def test_weigh_batch_disagreement_lowers_confidence():
    # roofline says compute, but doubling the batch left the time flat and the FLOPs doubled
    one = _counts(("aten::mm", "matmul", 1, 10**9, 10**6))
    two = _counts(("aten::mm", "matmul", 1, 2 * 10**9, 2 * 10**6))
    _, confidence, reason, _, evidence = _weigh(one, _timing(0.02), CEIL, None, two, _timing(0.02))
    assert evidence[-1].says == "overhead"
    assert confidence != "high" and "batch scaling points to overhead" in reason


def test_weigh_close_call_is_low_confidence():
    # compute and memory models both explain ~40%: the workload sits at the ridge
    c = _counts(("aten::mm", "matmul", 1, 4 * 10**8, 4 * 10**7))
    regime, confidence, reason, _, _ = _weigh(c, _timing(0.01), CEIL, None, None, None)
    assert regime in ("compute", "memory")
    assert confidence == "low" and "close" in reason


def test_weigh_close_call_settled_by_batch_scaling():
    # 200 ops moving 3.2 MB in 800 µs: overhead explains 400 µs (50%), memory 320 µs (40%).
    one = _counts(("aten::add_", "pointwise", 200, 10**5, 32 * 10**5))
    two = _counts(("aten::add_", "pointwise", 200, 2 * 10**5, 64 * 10**5))
    regime, confidence, reason, shares, _ = _weigh(
        one, _timing(800e-6), CEIL, None, two, _timing(800e-6)
    )
    assert shares["memory"] == pytest.approx(0.4) and shares["overhead"] == pytest.approx(0.5)
    # doubling the tensors doubled the bytes but the time stayed flat: overhead
    assert regime == "overhead" and confidence == "medium"
    assert "cannot separate" in reason
    # the same close call, but the time doubled with the bytes: memory, against the lead
    regime, confidence, reason, _, _ = _weigh(
        one, _timing(800e-6), CEIL, None, two, _timing(1600e-6)
    )
    assert regime == "memory" and confidence == "medium"
    assert "followed memory" in reason


def test_weigh_disturbed_batch_run_says_nothing():
    c = _counts(("aten::mm", "matmul", 1, 10**9, 10**6))
    c2 = _counts(("aten::mm", "matmul", 1, 2 * 10**9, 2 * 10**6))
    _, confidence, _, _, evidence = _weigh(c, _timing(0.02), CEIL, None, c2, _timing(2.0))
    assert evidence[-1].says == "-" and "disturbed" in evidence[-1].reading
    assert confidence == "high"


def test_double_batch_reaches_into_lists():
    from brrrlib.diagnosis import _double_batch

    params = [torch.ones(3), torch.ones(2, 2)]
    args2, kwargs2 = _double_batch((params, 5), {"scale": torch.tensor(2.0), "w": torch.ones(4)})
    assert [tuple(p.shape) for p in args2[0]] == [(6,), (4, 2)]
    assert args2[1] == 5
    assert kwargs2["scale"].dim() == 0 and kwargs2["w"].shape == (8,)
    assert _double_batch((3, "x"), {}) is None


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
    "softmax": (softmax, lambda: torch.randn(4096, 2048), "memory"),
}


@pytest.fixture(scope="session")
def shared_ceilings(tmp_path_factory):
    """This machine's ceilings, measured twice per session in a throwaway cache.

    A ceiling is what the machine *can* do, so each number is the better of the
    two measurements (``measure_ceilings`` itself keeps the fast end of its
    samples). On a shared 2-core machine one measurement can come out 2x low
    while another program runs; a batch-1 GEMV sits at 0.5 FLOP/byte, close
    to a CPU's ridge point (~1-4 FLOP/byte), so a low matmul ceiling would
    blur the very distinction this suite checks.
    """
    mp = pytest.MonkeyPatch()
    mp.setenv("BRRR_CACHE_DIR", str(tmp_path_factory.mktemp("brrr_cache")))
    first = bl.measure_ceilings(progress=False)
    again = bl.measure_ceilings(progress=False, refresh=True)
    ceilings = dataclasses.replace(
        first,
        matmul_flops_per_s=max(first.matmul_flops_per_s, again.matmul_flops_per_s),
        vector_flops_per_s=max(first.vector_flops_per_s, again.vector_flops_per_s),
        mem_bandwidth_bytes_per_s=max(
            first.mem_bandwidth_bytes_per_s, again.mem_bandwidth_bytes_per_s
        ),
        op_overhead_s=min(first.op_overhead_s, again.op_overhead_s),
    )
    yield ceilings
    mp.undo()


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_known_regimes(name, shared_ceilings):
    fn, make_input, expected = WORKLOADS[name]
    with torch.no_grad():
        d = bl.diagnose(fn, make_input(), progress=False, label=name, ceilings=shared_ceilings)
    assert isinstance(d, Diagnosis)
    assert d.regime == expected, str(d)
    assert set(REMEDIES[expected]) <= set(d.remedies)
    # the verdict's share leads the runner-up clearly: no coin flips on a busy machine
    others = [v for k, v in d.shares.items() if k != expected]
    assert d.shares[expected] > 1.5 * max(others), str(d)
    assert d.ceilings == shared_ceilings
    assert d.batch_timing is not None and d.trace is not None


def test_gemv_batch_probe_does_not_call_it_overhead(shared_ceilings):
    # the essay's caveat: doubling a batch-1 GEMV does not double the bytes
    with torch.no_grad():
        d = bl.diagnose(
            gemv, torch.randn(1, 4096), progress=False, trace=False, ceilings=shared_ceilings
        )
    assert d.batch_counts.bytes_moved < 1.01 * d.counts.bytes_moved
    assert d.batch_counts.flops == 2 * d.counts.flops
    assert d.regime == "memory"
    assert d.remedies[0].startswith("Batch more")  # the weights are read once per call


def test_reprs(shared_ceilings):
    pytest.importorskip("matplotlib")
    with torch.no_grad():
        d = bl.diagnose(
            tiny_ops, torch.ones(1), progress=False, batch_probe=False, ceilings=shared_ceilings
        )
    text = str(d)
    assert "OVERHEAD-bound" in text and "what to do" in text and "torch.compile" in text
    page = d._repr_html_()
    assert "data:image/png;base64," in page and "<table>" in page and "overhead-bound" in page


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
    assert "diagnose tiny_ops [1/4]" in err and "weighing the evidence" in err


# ----------------------------------------------------------------- bad input


def test_no_tensor_arguments_skips_batch_probe_with_a_note(shared_ceilings):
    x = torch.ones(1)

    def closure_only():
        return tiny_ops(x)

    d = bl.diagnose(closure_only, progress=False, trace=False, ceilings=shared_ceilings)
    assert d.batch_timing is None
    assert any("no argument is a tensor" in n for n in d.notes)
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
    assert d.batch_timing is None
    assert any("fn failed" in n and "weights inside fn" in n for n in d.notes)


def test_errors_from_fn_surface():
    def broken(x):
        raise RuntimeError("the learner's bug")

    with pytest.raises(RuntimeError, match="the learner's bug"):
        bl.diagnose(broken, torch.ones(3), progress=False)


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
