"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["check", "hint", ]

def check(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("check is not written yet")

def hint(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("hint is not written yet")

