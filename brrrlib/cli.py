"""(placeholder) The ``brrr`` console script."""

__all__ = ["main"]


def main(argv=None):  # noqa: D103
    raise SystemExit("brrr: not written yet")
