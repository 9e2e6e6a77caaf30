"""The rules every executed chapter cell is held to (``conftest.py`` at the repository root).

They are checked on the outputs the course printed on a 2-core AVX2 VM before its
instruments were fixed: each rule must catch what was wrong there, and let through
what was right.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "course_rules", Path(__file__).resolve().parents[1] / "conftest.py"
)
rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rules)


def test_a_share_above_100_percent_is_caught_once():
    seen = "big add: 0.125 FLOP/byte, 3.79 GFLOP/s = 139% of the roof above it, close to its roof"
    assert len(rules.output_problems(seen)) == 1


@pytest.mark.parametrize(
    ("line", "caught"),
    [
        ("matmul: 134 GFLOP/s, 103% of the fp32 peak", True),
        ("clamp_min(x, 0, out=out)   24.2 GB/s = 110% of the ceiling", True),
        ("matmul: 8.96 GFLOP/s, 716% of the bf16 peak", True),
        ("matmul: 99% of the FLOPs, 52% of the time", False),
        ("relu reads 98% of the bandwidth ceiling", False),
        ("1,521% of the peak: the ceiling was not the true peak here", True),  # no mechanism
        ("compute floor 130% of the time: stale_ceiling (x1.41)", False),  # a measured one
        ("memory floor 240% of the time: cache (x12.00)", False),
        ("compute floor 104% of the time: unexplained", False),
    ],
)
def test_a_share_above_100_percent_is_caught_unless_explained(line, caught):
    assert bool(rules.output_problems(line)) is caught


@pytest.mark.parametrize(
    ("line", "caught"),
    [
        ("bf16 vs fp32: can't tell: x69.7 time (95% interval x48.2-x101)", True),
        ("can't tell: x0.97 time (95% interval x0.90-x1.06 contains x1)", False),
        ("fused against eager: too noisy to tell (x0.52-x0.67)", True),
    ],
)
def test_cant_tell_is_only_for_an_interval_that_contains_one(line, caught):
    assert bool(rules.output_problems(line)) is caught
