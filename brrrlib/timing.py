"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["Timing", "benchmark", ]

class Timing:  # noqa: D101
    pass

def benchmark(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("benchmark is not written yet")

