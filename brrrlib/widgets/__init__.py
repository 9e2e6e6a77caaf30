"""The interactive explorers: repeat count (chapter 02), batch size (03), decode (06)."""

from __future__ import annotations

# The explorers live in private modules (_repeat_explorer, _batch_explorer,
# _decode_explorer, and _explorer for what they share); the experiments they
# measure in _experiments.
from brrrlib.widgets._batch_explorer import batch_explorer
from brrrlib.widgets._decode_explorer import decode_explorer
from brrrlib.widgets._experiments import repeat_case, repeat_sweep
from brrrlib.widgets._repeat_explorer import repeat_explorer

__all__ = ["batch_explorer", "decode_explorer", "repeat_case", "repeat_explorer", "repeat_sweep"]
