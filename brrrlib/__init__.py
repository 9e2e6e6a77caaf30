"""brrrlib: the helper library of the brrr course.

Every workload spends its time on compute, on memory bandwidth, or on
overhead. This library measures which, on the machine in front of you::

    import brrrlib as bl

    bl.device()                      # cuda, then mps, then cpu (BRRR_DEVICE overrides)
    bl.measure_ceilings()            # this machine's matmul FLOP/s, bandwidth, op overhead
    bl.measure_levels()              # bandwidth by cache level, L1 to memory
    bl.benchmark(torch.mm, a, b)     # honest timing: warm-up, sync, repeats, spread
    bl.compare(slow, fast)           # how much faster, from alternating rounds, with an interval
    bl.share_of(fn, x, work=..., pattern="read")  # a share of a same-run kernel of its pattern
    bl.count(torch.mm, a, b)         # FLOPs and bytes moved, per op
    bl.profile(fn, x).plot()         # where the time goes: host lane over device lane
    bl.diagnose(fn, x)               # the regime, its evidence and the remedy

Where things live. The library is the top-level modules, one idea each; read
them in this order to see how each number is measured:

=================  ===========================================================
``timing``         honest timing (``benchmark``), and how much longer B takes than A,
                   in alternating rounds with an interval (``compare``)
``references``     shares against a same-run reference kernel of the workload's
                   access pattern (read, copy, update, matmul), in alternating rounds
``counting``       FLOPs and bytes per aten op (``count``); op tables in ``_aten_ops``
``roofline``       the arithmetic of the roofline model, and its plot
``ceilings``       this machine's ceilings, measured (``measure_ceilings``)
``levels``         bandwidth by cache level: a working-set sweep, a roof per level
                   (``measure_levels``)
``machine``        this machine: which device, the one ``sync``, caches, memory, CPU flags
``parts``          the peak from physics: cores x FMA units x lanes x 2 x clock, and
                   the clock a measured rate implies
``hardware``       the spec-sheet table, each number with its source (``spec``)
``trace``          profiles: host and device lanes, busy time, gaps (``profile``)
``diagnosis``      the decision procedure (``diagnose``)
``sweeps``         declared sweeps behind the explorers and chapter figures
``workloads``      the chapters' workloads
``_fmt``           the one unit picker, small statistics, tables, progress lines
=================  ===========================================================

The chapters' packages (folders) are built on the library and never the
reverse; the package holds its public names, its private modules the rest:

=================  ===========================================================
``widgets``        the explorers: ``_repeat_explorer``, ``_batch_explorer``, ``_decode_explorer``;
                   what they share, ``_explorer``; what they run, ``_experiments``
``zoo``            real architectures in plain PyTorch, each with a hand FLOP count:
                   ``_tally`` counts by hand, ``_rows`` sizes them, one module a
                   family (``_convnets``, ``_encoders``, ``_decoders``)
``distributed``    chapter 05: collectives over local processes or torchrun; the
                   processes (``_launch``, ``_collectives_worker``), the arithmetic
                   (``_comm_model``), results (``_collective_results``), the
                   ladder (``_ladder``, ``_host_transfers``), a slider
                   (``_message_explorer``)
``decoding``       a GPT-style decoder with a static KV cache (``_model``), counted
                   by hand (``_counts``), weight-only int8 (``_int8``), decode steps
                   timed (``_steps``), the two sizes for this device (``_sizes``)
``figures``        the chapters' figures (the host and timelines in ``_timelines``,
                   remedies and steps in ``_remedies``)
``exercises``      checked exercises: ``check``, ``hint``, ``solution``, ``questions``;
                   the bank's text in ``questions.json``, read by ``_bank``; solvers by topic
``classroom``      a learner's result file and the class view (``report``); the file
                   format in ``_report_file``
``cli``            the ``brrr`` command: ``diagnose``, ``lab``; ``doctor`` in ``_doctor``
=================  ===========================================================

Modules load when first used, so ``import brrrlib`` is quick and the ``brrr``
command can say what is missing when torch is not installed.
"""

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
