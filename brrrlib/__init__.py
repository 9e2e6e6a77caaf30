"""brrrlib: the helper library of the brrr course.

Every workload spends its time on compute, on memory bandwidth, or on
overhead. This library measures which, on the machine in front of you::

    import brrrlib as bl

    bl.device()                      # cuda, then mps, then cpu (BRRR_DEVICE overrides)
    bl.measure_ceilings()            # this machine's matmul FLOP/s, bandwidth, op overhead
    bl.benchmark(torch.mm, a, b)     # honest timing: warm-up, sync, repeats, spread
    bl.count(torch.mm, a, b)         # FLOPs and bytes moved, per op
    bl.profile(fn, x).plot()         # where the time goes: host lane over device lane
    bl.diagnose(fn, x)               # the regime, its evidence and the remedy

Modules (one concern each): ``devices``, ``timing``, ``counting``,
``roofline``, ``trace``, ``diagnosis``, ``widgets``, ``figures``,
``exercises``, ``workloads``, ``classroom``, ``cli``.
"""

from brrrlib import (
    ceilings,
    classroom,
    counting,
    devices,
    diagnosis,
    figures,
    roofline,
    timing,
    widgets,
    workloads,
)
from brrrlib.ceilings import Ceilings, measure_ceilings
from brrrlib.classroom import Report, load_reports, report
from brrrlib.counting import Counts, OpCount, count
from brrrlib.devices import DeviceSpec, device, spec, specs, sync
from brrrlib.diagnosis import Diagnosis, diagnose
from brrrlib.exercises import check, hint, questions
from brrrlib.timing import Comparison, Timing, benchmark, compare
from brrrlib.trace import Trace, profile

__version__ = "0.1.0"

__all__ = [
    "Ceilings",
    "Comparison",
    "Counts",
    "DeviceSpec",
    "Diagnosis",
    "OpCount",
    "Report",
    "Timing",
    "Trace",
    "__version__",
    "benchmark",
    "check",
    "compare",
    "count",
    "ceilings",
    "classroom",
    "counting",
    "device",
    "devices",
    "diagnose",
    "diagnosis",
    "figures",
    "hint",
    "load_reports",
    "measure_ceilings",
    "profile",
    "questions",
    "report",
    "roofline",
    "spec",
    "specs",
    "sync",
    "timing",
    "widgets",
    "workloads",
]
