"""Shares against a same-run reference of the workload's own pattern (bl.share_of)."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import brrrlib as bl
from brrrlib.references import Share


@pytest.fixture
def one_thread():
    """One thread: on a busy 2-core machine a two-thread kernel waits at its barrier for
    whole scheduler slices, on either side of a comparison, and its ratio says little."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_reference_kernel_itself_reads_about_one_share(one_thread):
    x = torch.randn(2**20)
    out = torch.empty_like(x)
    s = bl.share_of(out.copy_, x, work=8 * x.numel(), pattern="copy", budget_s=1.0)
    assert s.low <= s.share <= s.high
    assert 0.5 < s.share < 2.0  # the same kernel on the same bytes
    assert s.unit == "B/s" and s.reference_rate > 0 and s.rate > 0


def test_the_share_reads_the_rounds_and_is_above_only_when_the_interval_is():
    # B (the workload) took half the reference's time per round on the same work: x2
    timing = SimpleNamespace
    job = timing(a=timing(median_s=2e-3), b=timing(median_s=1e-3), ratio=0.5, low=0.45, high=0.55)
    s = Share("w", "read", "x.sum()", "B/s", work=1e6, reference_work=1e6, comparison=job)
    assert s.share == pytest.approx(2.0) and s.rate == pytest.approx(2 * s.reference_rate)
    assert s.low == pytest.approx(1 / 0.55) and s.high == pytest.approx(1 / 0.45)
    assert s.above
    wide = timing(a=job.a, b=job.b, ratio=0.5, low=0.45, high=1.2)  # the interval reaches x1
    assert not Share("w", "read", "x.sum()", "B/s", 1e6, 1e6, wide).above
    # twice the work per call at the same time: the share doubles
    assert Share("w", "read", "x.sum()", "B/s", 2e6, 1e6, job).share == pytest.approx(4.0)


def test_a_matmul_shares_against_a_square_mm_of_the_named_size(one_thread):
    n = 256
    a, b = torch.randn(n, n), torch.randn(n, n)
    s = bl.share_of(F.linear, a, b, work=2 * n**3, pattern="matmul", n=n, budget_s=1.0)
    assert s.unit == "FLOP/s" and f"n={n}" in s.reference
    assert 0.3 < s.share < 3.0  # the same FLOPs on the same shape, another entry point


def test_the_device_comes_from_a_partial_or_a_bound_method():
    x = torch.randn(1024)
    fn = functools.partial(torch.mul, x, 2.0)
    s = bl.share_of(fn, work=8 * x.numel(), pattern="copy", budget_s=0.1)
    assert s.comparison.a.median_s > 0


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"work": 8.0, "pattern": "triad"}, "pattern"),
        ({"work": 2.0, "pattern": "matmul"}, "n="),
        ({"work": 0, "pattern": "read"}, "work"),
        ({"work": -1.0, "pattern": "copy"}, "work"),
    ],
)
def test_bad_input_names_the_argument(kwargs, named):
    x = torch.randn(16)
    with pytest.raises(ValueError, match=named):
        bl.share_of(x.sum, **kwargs)
