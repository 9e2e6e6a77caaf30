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

_MODULES = (
    "ceilings",
    "classroom",
    "counting",
    "decoding",
    "diagnosis",
    "distributed",
    "exercises",
    "figures",
    "hardware",
    "levels",
    "machine",
    "parts",
    "references",
    "roofline",
    "sweeps",
    "timing",
    "trace",
    "widgets",
    "workloads",
    "zoo",
)

# Public names at the top level and the module each comes from.
_NAMES = {
    "Ceilings": "ceilings",
    "measure_ceilings": "ceilings",
    "Report": "classroom",
    "report": "classroom",
    "Counts": "counting",
    "count": "counting",
    "DeviceSpec": "hardware",
    "spec": "hardware",
    "device": "machine",
    "measure_levels": "levels",
    "share_of": "references",
    "sync": "machine",
    "Diagnosis": "diagnosis",
    "diagnose": "diagnosis",
    "check": "exercises",
    "hint": "exercises",
    "questions": "exercises",
    "solution": "exercises",
    "Timing": "timing",
    "benchmark": "timing",
    "Comparison": "timing",
    "compare": "timing",
    "Trace": "trace",
    "profile": "trace",
}

__all__ = sorted([*_MODULES, *_NAMES, "__version__"])


def __getattr__(name: str) -> Any:
    """Load a module (``bl.timing``) or a public name (``bl.benchmark``) on first use."""
    if name in _MODULES:
        module = _import(name)
        globals()[name] = module
        return module
    if name in _NAMES:
        value = getattr(_import(_NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'brrrlib' has no attribute {name!r}")


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
