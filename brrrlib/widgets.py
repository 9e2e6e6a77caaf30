"""The two interactive explorers: repeat count (chapter 02) and batch size (chapter 03).

Each explorer is a slider, a plot and a one-line readout. Moving the slider
asks the library for one new measurement (:func:`brrrlib.benchmark` for the
time, :func:`brrrlib.count` for FLOPs and bytes) and redraws; nothing here
times anything itself, and nothing is measured twice: every result is kept in
a cache keyed by what was measured, so going back to a point is instant.

The plot is drawn with matplotlib's Agg renderer into PNG bytes that replace
the value of an ``ipywidgets.Image``, so the picture updates in place (no
flicker, no interactive backend needed). The readout is an ``ipywidgets.HTML``
that states the current numbers in words; it gets the CSS class ``brrr-busy``
while a measurement runs and ``brrr-error`` while it shows an error. A request
that would not fit in memory is refused with a message before anything is
allocated, and an out-of-memory error during a measurement is caught, memory
is freed and the error reported: the kernel stays alive.

Both explorers keep their state for you to read::

    ex = bl.widgets.repeat_explorer()
    ex                                  # the last expression in a cell shows it
    ex.set(repeat=32, mode="fused")     # what the slider does, from code
    ex.points                           # every measured point (frozen dataclasses)
"""

from __future__ import annotations

# The explorers and what they call live in private modules: _points (measure_repeat,
# measure_batch and their points), _repeat_explorer, _batch_explorer, and _explorer
# (what both explorers share); this module is their public face. The tunable
# constants stay importable from here (bl.widgets.MAX_MEASURE_S) but are read where
# they are defined: to change one, set it on that module, not here.
from brrrlib._batch_explorer import BatchExplorer, batch_explorer
from brrrlib._explorer import MEMORY_HEADROOM as MEMORY_HEADROOM
from brrrlib._points import FUSED_WARMUP_S as FUSED_WARMUP_S
from brrrlib._points import POINT_BUDGET_S as POINT_BUDGET_S
from brrrlib._points import POINT_WARMUP_S as POINT_WARMUP_S
from brrrlib._points import (
    BatchPoint,
    RepeatPoint,
    measure_batch,
    measure_repeat,
    predicted_knee_repeat,
)
from brrrlib._repeat_explorer import MAX_MEASURE_S as MAX_MEASURE_S
from brrrlib._repeat_explorer import RepeatExplorer, repeat_explorer

__all__ = [
    "BatchExplorer",
    "BatchPoint",
    "RepeatExplorer",
    "RepeatPoint",
    "batch_explorer",
    "measure_batch",
    "measure_repeat",
    "predicted_knee_repeat",
    "repeat_explorer",
]
