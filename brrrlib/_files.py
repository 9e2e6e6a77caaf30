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


def course_folder() -> Path | None:
    """Where the course notebooks are (package data ``brrrlib.course``, else the clone's), or None."""
    return _installed_course() or _clone_course()


def _installed_course() -> Path | None:
    try:
        root = resources.files("brrrlib.course")
    except ModuleNotFoundError:
        return None
    # A folder of data without __init__.py is a namespace package, whose files() is a
    # MultiplexedPath; its entries are plain paths, and a notebook's parent is the folder.
    for entry in root.iterdir():
        if isinstance(entry, Path) and entry.suffix == ".ipynb":
            return entry.parent
    return None


def _clone_course() -> Path | None:
    # an editable install does not map course/ (no __init__.py) as a subpackage
    folder = Path(__file__).resolve().parents[1] / "course"
    return folder if folder.is_dir() and any(folder.glob("*.ipynb")) else None
