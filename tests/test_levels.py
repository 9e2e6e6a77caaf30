"""The memory hierarchy, measured: which level a working set lives in, and each level's roof."""

from __future__ import annotations

import pytest
import torch

import brrrlib as bl
from brrrlib.levels import Levels

KiB, MiB = 2**10, 2**20
CACHES = (("L1", 64 * KiB), ("L2", 2 * MiB), ("L3", 64 * MiB))


def _levels(reads, op_overhead_s=1e-6, caches=CACHES):
    """Levels from ``{working set: (bytes/s, seconds per call)}``, read points only."""
    points = tuple(("read", size, rate, call_s) for size, (rate, call_s) in sorted(reads.items()))
    return Levels("cpu", "test CPU", 2, caches, points, op_overhead_s)


def test_a_working_set_lives_in_the_nearest_level_that_holds_it():
    levels = _levels({})
    assert levels.level_of(32 * KiB) == "L1"
    assert levels.level_of(64 * KiB) == "L1"
    assert levels.level_of(64 * KiB + 1) == "L2"
    assert levels.level_of(64 * MiB) == "L3"
    assert levels.level_of(1 << 30) == "memory"


def test_each_level_s_roof_is_its_fastest_point_and_overhead_bound_calls_set_none():
    levels = _levels(
        {
            16 * KiB: (20e9, 0.8e-6),  # under ten tiny ops: it timed the dispatch
            1 * MiB: (150e9, 7e-6),  # 7 tiny ops: still overhead-bound
            2 * MiB: (120e9, 17e-6),
            16 * MiB: (40e9, 400e-6),
            32 * MiB: (45e9, 700e-6),
            1 << 30: (12e9, 90e-3),
        }
    )
    assert levels.roof("L1") is None
    assert levels.roof("L2") == 120e9
    assert levels.roof("L3") == 45e9
    assert levels.roofs() == {"L1": None, "L2": 120e9, "L3": 45e9, "memory": 12e9}


def test_a_last_cache_that_reads_at_memory_speed_holds_what_the_sweep_found():
    reported = (*CACHES[:2], ("L3", 480 * MiB))  # a virtual machine reports the host's L3
    sweep = {8 * MiB: (45e9, 1e-3), 32 * MiB: (40e9, 1e-3), 64 * MiB: (13e9, 1e-2)}
    sweep.update({256 * MiB: (12e9, 1e-2), 1 << 30: (12.5e9, 1e-1)})
    levels = _levels(sweep, caches=reported)
    assert levels.held[-1] == ("L3", 32 * MiB)
    assert levels.level_of(64 * MiB) == "memory"
    assert levels.caches[-1] == ("L3", 480 * MiB)  # as reported, kept
    # without a point past the reported size there is nothing to judge it by
    assert _levels({32 * MiB: (40e9, 1e-3)}, caches=reported).held == reported


def test_the_sweep_runs_on_this_machine_and_orders_its_points():
    levels = bl.measure_levels(budget_s=0.005)
    sizes = [size for pattern, size, *_ in levels.points if pattern == "read"]
    assert sizes == sorted(sizes) and len(sizes) >= 5
    assert {p for p, *_ in levels.points} == {"read", "copy"}
    assert all(rate > 0 and call_s > 0 for _, _, rate, call_s in levels.points)
    assert [name for name, _ in levels.held] == [name for name, _ in levels.caches]
    assert levels.op_overhead_s > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.gpu
def test_the_sweep_reaches_past_the_gpu_s_l2():
    levels = bl.measure_levels("cuda", budget_s=0.01)
    assert levels.caches[0][0] == "L2"
    assert levels.roofs()["memory"] is not None
