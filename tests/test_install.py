"""The package works however pip installs it: a wheel, a ``--user`` install, an editable one.

Each case builds the project with setuptools' own build hooks (the ones pip
calls), installs the result into a fresh virtual environment with no other
package (``--no-deps``: no torch, no Jupyter), and runs the installed ``brrr``
from an unrelated folder, so nothing can come from the checkout by accident.
It checks that

* ``brrr lab --copy-only DIR`` copies every course file the repository has
  (the wheel's package data is complete), from where that install keeps them;
* ``brrr --help`` works and ``brrr doctor`` says in one line that torch is
  missing (exit 1, no traceback), as on a learner's machine before torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Not part of the source: what git, builds, test runs and the site leave in a checkout.
_NOT_SOURCE = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
_NOT_SOURCE += ("_build", "test-artifacts")
_FIND_COURSE = "from brrrlib._files import course_folder; print(course_folder())"


def _course_files(folder: Path) -> set[str]:
    """The course's files under ``folder``, as relative paths (hidden ones are not course)."""
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file()
        and not any(part.startswith(".") or part == "__pycache__" for part in p.parts)
        and p.relative_to(folder).parts[0] != "__pycache__"
    }


def _run(cmd: list, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _build(hook: str, source: Path, out: Path) -> Path:
    """A wheel from setuptools' PEP 517/660 hook ``build_wheel`` or ``build_editable``."""
    code = f"import sys, setuptools.build_meta as b; print(b.{hook}(sys.argv[1]))"
    run = _run([sys.executable, "-c", code, out], cwd=source)
    assert run.returncode == 0, run.stderr[-3000:]
    return out / run.stdout.strip().splitlines()[-1]


def _new_env(where: Path, system_site_packages: bool = False) -> tuple[Path, Path]:
    """A fresh venv without pip (this Python's pip installs into it); its python and bin."""
    venv.create(where, system_site_packages=system_site_packages, with_pip=False)
    bin_dir = where / ("Scripts" if os.name == "nt" else "bin")
    return bin_dir / ("python.exe" if os.name == "nt" else "python"), bin_dir


def _pip_install(python: Path, wheel: Path, *options: str, env: dict | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps"]
    run = _run([*cmd, "--no-index", *options, wheel], cwd=wheel.parent, env=env)
    assert run.returncode == 0, run.stderr[-3000:]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """The project copied out of the checkout, and its wheel and editable wheel."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
    dist = tmp / "dist"
    return {
        "tmp": tmp,
        "source": source,
        "wheel": _build("build_wheel", source, dist),
        "editable": _build("build_editable", source, dist),
    }


def _copy_only(brrr: Path, tmp: Path, env: dict | None = None) -> set[str]:
    """Run ``brrr lab --copy-only`` from an unrelated folder; the files it copied."""
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    dest = tmp / "workspace"
    run = _run([brrr, "lab", "--copy-only", dest], cwd=elsewhere, env=env)
    assert run.returncode == 0, run.stderr
    assert str(dest) in run.stdout and "copied" in run.stdout and "JupyterLab" not in run.stdout
    return _course_files(dest)


def test_the_wheel_carries_the_course_and_brrr_lab_finds_it(built, tmp_path):
    python, bin_dir = _new_env(tmp_path / "env")
    _pip_install(python, built["wheel"])
    where = _run([python, "-c", _FIND_COURSE], cwd=tmp_path).stdout.strip()
    assert Path(where).parts[-3:] == ("site-packages", "brrrlib", "course")
    assert Path(where).is_relative_to(tmp_path / "env")
    assert _copy_only(bin_dir / "brrr", tmp_path) == _course_files(ROOT / "course")


def test_a_user_install_finds_the_course_in_the_user_folder(built, tmp_path):
    # A venv that sees system site-packages also sees the user folder, as a plain Python does.
    python, _ = _new_env(tmp_path / "env", system_site_packages=True)
    env = {**os.environ, "PYTHONUSERBASE": str(tmp_path / "userbase")}
    _pip_install(python, built["wheel"], "--user", env=env)
    where = _run([python, "-c", _FIND_COURSE], cwd=tmp_path, env=env).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "userbase"), where
    brrr = tmp_path / "userbase" / ("Scripts" if os.name == "nt" else "bin") / "brrr"
    assert _copy_only(brrr, tmp_path, env=env) == _course_files(ROOT / "course")


def test_an_editable_install_uses_the_clones_course_folder(built, tmp_path):
    python, bin_dir = _new_env(tmp_path / "env")
    _pip_install(python, built["editable"])
    where = _run([python, "-c", _FIND_COURSE], cwd=tmp_path).stdout.strip()
    assert Path(where) == built["source"] / "course"  # edits in the clone are what brrr lab copies
    assert _copy_only(bin_dir / "brrr", tmp_path) == _course_files(ROOT / "course")


def test_without_torch_help_works_and_doctor_says_what_to_install(built, tmp_path):
    python, bin_dir = _new_env(tmp_path / "env")
    _pip_install(python, built["wheel"])
    helped = _run([bin_dir / "brrr", "--help"], cwd=tmp_path)
    assert helped.returncode == 0 and "doctor" in helped.stdout, helped.stderr
    doctor = _run([bin_dir / "brrr", "doctor"], cwd=tmp_path)
    assert doctor.returncode == 1
    tagged = [line.split()[:2] for line in doctor.stdout.splitlines() if line.startswith("  ")]
    assert ["FAIL", "torch"] in tagged and "pip" in doctor.stdout  # named, with the install
    assert "Device" not in doctor.stdout  # it stops there
    assert "Traceback" not in doctor.stdout + doctor.stderr
    module = _run([python, "-m", "brrrlib", "--version"], cwd=tmp_path)
    assert module.returncode == 0 and module.stdout.startswith("brrr "), module.stderr
