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
``roofline``, ``trace``, ``diagnose``, ``widgets``, ``figures``,
``exercises``, ``workloads``, ``report``, ``cli``.
"""

from brrrlib import counting, devices, figures, roofline, widgets, workloads
from brrrlib.counting import Counts, OpCount, count
from brrrlib.devices import (
    Ceilings,
    DeviceSpec,
    device,
    measure_ceilings,
    spec,
    specs,
    sync,
)
from brrrlib.diagnose import Diagnosis, diagnose
from brrrlib.exercises import check, hint, questions
from brrrlib.report import Report, load_reports, report
from brrrlib.timing import Timing, benchmark
from brrrlib.trace import Trace, profile

__version__ = "0.1.0"

__all__ = [
    "Ceilings",
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
    "count",
    "counting",
    "device",
    "devices",
    "diagnose",
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
    "widgets",
    "workloads",
]
