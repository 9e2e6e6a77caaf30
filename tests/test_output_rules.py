"""The rules every executed chapter cell is held to (``conftest.py`` at the repository root).

They are checked on the outputs the course printed on a 2-core AVX2 VM before its
instruments were fixed: each rule must catch what was wrong there, and let through
what was right.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "course_rules", Path(__file__).resolve().parents[1] / "conftest.py"
)
rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rules)


def test_a_share_above_100_percent_is_caught_unless_explained():
    seen = "big add: 0.125 FLOP/byte, 3.79 GFLOP/s = 139% of the roof above it, close to its roof"
    assert len(rules.output_problems(seen)) == 1
    assert rules.output_problems("matmul: 134 GFLOP/s, 103% of the fp32 peak")
    assert rules.output_problems("clamp_min(x, 0, out=out)   24.2 GB/s = 110% of the ceiling")
    assert rules.output_problems("matmul: 8.96 GFLOP/s, 716% of the bf16 peak")
    assert not rules.output_problems("matmul: 99% of the FLOPs, 52% of the time")
    assert not rules.output_problems("relu reads 98% of the bandwidth ceiling")
    assert not rules.output_problems("1,521% of the peak: the ceiling was not the true peak here")


def test_cant_tell_is_only_for_an_interval_that_contains_one():
    assert rules.output_problems("bf16 vs fp32: can't tell: x69.7 time (95% interval x48.2-x101)")
    assert not rules.output_problems("can't tell: x0.97 time (95% interval x0.90-x1.06 contains x1)")
    assert rules.output_problems("fused against eager: too noisy to tell (x0.52-x0.67)")
