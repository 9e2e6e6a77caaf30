"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["plot", ]

def plot(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("plot is not written yet")

