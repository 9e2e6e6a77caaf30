"""The ``brrr`` command line (also ``python -m brrrlib``): doctor, diagnose, lab, workshop."""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brrrlib.cli import _workshop
from brrrlib.cli._doctor import REINSTALL, course_source, doctor, package_version, torch_problem

__all__ = ["doctor", "main"]


# ---------------------------------------------------------------- diagnose ---
class TargetError(Exception):
    """A ``MODULE:NAME`` target that cannot be loaded (``brrr diagnose`` exits 2)."""


def load_target(target: str) -> tuple[Callable, tuple, dict]:
    """Resolve ``MODULE:NAME`` (``brrr diagnose --help``) to ``(fn, args, kwargs)``."""
    module_part, _, name = target.rpartition(":") if isinstance(target, str) else ("", "", "")
    if not module_part or not name:
        raise TargetError(f"target {target!r} must look like MODULE:NAME or path/to/file.py:NAME")
    module = _run_user_code(
        lambda: _import(module_part),
        f"importing {module_part!r}",
        f"cannot import {module_part!r}:",
    )
    factory = _lookup(module, module_part, name)
    result = _run_user_code(factory, f"calling {name}()", f"calling {name}() raised")
    if not (isinstance(result, tuple) and len(result) in (2, 3)):
        kind = type(result).__name__
        raise TargetError(
            f"{name}() returned {kind}; it must return (fn, args) or (fn, args, kwargs)"
        )
    fn, args, kwargs = (*result, {}) if len(result) == 2 else result
    if not callable(fn):
        raise TargetError(f"{name}()[0] must be callable, got {type(fn).__name__}")
    if not isinstance(args, (tuple, list)):
        raise TargetError(f"{name}()[1] must be a tuple of arguments, got {type(args).__name__}")
    if not (isinstance(kwargs, dict) and all(isinstance(k, str) for k in kwargs)):
        raise TargetError(f"{name}()[2] must be a dict of keyword arguments, got {kwargs!r:.80}")
    return fn, tuple(args), kwargs


def _run_user_code(call: Callable[[], Any], doing: str, failed: str) -> Any:
    """Run the learner's code (an import, a factory); any way it stops becomes a TargetError."""
    try:
        return call()
    except TargetError:
        raise
    except SystemExit as err:
        raise TargetError(
            f"{doing} called sys.exit({err.code!r}) instead of returning: put the script part "
            'of that file under `if __name__ == "__main__":`'
        ) from None
    except KeyboardInterrupt:
        raise TargetError(f"{doing} was interrupted (KeyboardInterrupt)") from None
    except Exception as err:  # the learner's code failed: say where, without a traceback
        raise TargetError(f"{failed} {_describe(err)}") from err


def _import(module_part: str):
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    if not (module_part.endswith(".py") or "/" in module_part or "\\" in module_part):
        return importlib.import_module(module_part)
    path = Path(module_part).resolve()
    if not path.is_file():
        raise TargetError(f"no such file: {module_part}")
    spec = importlib.util.spec_from_file_location(f"_brrr_target_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise TargetError(f"{module_part} is not a Python file: give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


def _lookup(module, module_part: str, name: str) -> Callable:
    """``module.NAME`` (dotted names too), checked to be a zero-argument callable."""
    obj: Any = module
    for part in name.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(module) if not n.startswith("_"))[:15]
            raise TargetError(f"{module_part} has no {name!r}; it defines: {', '.join(public)}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TargetError(f"{name} is a {type(obj).__name__}, not a callable returning (fn, args)")
    try:  # an nn.Module is called through its forward
        sig = inspect.signature(getattr(obj, "forward", obj))
    except (TypeError, ValueError):
        return obj  # a builtin without a signature: call it and see
    if any(
        p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in sig.parameters.values()
    ):
        raise TargetError(
            f"{name} takes arguments, but brrr diagnose calls NAME with none: point at a "
            "zero-argument function that builds the inputs, e.g. "
            f"`def workload(): x = torch.randn(64, 1024); return {name}, (x,)`"
        )
    return obj


def _check_keywords(kwargs: dict, diagnose: Callable) -> None:
    """Refuse workload keywords that ``diagnose`` would take as its own (``budget_s``, ...)."""
    params = inspect.signature(diagnose).parameters.values()
    own = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    clash = sorted(own.intersection(kwargs))
    if clash:
        raise TargetError(
            f"the workload's keyword argument(s) {', '.join(clash)} are bl.diagnose's own, "
            "and it would take them: bind them to the workload instead, e.g. return "
            f"functools.partial(fn, {clash[0]}={kwargs[clash[0]]!r:.40}), args"
        )


def _describe(err: BaseException) -> str:
    """``KeyError: 'x' (at model.py:12)``: the error and the innermost line of the learner's code."""
    text = f"{type(err).__name__}: {err}"
    if isinstance(err, SystemExit):
        text = f"it called sys.exit({err.code!r})"
    paths = sysconfig.get_paths()  # frames in Python, site-packages or brrrlib are not theirs
    folders = (paths["stdlib"], paths["purelib"], paths["platlib"], str(Path(__file__).parents[1]))
    not_theirs = (*(os.path.join(f, "") for f in folders), "<")
    theirs = [
        f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith(not_theirs)
    ]
    return text + (f" (at {Path(theirs[-1].filename).name}:{theirs[-1].lineno})" if theirs else "")


def _diagnose(target: str, out) -> int:
    problem = torch_problem()
    if problem:
        print(f"brrr diagnose: {problem}", file=sys.stderr)
        return 1
    import brrrlib

    try:
        fn, args, kwargs = load_target(target)
        _check_keywords(kwargs, brrrlib.diagnose)
    except TargetError as err:
        print(f"brrr diagnose: {err}", file=sys.stderr)
        return 2
    try:
        result = brrrlib.diagnose(fn, *args, **kwargs)
    except (Exception, SystemExit) as err:  # the workload failed while measured: a real error
        print(f"brrr diagnose: {target} failed while measured: {_describe(err)}", file=sys.stderr)
        return 1
    print(repr(result), file=out)
    return 0


# --------------------------------------------------------------------- lab ---
@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_course` did: paths relative to the workspace."""

    copied: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    backed_up: tuple[str, ...] = ()
    backup_dir: Path | None = None

    def __str__(self) -> str:
        text = f"copied {len(self.copied)} file(s), kept {len(self.kept)} of yours unchanged"
        if self.backed_up:
            text += f"; backed up {len(self.backed_up)} old file(s) to {self.backup_dir}"
        return text


def copy_course(source: Path, dest: Path, *, reset: bool = False) -> CopyReport:
    """Copy the course (notebooks, ``instructor/``, assets) from ``source`` into ``dest``."""
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise ValueError(f"source={str(source)!r} is not a folder of course notebooks")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"dest={str(dest)!r} exists and is not a folder; choose another --dir")
    dest.mkdir(parents=True, exist_ok=True)
    backup_dir = dest / f".brrr-backup-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    copied, kept, backed_up = [], [], []
    for src in sorted(source.rglob("*")):
        rel = src.relative_to(source)
        if not src.is_file() or any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
            continue
        dst = dest / rel
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
        tuple(copied), tuple(kept), tuple(backed_up), backup_dir if backed_up else None
    )


def _workspace_problem(dest: Path, option: str = "--dir") -> str | None:
    """None if notebooks can be written into ``dest`` (made if missing), else why not."""
    if dest.exists() and not dest.is_dir():
        return f"{option} {dest} is a file, not a folder: choose another {option}"
    if not dest.exists() and not dest.parent.is_dir():
        return (
            f"{option} {dest}: its parent {dest.parent} does not exist: "
            "create it, or choose another"
        )
    try:
        dest.mkdir(exist_ok=True)
        with tempfile.TemporaryFile(dir=dest):
            pass
    except OSError as err:
        why = err.strerror or err
        return f"{option} {dest}: cannot write there ({why}): choose a folder of your own"
    return None


# Jupyter also reads the user's config files, and one that sets an empty token
# or ip="0.0.0.0" would open the course (a Python shell) to anyone who can reach
# the machine. Options on the command line win over config files, so brrr lab
# sets loopback and a fresh token there. The token travels in the environment
# and is appended to sys.argv inside the new process: any user of the machine
# can read a process's command line (`ps`), only its owner its environment.
_TOKEN_ENV = "BRRR_LAB_TOKEN"
_LAUNCH_LAB = (
    "import os, sys; from jupyterlab.labapp import main; "
    f"sys.argv.append('--IdentityProvider.token=' + os.environ.pop({_TOKEN_ENV!r})); "
    "sys.exit(main())"
)


def _lab_command(dest: Path, no_browser: bool, port: int, as_root: bool | None = None):
    """JupyterLab's command line, as a list; the token comes through the environment."""
    cmd = [sys.executable, "-c", _LAUNCH_LAB, f"--ServerApp.root_dir={dest}"]
    # The port brrr lab printed, or an error: never a quiet move to the next one.
    cmd += ["--ServerApp.ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0"]
    if as_root is None:
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if as_root:
        # Jupyter refuses to start as root unless told; containers and cloud
        # notebooks often run as root, where that refusal only gets in the way.
        cmd.append("--allow-root")
    if no_browser:
        cmd.append("--no-browser")
    return cmd


def _free_port(preferred: int = 8888) -> int:
    """``preferred`` if it is free on loopback, else a free port the system picks."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab(opts, out) -> int:
    src = course_source()
    if src is None:
        print(
            "brrr lab: the course notebooks were not found (neither the package data "
            f"brrrlib/course nor course/ beside brrrlib): {REINSTALL}",
            file=sys.stderr,
        )
        return 2
    copy_only = opts.copy_only is not None
    option, where = ("--copy-only", opts.copy_only) if copy_only else ("--dir", opts.dir)
    try:
        dest = Path(where).expanduser().resolve()
        problem = _workspace_problem(dest, option)
        report = None if problem else copy_course(src, dest, reset=opts.reset)
    except (OSError, RuntimeError, ValueError) as err:  # RuntimeError: "~" without a home
        problem = f"{option} {where}: copying the course there failed: {err}"
    if problem:
        print(f"brrr lab: {problem}", file=sys.stderr)
        return 2
    print(f"brrr lab: workspace {dest}: {report}", file=out)
    if copy_only:  # a hub's start hook: the user is already in a JupyterLab
        return 0
    if importlib.util.find_spec("jupyterlab") is None:
        print("brrr lab: jupyterlab is not installed here; pip install jupyterlab", file=sys.stderr)
        return 1
    port, token = opts.port or _free_port(), secrets.token_hex(24)  # 192 random bits
    # Jupyter shows a token it did not make itself as "...": the address is printed here.
    print(f"brrr lab: JupyterLab at http://127.0.0.1:{port}/lab?token={token}", file=out)
    out.flush()
    cmd = _lab_command(dest, opts.no_browser, port)
    return _serve(cmd, cwd=dest, env={**os.environ, _TOKEN_ENV: token})


#: Seconds JupyterLab gets to stop (shutting its kernels down) before it is killed.
STOP_GRACE_S = 15.0


def _exit_on_signal(signum, _frame):
    """A SIGTERM or SIGHUP reached ``brrr lab``: stop the server as after Ctrl-C, then exit."""
    raise SystemExit(128 + signum)


def _serve(cmd: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Run the server ``cmd`` until it exits; when ``brrr`` is stopped, :func:`_stop` it."""
    posix = os.name == "posix"
    stdin = subprocess.DEVNULL if posix else None
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=stdin, start_new_session=posix)
    stops = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {s: signal.signal(s, _exit_on_signal) for s in stops}
    try:
        return proc.wait()
    except (KeyboardInterrupt, SystemExit):
        _stop(proc, ask=posix)
        raise  # Ctrl-C: main() says "interrupted" and exits 130; a signal: 128 + its number
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _stop(proc: subprocess.Popen, ask: bool) -> int:
    """Ask the server to stop (SIGTERM), wait up to :data:`STOP_GRACE_S`; then kill it."""
    print(
        "brrr lab: stopping JupyterLab: its kernels are shut down first "
        f"(up to {STOP_GRACE_S:.0f} s; Ctrl-C again to stop it at once)",
        file=sys.stderr,
        flush=True,
    )
    if proc.poll() is None and ask:
        proc.terminate()
    try:
        return proc.wait(timeout=STOP_GRACE_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt, SystemExit):
        proc.kill()
        return proc.wait()


# -------------------------------------------------------------------- main ---
_DIAGNOSE_HELP = """\
NAME is a zero-argument function that returns (fn, args) or (fn, args, kwargs);
brrr diagnose measures fn(*args, **kwargs). For example, in mymodel.py:

    def workload():
        x = torch.randn(4096, 4096)
        return torch.mm, (x, x)

then:  brrr diagnose mymodel.py:workload   (or: brrrlib.workloads:mystery_a)
Keywords bl.diagnose takes itself (budget_s, label, ...) cannot be the
workload's: bind those with functools.partial(fn, budget_s=...).
Exit status: 0 diagnosed, 1 the workload failed, 2 the target cannot be loaded."""


_LAB_DESCRIPTION = f"""\
Copy the course notebooks into a workspace folder (only the ones not there
yet: your edits are never overwritten) and start JupyterLab there, on
127.0.0.1 behind a fresh token, with this environment's Python as the kernel.
Ctrl-C stops it: JupyterLab shuts its kernels down first, then exits (after
{STOP_GRACE_S:.0f} s it is ended; Ctrl-C again ends it at once)."""

_LAB_EPILOG = """\
On a remote machine (a GPU box over ssh), JupyterLab listens on that
machine's loopback only; forward its port from your own machine:

  gpu-box$  brrr lab --no-browser --port 8888
  laptop$   ssh -N -L 8888:127.0.0.1:8888 you@gpu-box

then open the http://127.0.0.1:8888/lab?token=... address brrr lab printed,
in your laptop's browser.

A newer course (in a clone: git pull): brrr lab --reset copies the new
notebooks, keeping your old ones in the backup folder."""


def _port(text: str) -> int:
    if not (text.isdigit() and 1 <= int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 1 to 65535")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="brrr", description="Making deep learning go brrrr, measured: the course's commands."
    )
    p.add_argument("--version", action="version", version=f"brrr {package_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("doctor", help="check that this machine can run the course (run this first)")
    d.add_argument("--refresh", action="store_true", help="measure the ceilings again (no cache)")
    d.add_argument("--quick", action="store_true", help="skip the torch.compile check")
    g = sub.add_parser(
        "diagnose",
        help="say whether your workload is compute-, memory- or overhead-bound",
        description="Run bl.diagnose on your own code: measure it, count its FLOPs and bytes,\n"
        "double its batch, trace it, and name its regime (compute-, memory- or\n"
        "overhead-bound) with the evidence and what to do about it (chapter 04).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_DIAGNOSE_HELP,
    )
    g.add_argument("target", metavar="MODULE:NAME", help="e.g. mymodel.py:workload")
    lab = sub.add_parser(
        "lab",
        help="copy the course notebooks to a workspace and open JupyterLab",
        description=_LAB_DESCRIPTION,
        epilog=_LAB_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = lab.add_mutually_exclusive_group()
    where.add_argument(
        "--dir",
        default="~/brrr-course",
        help="the workspace folder, made if missing (default: ~/brrr-course)",
    )
    where.add_argument(
        "--copy-only",
        metavar="DIR",
        help="only copy the notebooks into DIR (the missing ones; with --reset, fresh ones) "
        "and exit without starting JupyterLab: for a JupyterHub start hook "
        "(course/INSTRUCTORS.md)",
    )
    lab.add_argument(
        "--reset",
        action="store_true",
        help="copy every notebook fresh, after moving yours that differ to "
        "DIR/.brrr-backup-<date-time>/ (nothing is deleted): after `git pull`, or to start over",
    )
    lab.add_argument(
        "--no-browser",
        action="store_true",
        help="do not open a browser; only print the address (on a remote machine: see below)",
    )
    lab.add_argument(
        "--port",
        type=_port,
        help="JupyterLab's port on 127.0.0.1 (default: 8888, or a free one if 8888 is taken)",
    )
    _workshop.add_parser(sub, _port)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``brrr`` and ``python -m brrrlib``; returns the exit status."""
    parser = _parser()
    opts = parser.parse_args(argv)
    try:
        if opts.command == "doctor":
            return doctor(refresh=opts.refresh, quick=opts.quick, out=sys.stdout)
        if opts.command == "diagnose":
            return _diagnose(opts.target, sys.stdout)
        if opts.command == "lab":
            return _lab(opts, sys.stdout)
        if opts.command == "workshop":
            return _workshop.run(opts, sys.stdout)
    except KeyboardInterrupt:
        print("\nbrrr: interrupted", file=sys.stderr)
        return 130
    parser.print_help(sys.stdout)
    return 2
