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
    matmul_sweep,
    memory_bound,
    nearest_spec,
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
    "matmul_sweep", "memory_bound", "nearest_spec", "precision_shift", "precision_speedup",
    "recorded_knees", "recorded_ladder", "ridge_points", "roofline_points", "units",
]  # fmt: skip


# ------------------------------------------------------------------ chapters 03 and 04
# Written in brrrlib._readouts_03_04 (one function per sentence a cell prints), named here.
from brrrlib._readouts_03_04 import (  # noqa: E402
    batching,
    block_matmul_share,
    bounds,
    busy_chains,
    compile_cost,
    critical_batch,
    cuda_graphs,
    doubling,
    floors_table,
    flops_per_python_add,
    precision_gain,
    python_speed,
    recorded_block,
    recorded_cuda_graphs,
    recorded_tf32,
    recorded_wide_mlp,
    regime_shift,
    remedy,
    steps_summary,
    timing_methods,
    tiny_op,
    top_ops,
)

__all__ += [
    "batching",
    "block_matmul_share",
    "bounds",
    "busy_chains",
    "compile_cost",
    "critical_batch",
    "cuda_graphs",
    "doubling",
    "floors_table",
    "flops_per_python_add",
    "precision_gain",
    "python_speed",
    "recorded_block",
    "recorded_cuda_graphs",
    "recorded_tf32",
    "recorded_wide_mlp",
    "regime_shift",
    "remedy",
    "steps_summary",
    "timing_methods",
    "tiny_op",
    "top_ops",
]
