"""``python -m brrrlib``: the ``brrr`` command line."""

from brrrlib.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
