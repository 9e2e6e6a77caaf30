"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["Diagnosis", "diagnose", ]

class Diagnosis:  # noqa: D101
    pass

def diagnose(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("diagnose is not written yet")

