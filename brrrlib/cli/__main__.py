"""``python -m brrrlib.cli``: the ``brrr`` command line (doctor, diagnose, lab)."""

from brrrlib.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
