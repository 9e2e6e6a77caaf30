"""``python -m brrrlib.distributed``, also under ``torchrun``: one collective benchmark."""

from brrrlib.distributed import main

if __name__ == "__main__":
    raise SystemExit(main())
