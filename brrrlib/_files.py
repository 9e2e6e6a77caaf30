"""Files the library writes: where its cache lives, and writing without half-written files.

``cache_dir()`` is ``$BRRR_CACHE_DIR`` if set, else the platform's cache folder
for brrr as platformdirs names it: ``~/.cache/brrr`` on Linux,
``~/Library/Caches/brrr`` on macOS, ``%LOCALAPPDATA%\\brrr\\Cache`` on Windows.
``write_atomic`` writes through a unique temporary file in the same folder,
then renames it: a reader never sees half a file, and two kernels writing at
once never mix their bytes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["cache_dir", "write_atomic"]


def cache_dir() -> Path:
    """Where measured ceilings are cached: ``$BRRR_CACHE_DIR``, else the platform's cache folder."""
    chosen = os.environ.get("BRRR_CACHE_DIR")
    if chosen:
        return Path(chosen)
    import platformdirs

    return Path(platformdirs.user_cache_dir("brrr", appauthor=False))


def write_atomic(target: Path, text: str, *, mode: int = 0o644) -> None:
    """Write ``text`` to ``target`` through a unique temporary file; OSError if it cannot."""
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp makes it private; others may need to read it
        os.replace(tmp, target)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
