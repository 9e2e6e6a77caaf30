"""The peak from the chip's parts, and the ceilings it refuses (bl.parts)."""

from __future__ import annotations

import pytest

from brrrlib import machine, parts


@pytest.mark.parametrize(
    "flags, lanes, units",
    [
        ({"sse2", "avx", "avx2", "fma", "avx512f"}, 16, 2),
        ({"sse2", "avx", "avx2", "fma"}, 8, 2),
        ({"fp", "asimd"}, 4, 4),
        ({"sse2"}, 4, 2),
    ],
)
def test_the_lanes_are_the_widest_vectors_the_cpu_lists(monkeypatch, flags, lanes, units):
    # a seam: the flags of CPUs this machine is not
    monkeypatch.setattr(machine, "cpu_flags", lambda: frozenset(flags))
    p = parts.cpu_parts(threads=2)
    assert (p.lanes, p.fma_units) == (lanes, units)
    assert p.flops_per_cycle == p.cores * units * lanes * 2


def test_unknown_lanes_give_no_parts(monkeypatch):
    for flags in (set(), {"fp", "asimd", "sve"}):  # no cpuinfo; SVE of unstated width
        monkeypatch.setattr(machine, "cpu_flags", lambda f=flags: frozenset(f))
        assert parts.cpu_parts() is None


def test_the_clock_a_rate_needs():
    p = parts.CpuParts(cores=2, fma_units=2, lanes=16, isa="AVX-512", clock_hz=2.6e9)
    assert p.peak_flops_per_s == pytest.approx(2 * 2 * 16 * 2 * 2.6e9)
    assert p.implied_clock_hz(p.peak_flops_per_s) == pytest.approx(2.6e9)
    assert p.implied_clock_hz(64e9, flops_per_lane=1) == pytest.approx(1e9)  # plain multiplies
    assert parts.CpuParts(2, 2, 16, "AVX-512", None).peak_flops_per_s is None


def test_a_rate_no_clock_could_give_is_refused_and_a_possible_one_kept():
    small = parts.CpuParts(cores=1, fma_units=2, lanes=8, isa="AVX2", clock_hz=3e9)
    assert small.check("matmul", 80e9) is None  # 2.5 GHz
    with pytest.raises(RuntimeError, match="GHz"):
        small.check("matmul", 1e12)  # 31 GHz
    with pytest.raises(RuntimeError, match="vector"):
        small.check("vector", 200e9, flops_per_lane=1)  # 12.5 GHz
