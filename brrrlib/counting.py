"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["Counts", "OpCount", "count", ]

class Counts:  # noqa: D101
    pass

class OpCount:  # noqa: D101
    pass

def count(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("count is not written yet")

