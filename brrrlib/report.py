"""(placeholder: being written; see the module table in DESIGN.md)."""

__all__ = ["report", "load_reports", ]

def report(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("report is not written yet")

def load_reports(*args, **kwargs):  # noqa: D103
    raise NotImplementedError("load_reports is not written yet")

