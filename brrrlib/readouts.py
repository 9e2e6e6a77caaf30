"""The sentences the chapters print, written from the numbers just measured.

A Markdown cell cannot look at a measurement, so a claim that depends on this
machine (is the matmul close to its roof? did bf16 help, and why?) is printed
by a small function here that reads the measured numbers and says what they
show, on a laptop CPU and on an H100 alike. Each returns plain text; the tests
run them with a CPU's ceilings and with an H100's recorded ones and check
what they say.
"""

from __future__ import annotations

from brrrlib import _fmt  # noqa: F401

__all__: list[str] = []


# ------------------------------------------------------------------ chapters 00 to 02
# Written in brrrlib._readouts_00_02 (one module per chapter group keeps each short).

from brrrlib._readouts_00_02 import (  # noqa: E402
    achieved_bandwidth,
    bigger_job,
    checkpointing,
    element_budget,
    flops_gap,
    fresh_outputs,
    fusion,
    gelu_vs_relu,
    generations,
    knee,
    matmul_share,
    memory_bound,
    nearest_spec,
    peak_fraction,
    precision_shift,
    precision_speedup,
    recorded_knees,
    recorded_ladder,
    ridge_points,
    roofline_points,
    units,
)

__all__ += [
    "achieved_bandwidth", "bigger_job", "checkpointing", "element_budget", "flops_gap",
    "fresh_outputs", "fusion", "gelu_vs_relu", "generations", "knee", "matmul_share",
    "memory_bound", "nearest_spec", "peak_fraction", "precision_shift", "precision_speedup",
    "recorded_knees", "recorded_ladder", "ridge_points", "roofline_points", "units",
]  # fmt: skip


# ------------------------------------------------------------------ chapters 03 and 04
