"""brrrlib: the helper library of the brrr course."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__version__ = "0.2.0"

# The course keeps fp32 matmuls in full precision on purpose (TF32 is a remedy it
# measures, chapters 01 and 04), so torch.compile's one-time advice on a CUDA GPU to
# turn TF32 on would only be noise in a notebook's output.
warnings.filterwarnings(
    "ignore",
    message="TensorFloat32 tensor cores for float32 matrix multiplication",
    category=UserWarning,
)

# The modules, each loaded on first use (``bl.timing``), and the names each lends the top level.
_EXPORTS = {
    "ceilings": ("Ceilings", "measure_ceilings"),
    "classroom": ("Report", "report"),
    "counting": ("Counts", "count"),
    "decoding": (),
    "diagnosis": ("Diagnosis", "diagnose"),
    "distributed": (),
    "exercises": ("check", "hint", "questions", "solution"),
    "figures": (),
    "hardware": ("DeviceSpec", "spec"),
    "levels": ("measure_levels",),
    "machine": ("device", "sync"),
    "parts": (),
    "references": ("share_of",),
    "roofline": (),
    "sweeps": (),
    "timing": ("Timing", "benchmark", "Comparison", "compare"),
    "trace": ("Trace", "profile"),
    "widgets": (),
    "workloads": (),
    "zoo": (),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted([*_EXPORTS, *_HOME, "__version__"])


def __getattr__(name: str) -> Any:
    """Load a module (``bl.timing``) or a public name (``bl.benchmark``) on first use."""
    if name in _EXPORTS:
        value = _import(name)
    elif name in _HOME:
        value = getattr(_import(_HOME[name]), name)
    else:
        raise AttributeError(f"module 'brrrlib' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def _import(module: str) -> Any:
    try:
        return importlib.import_module(f"brrrlib.{module}")
    except (ImportError, AttributeError) as err:
        from brrrlib.cli._doctor import torch_problem

        problem = torch_problem()  # torch missing, broken or too old: say so in one sentence
        if problem is None:
            raise
        raise ImportError(
            f"brrrlib needs a working PyTorch: {problem}. `brrr doctor` checks the rest."
        ) from err
