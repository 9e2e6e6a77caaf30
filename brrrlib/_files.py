"""Files: where the cache lives, writing without half-written files, where the course is."""

from __future__ import annotations

import contextlib
import os
import tempfile
from importlib import resources
from pathlib import Path

__all__ = ["cache_dir", "course_folder", "write_atomic"]


def cache_dir() -> Path:
    """Where measured ceilings are cached: ``$BRRR_CACHE_DIR``, else the platform's cache folder."""
    chosen = os.environ.get("BRRR_CACHE_DIR")
    if chosen:
        return Path(chosen)
    import platformdirs

    return Path(platformdirs.user_cache_dir("brrr", appauthor=False))


def write_atomic(target: Path, text: str, *, mode: int = 0o644) -> None:
    """Write ``text`` to ``target`` via a renamed temporary file (never half a file); OSError."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.stem}-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp makes it private; others may need to read it
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def course_folder() -> Path | None:
    """Where the course notebooks are (package data ``brrrlib.course``, else the clone's), or None."""
    try:  # data without __init__.py is a namespace package, its entries are plain paths
        installed = [
            p.parent
            for p in resources.files("brrrlib.course").iterdir()
            if isinstance(p, Path) and p.suffix == ".ipynb"
        ]
    except ModuleNotFoundError:
        installed = []
    clone = Path(__file__).resolve().parents[1] / "course"  # an editable install maps no course/
    return next(iter(installed), None) or (clone if any(clone.glob("*.ipynb")) else None)
