"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["Trace", "profile", ]

class Trace:  # noqa: D101
    pass

def profile(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("profile is not written yet")

