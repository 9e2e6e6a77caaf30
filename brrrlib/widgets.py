"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["repeat_explorer", "batch_explorer", ]

def repeat_explorer(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("repeat_explorer is not written yet")

def batch_explorer(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("batch_explorer is not written yet")

