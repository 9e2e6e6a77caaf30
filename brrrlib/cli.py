"""The ``brrr`` console script: ``brrr doctor``, ``brrr diagnose``, ``brrr lab``.

* ``brrr doctor`` is what a workshop attendee runs first. It checks the
  Python packages, the device, that ``torch.compile`` works, measures this
  machine's ceilings (cached) beside the nearest spec-sheet device, and checks
  that every course notebook can run here. It exits non-zero when the course
  cannot run, and every problem comes with what to do about it.
* ``brrr diagnose MODULE:NAME`` runs :func:`brrrlib.diagnose` on your own
  workload from the command line.
* ``brrr lab`` copies the course notebooks into a workspace folder (never
  overwriting your edits) and starts JupyterLab there with this Python.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CopyReport", "copy_course", "course_source", "load_target", "main"]

# Packages the notebooks need (required) and the test tools (optional).
_REQUIRED = ("torch", "numpy", "matplotlib", "ipywidgets", "jupyterlab")
_OPTIONAL = ("nbval", "pytest")
_DEFAULT_WORKSPACE = Path.home() / "brrr-course"


class _Report:
    """Collects doctor's findings; FAIL lines make the exit status non-zero."""

    def __init__(self, out) -> None:
        self.out, self.failures, self.warnings = out, 0, 0

    def section(self, title: str) -> None:
        print(f"\n{title}", file=self.out)

    def ok(self, text: str) -> None:
        print(f"  ok    {text}", file=self.out)

    def info(self, text: str) -> None:
        print(f"        {text}", file=self.out)

    def warn(self, text: str, advice: str = "") -> None:
        self.warnings += 1
        print(f"  WARN  {text}" + (f"\n        -> {advice}" if advice else ""), file=self.out)

    def fail(self, text: str, advice: str) -> None:
        self.failures += 1
        print(f"  FAIL  {text}\n        -> {advice}", file=self.out)


# ------------------------------------------------------------------ doctor ---
def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _check_packages(r: _Report) -> set[str]:
    r.section("Python and packages")
    r.ok(f"Python {platform.python_version()} ({sys.executable})")
    missing = set()
    for name in _REQUIRED:
        v = _version(name)
        if v is None:
            missing.add(name)
            r.fail(
                f"{name} is not installed",
                f"pip install {name}  (or: pip install -e . in the course folder)",
            )
        else:
            r.ok(f"{name} {v}")
    for name in _OPTIONAL:
        v = _version(name)
        if v is None:
            r.warn(
                f"{name} is not installed (only needed to run the tests)",
                "pip install -e '.[test]'",
            )
        else:
            r.ok(f"{name} {v}")
    v = _version("brrrlib")
    r.ok(f"brrrlib {v or '(not installed as a package: imported from the source tree)'}")
    return missing


def _check_device(r: _Report):
    import torch

    from brrrlib import devices

    r.section("Device")
    try:
        dev = devices.device()
    except ValueError as err:
        r.fail(str(err), "fix or unset the BRRR_DEVICE environment variable")
        return None
    if dev.type == "cuda":
        r.ok(f"cuda: {torch.cuda.get_device_name(dev)} (CUDA {torch.version.cuda})")
    elif dev.type == "mps":
        r.ok("mps: Apple GPU")
    else:
        r.ok(f"cpu: {devices.device_name(torch.device('cpu'))}, {torch.get_num_threads()} threads")
        r.info("no GPU: every chapter runs on the CPU; GPU-only cells show spec-sheet predictions")
    return dev


def _check_compile(r: _Report, dev) -> bool:
    import torch

    r.section("torch.compile")

    def tiny(x):
        return (x.sin() + 1).cos()

    try:
        t0 = time.perf_counter()
        compiled = torch.compile(tiny)
        x = torch.randn(1024, device=dev)
        y = compiled(x)
        elapsed = time.perf_counter() - t0
        if not torch.allclose(y, tiny(x), atol=1e-5):
            r.fail("torch.compile gave a wrong result", "update torch: pip install -U torch")
            return False
    except Exception as err:  # any compiler failure is reported with advice, never hidden
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
        r.fail(
            f"torch.compile failed: {type(err).__name__}: {first}",
            "install a C/C++ compiler: Debian/Ubuntu `sudo apt install build-essential`, "
            "macOS `xcode-select --install`, conda `conda install -c conda-forge cxx-compiler`; "
            "chapters 02 and 03 use torch.compile",
        )
        return False
    r.ok(
        f"compiled and ran a tiny function in {elapsed:.1f} s (first compile; later ones are cached)"
    )
    return True


def _check_ceilings(r: _Report, dev, refresh: bool) -> None:
    from brrrlib import _fmt
    from brrrlib.ceilings import measure_ceilings

    r.section("Ceilings of this machine (bl.measure_ceilings)")
    c = measure_ceilings(dev, refresh=refresh, progress=True)
    s = c.nearest_spec()
    fmt_f, fmt_b = (lambda x: _fmt.si(x, "FLOP/s")), (lambda x: _fmt.si(x, "B/s"))
    # (what, measured here, spec sheet, spec / measured)
    rows = [
        ("matmul fp32", c.matmul_flops_per_s, s.peak("fp32"), fmt_f),
        ("vector fp32 (mul)", c.vector_flops_per_s, s.peak("fp32") / 2, fmt_f),
        ("memory bandwidth", c.mem_bandwidth_bytes_per_s, s.mem_bandwidth_bytes_per_s, fmt_b),
        ("ridge point", c.ridge_point_flops_per_byte(), s.ridge_point_flops_per_byte(), _fmt_ridge),
    ]
    if "bf16" in s.peak_flops_per_s:
        rows.append(
            ("matmul bf16", c.matmul_flops_per_s_by_dtype.get("bf16"), s.peak("bf16"), fmt_f)
        )
    print(
        f"        {'':<18}{'measured here':>16}{s.name + ' (spec)':>22}{'spec/here':>11}",
        file=r.out,
    )
    for name, here, there, fmt in rows:
        here_s, ratio = (fmt(here), f"{there / here:.3g}x") if here else ("-", "")
        print(f"        {name:<18}{here_s:>16}{fmt(there):>22}{ratio:>11}", file=r.out)
    print(f"        {'op overhead':<18}{_fmt.seconds(c.op_overhead_s):>16}", file=r.out)
    r.info(f"{c.device_name}, measured {c.measured_at} (cached; --refresh measures again)")
    r.info(f"spec source: {s.source}")
    if c.noisy:
        r.warn("; ".join(c.noise_notes()), "close other programs and run: brrr doctor --refresh")
    else:
        r.ok("measurements were steady (the last rounds of each agreed within 10%)")


def _fmt_ridge(x: float) -> str:
    return f"{x:.3g} FLOP/B"


def course_source() -> Path | None:
    """Where the course notebooks ship: the clone's ``course/``, else the installed copy.

    In a source checkout the notebooks sit in ``course/`` next to the
    ``brrrlib`` package; an installed wheel puts them in
    ``<sys.prefix>/share/brrr/course``. Returns None if neither exists.
    """
    import brrrlib

    for candidate in (
        Path(brrrlib.__file__).resolve().parents[1] / "course",
        Path(sys.prefix) / "share" / "brrr" / "course",
    ):
        if candidate.is_dir() and any(candidate.glob("*.ipynb")):
            return candidate
    return None


def _notebook_imports(nb: dict) -> set[str]:
    """Top-level modules imported by a notebook's code cells."""
    names = set()
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        src = "".join(cell.get("source", []))
        src = "\n".join(
            line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue  # a deliberately broken exercise cell: not an import problem
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _check_course(r: _Report, compile_ok: bool | None) -> None:
    r.section("Course notebooks")
    src = course_source()
    if src is None:
        r.fail(
            "course notebooks not found",
            "run brrr from the course clone (git clone ...; pip install -e .), or reinstall the package",
        )
        return
    r.ok(f"found in {src}")
    for path in sorted(src.glob("*.ipynb")):
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            r.fail(
                f"{path.name}: unreadable ({err})", "re-copy it: brrr lab --reset (keeps a backup)"
            )
            continue
        missing = sorted(m for m in _notebook_imports(nb) if importlib.util.find_spec(m) is None)
        uses_compile = "torch.compile" in path.read_text(encoding="utf-8")
        if missing:
            r.fail(f"{path.name}: needs {', '.join(missing)}", f"pip install {' '.join(missing)}")
        elif uses_compile and compile_ok is False:
            r.fail(
                f"{path.name}: uses torch.compile, which fails here",
                "see the torch.compile advice above",
            )
        else:
            note = (
                " (torch.compile not checked: --quick)"
                if uses_compile and compile_ok is None
                else ""
            )
            r.ok(f"{path.name}: can run{note}")


def doctor(refresh: bool = False, quick: bool = False, out=None) -> int:
    """Check that the course can run here; return 0 if so, 1 if not."""
    out = out or sys.stdout
    r = _Report(out)
    print("brrr doctor: can this machine run the course?", file=out)
    missing = _check_packages(r)
    if "torch" in missing:
        print("\nCannot go on without torch.", file=out)
        return 1
    dev = _check_device(r)
    compile_ok = None
    if dev is not None:
        compile_ok = None if quick else _check_compile(r, dev)
        _check_ceilings(r, dev, refresh)
    _check_course(r, compile_ok)
    verdict = (
        f"{r.failures} problem(s): fix the FAIL lines above, then run brrr doctor again"
        if r.failures
        else "all good: run `brrr lab` to open the course"
    )
    print(f"\n{verdict}" + (f" ({r.warnings} warning(s))" if r.warnings else ""), file=out)
    return 1 if r.failures else 0


# ---------------------------------------------------------------- diagnose ---
class TargetError(Exception):
    """A ``MODULE:NAME`` target that cannot be loaded (exit status 2)."""


def load_target(target: str) -> tuple[Any, tuple, dict]:
    """Resolve ``MODULE:NAME`` (or ``path/to/file.py:NAME``) to ``(fn, args, kwargs)``.

    What NAME may be:

    1. a zero-argument callable returning ``(fn, args)`` or
       ``(fn, args, kwargs)``: the general form, e.g.::

           def workload():
               x = torch.randn(4096, 4096)
               return torch.mm, (x, x)

    2. a ``torch.nn.Module`` instance, or a function that takes arguments:
       then the module must define ``example_inputs``, a tuple of arguments
       (or a single tensor), and NAME is called as ``NAME(*example_inputs)``.

    The current directory is put on ``sys.path`` first, as ``python -m``
    does. Raises :class:`TargetError` with what to do when anything is off.
    """
    import torch

    if not isinstance(target, str) or target.count(":") < 1:
        raise TargetError(f"target {target!r} must look like MODULE:NAME or path/to/file.py:NAME")
    module_part, _, name = target.rpartition(":")
    if not module_part or not name:
        raise TargetError(f"target {target!r} must look like MODULE:NAME or path/to/file.py:NAME")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if module_part.endswith(".py") or "/" in module_part or "\\" in module_part:
            path = Path(module_part).resolve()
            if not path.is_file():
                raise TargetError(f"no such file: {module_part}")
            mod_name = f"_brrr_target_{path.stem}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            sys.path.insert(0, str(path.parent))
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_part)
    except TargetError:
        raise
    except Exception as err:  # the learner's module failed to import: say which and why
        raise TargetError(f"cannot import {module_part!r}: {type(err).__name__}: {err}") from err
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))[:15]
            raise TargetError(f"{module_part} has no {name!r}; it defines: {', '.join(public)}")
        obj = getattr(obj, part)

    example = getattr(module, "example_inputs", None)
    takes_args = (
        callable(obj) and not isinstance(obj, torch.nn.Module) and _required_params(obj) > 0
    )
    if isinstance(obj, torch.nn.Module) or takes_args:
        if example is None:
            what = (
                "an nn.Module"
                if isinstance(obj, torch.nn.Module)
                else "a function that takes arguments"
            )
            raise TargetError(
                f"{name} is {what}: define `example_inputs = (tensor, ...)` in {module_part}, "
                "or point at a zero-argument function returning (fn, args)"
            )
        args = example if isinstance(example, (tuple, list)) else (example,)
        return obj, tuple(args), {}
    if not callable(obj):
        raise TargetError(f"{name} is a {type(obj).__name__}, not a callable returning (fn, args)")
    try:
        result = obj()
    except Exception as err:  # the learner's factory raised: report it as such
        raise TargetError(f"calling {name}() raised {type(err).__name__}: {err}") from err
    if not (isinstance(result, tuple) and len(result) in (2, 3)):
        raise TargetError(
            f"{name}() returned {type(result).__name__}; it must return (fn, args) or (fn, args, kwargs)"
        )
    fn, args, kwargs = (*result, {}) if len(result) == 2 else result
    if not callable(fn):
        raise TargetError(f"{name}()[0] must be callable, got {type(fn).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TargetError(f"{name}()[1] must be a tuple of arguments, got {type(args).__name__}")
    if not isinstance(kwargs, dict):
        raise TargetError(
            f"{name}()[2] must be a dict of keyword arguments, got {type(kwargs).__name__}"
        )
    return fn, tuple(args), kwargs


def _required_params(fn) -> int:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 0  # builtins without a signature: treat as a factory
    return sum(
        p.default is p.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        for p in sig.parameters.values()
    )


def _diagnose(target: str, out) -> int:
    try:
        fn, args, kwargs = load_target(target)
    except TargetError as err:
        print(f"brrr diagnose: {err}", file=sys.stderr)
        return 2
    import brrrlib

    print(repr(brrrlib.diagnose(fn, *args, **kwargs)), file=out)
    return 0


# --------------------------------------------------------------------- lab ---
@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_course` did: paths relative to the workspace."""

    copied: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    backed_up: tuple[str, ...] = ()
    backup_dir: Path | None = None
    skipped: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        lines = [f"copied {len(self.copied)} file(s), kept {len(self.kept)} of yours unchanged"]
        if self.backed_up:
            lines.append(f"backed up {len(self.backed_up)} old file(s) to {self.backup_dir}")
        return "; ".join(lines)


def _course_files(source: Path) -> list[Path]:
    """Every file under ``source`` except hidden ones and notebook checkpoints."""
    files = []
    for p in sorted(source.rglob("*")):
        rel = p.relative_to(source)
        if p.is_file() and not any(
            part.startswith(".") or part == "__pycache__" for part in rel.parts
        ):
            files.append(rel)
    return files


def copy_course(source: Path, dest: Path, *, reset: bool = False) -> CopyReport:
    """Copy the course (notebooks, ``instructor/``, assets) from ``source`` into ``dest``.

    Only files missing in ``dest`` are copied: a learner's edited notebook is
    never overwritten. With ``reset=True`` every course file is copied fresh,
    and any existing one that differs is first moved to
    ``dest/.brrr-backup-<timestamp>/`` so no work is lost.
    """
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise ValueError(f"source={str(source)!r} is not a folder of course notebooks")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"dest={str(dest)!r} exists and is not a folder; choose another --dir")
    dest.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    backup_dir = dest / f".brrr-backup-{stamp}"
    copied, kept, backed_up = [], [], []
    for rel in _course_files(source):
        src, dst = source / rel, dest / rel
        if dst.exists():
            if not reset or dst.read_bytes() == src.read_bytes():
                kept.append(str(rel))
                continue
            (backup_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(dst), str(backup_dir / rel))
            backed_up.append(str(rel))
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        copied.append(str(rel))
    return CopyReport(
        copied=tuple(copied),
        kept=tuple(kept),
        backed_up=tuple(backed_up),
        backup_dir=backup_dir if backed_up else None,
    )


def _lab_command(
    dest: Path, no_browser: bool, port: int | None, as_root: bool | None = None
) -> list[str]:
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={dest}"]
    if as_root is None:
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if as_root:
        # Jupyter refuses to start as root unless told; containers and cloud
        # notebooks often run as root, where that refusal only gets in the way.
        cmd.append("--allow-root")
    if no_browser:
        cmd.append("--no-browser")
    if port is not None:
        cmd.append(f"--port={port}")
    return cmd


def _lab(opts, out) -> int:
    src = course_source()
    if src is None:
        print(
            "brrr lab: the course notebooks were not found (neither course/ next to brrrlib "
            f"nor {Path(sys.prefix) / 'share' / 'brrr' / 'course'}); run from the course clone "
            "after `pip install -e .`",
            file=sys.stderr,
        )
        return 2
    dest = Path(opts.dir).expanduser().resolve()
    try:
        report = copy_course(src, dest, reset=opts.reset)
    except ValueError as err:
        print(f"brrr lab: {err}", file=sys.stderr)
        return 2
    print(f"brrr lab: workspace {dest}: {report}", file=out)
    if importlib.util.find_spec("jupyterlab") is None:
        print("brrr lab: jupyterlab is not installed here; pip install jupyterlab", file=sys.stderr)
        return 1
    cmd = _lab_command(dest, opts.no_browser, opts.port)
    print("brrr lab: " + " ".join(cmd), file=out, flush=True)
    return subprocess.call(cmd, cwd=dest)


# -------------------------------------------------------------------- main ---
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="brrr",
        description="Making deep learning go brrrr, measured: the course's command line.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("doctor", help="check that this machine can run the course (run this first)")
    d.add_argument(
        "--refresh", action="store_true", help="measure the ceilings again (ignore the cache)"
    )
    d.add_argument("--quick", action="store_true", help="skip the torch.compile check")
    g = sub.add_parser(
        "diagnose",
        help="say whether your workload is compute-, memory- or overhead-bound",
        description=(
            "Run bl.diagnose on your own code: measure it, count its FLOPs and bytes, double\n"
            "its batch, trace it, and say whether it is compute-, memory- or overhead-bound,\n"
            "with the evidence and what to do about it (chapter 04)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "NAME is a zero-argument function returning (fn, args) or (fn, args, kwargs),\n"
            "or an nn.Module / function taking arguments with a module-level `example_inputs`.\n"
            "example:  brrr diagnose mymodel.py:workload"
        ),
    )
    g.add_argument(
        "target", metavar="MODULE:NAME", help="e.g. mymodel:workload or path/to/file.py:workload"
    )
    lab = sub.add_parser("lab", help="copy the course notebooks to a workspace and open JupyterLab")
    lab.add_argument(
        "--dir", default=str(_DEFAULT_WORKSPACE), help="workspace folder (default ~/brrr-course)"
    )
    lab.add_argument(
        "--reset", action="store_true", help="re-copy fresh notebooks, backing up yours first"
    )
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument("--port", type=int, default=None, help="port for JupyterLab")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``brrr`` console script; returns the exit status."""
    parser = _parser()
    opts = parser.parse_args(argv)
    out = sys.stdout
    if opts.command == "doctor":
        return doctor(refresh=opts.refresh, quick=opts.quick, out=out)
    if opts.command == "diagnose":
        return _diagnose(opts.target, out)
    if opts.command == "lab":
        return _lab(opts, out)
    parser.print_help(out)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
