"""The interactive explorers: repeat count (chapter 02), batch size (03), decode (06).

Each explorer is a few controls, a plot and a readout that states the numbers
in words. Moving a slider asks :func:`brrrlib.sweeps.sweep` for the new point
(timed with :func:`brrrlib.benchmark` or, for a ratio the readout states,
with :func:`brrrlib.compare` in alternating rounds; counted with
:func:`brrrlib.count`) and redraws; the explorers measure nothing themselves.
Every point is kept, so going back to one measures nothing and redraws in
milliseconds. A request that would not fit in memory is refused before
anything is allocated; running out of memory anyway is reported, cached
blocks are released and the kernel stays alive.

Both explorers keep their state for you to read::

    ex = bl.widgets.repeat_explorer()
    ex                                  # the last expression in a cell shows it
    ex.set(repeat=32, mode="fused")     # what the slider does, from code
    ex.points                           # every measured point (frozen dataclasses)

The experiments behind them are plain functions in ``_experiments``; chapter 02's
fixed sweep, :func:`repeat_sweep`, and one point of it, :func:`repeat_case` (also
with ``fresh_output=True``), are named here.
"""

from __future__ import annotations

# The explorers live in private modules (_repeat_explorer, _batch_explorer,
# _decode_explorer, and _explorer for what they share); the experiments they
# measure in _experiments.
from brrrlib.widgets._batch_explorer import batch_explorer
from brrrlib.widgets._decode_explorer import decode_explorer
from brrrlib.widgets._experiments import repeat_case, repeat_sweep
from brrrlib.widgets._repeat_explorer import repeat_explorer

__all__ = ["batch_explorer", "decode_explorer", "repeat_case", "repeat_explorer", "repeat_sweep"]
