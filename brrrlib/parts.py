"""The peak from physics: what a CPU's parts allow, set beside what was measured."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from brrrlib import _fmt, machine

__all__ = ["CpuParts", "cpu_parts"]

#: No x86 or Arm core has shipped running faster than this (6.2 GHz at the most, 2024).
MAX_CLOCK_HZ = 6.5e9


@dataclass(frozen=True)
class CpuParts:
    """What a CPU's fp32 peak is made of: cores x FMA units x lanes x 2 FLOPs x clock."""

    cores: int
    fma_units: int
    lanes: int
    isa: str  # the instructions that set lanes
    clock_hz: float | None  # as the system reports it; None where unknown

    @property
    def flops_per_cycle(self) -> int:
        """fp32 FLOPs per cycle with every FMA unit busy: cores x units x lanes x 2."""
        return self.cores * self.fma_units * self.lanes * 2

    @property
    def peak_flops_per_s(self) -> float | None:
        """The fp32 peak at the reported clock (None where the clock is unknown)."""
        return self.flops_per_cycle * self.clock_hz if self.clock_hz else None

    def implied_clock_hz(self, flops_per_s: float, flops_per_lane: int = 2) -> float:
        """The clock ``flops_per_s`` needs, every unit busy (``flops_per_lane``: 2 FMA, 1 mul)."""
        return flops_per_s / (self.cores * self.fma_units * self.lanes * flops_per_lane)

    def check(self, what: str, flops_per_s: float, flops_per_lane: int = 2) -> None:
        """A ``RuntimeError`` when ``flops_per_s`` needs a clock no core has (a timing bug)."""
        clock = self.implied_clock_hz(flops_per_s, flops_per_lane)
        if clock > MAX_CLOCK_HZ:
            rate = _fmt.si(flops_per_s, "FLOP/s")
            raise RuntimeError(f"{what} {rate} needs {clock / 1e9:.1f} GHz on {self}: a timing bug")

    def __str__(self) -> str:
        """The peak's product, ``cores x FMA x lanes x 2 FLOPs x clock = peak``."""
        clock = f" x {self.clock_hz / 1e9:.2f} GHz" if self.clock_hz else ""
        peak = f" = {_fmt.si(self.peak_flops_per_s, 'FLOP/s')}" if self.clock_hz else ""
        units = f"{self.cores} cores x {self.fma_units} FMA x {self.lanes} lanes ({self.isa})"
        return f"{units} x 2 FLOPs{clock}{peak}"


#: ``(flag, lanes, ISA, FMA units)``, widest vectors first: the first flag the CPU lists wins.
VECTOR_UNITS = (
    ("avx512f", 16, "AVX-512", 2),
    ("avx2", 8, "AVX2", 2),
    ("avx", 8, "AVX", 2),
    ("asimd", 4, "NEON", 4),  # unless the CPU has SVE, whose width it does not state
    ("sse2", 4, "SSE2", 2),
)


def cpu_parts(threads: int | None = None) -> CpuParts | None:
    """This CPU's parts for ``threads`` cores (default: torch's threads); None if lanes unknown."""
    flags = machine.cpu_flags()
    for flag, lanes, isa, units in VECTOR_UNITS:
        if flag in flags and not (flag == "asimd" and "sve" in flags):
            cores = min(threads or torch.get_num_threads(), os.cpu_count() or 1)
            return CpuParts(cores, units, lanes, isa, machine.cpu_clock_hz())
    return None
