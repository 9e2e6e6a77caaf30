"""The ``brrr`` command line (also ``python -m brrrlib``): doctor, diagnose, lab, workshop."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import importlib.util
import inspect
import os
import shutil
import sys
import sysconfig
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from brrrlib._files import course_folder as course_source
from brrrlib.cli import _workshop
from brrrlib.cli._doctor import CHECKS, NO_COURSE, package_version, torch_problem

__all__ = ["doctor", "main"]


def doctor(refresh: bool = False, quick: bool = False, out=None) -> int:
    """Check that the course can run here, saying what to fix; 0 if it can, 1 if not."""
    found, tags = {"refresh": refresh, "quick": quick, "course": course_source()}, Counter()
    for header, check, needs in CHECKS:
        if needs is None or found.get(needs):  # without torch nothing else runs
            print(header, file=out)
            for tag, text, *advice in check(found):
                tags[tag] += 1
                lines = [*text.splitlines(), *(f"-> {a}" for a in advice)]
                print(f"  {tag:<5} " + "\n        ".join(lines), file=out)
    print(*(f"{tag}={tags[tag]}" for tag in ("FAIL", "WARN")), file=out)  # FAIL=0 WARN=1
    return 1 if tags["FAIL"] else 0


#: What ``brrr diagnose MODULE:NAME`` points at: its help and its refusals say it.
_NAME_IS = "a function of no arguments returning (fn, args) or (fn, args, kwargs)"


class Refusal(Exception):
    """What a command cannot do as asked (a diagnose target, a lab folder); main exits 2."""

    status = 2


class _Failed(Refusal):
    """What went wrong while a command ran (no torch, the workload raised); main exits 1."""

    status = 1


def load_target(target: str) -> tuple[Callable, tuple, dict]:
    """Resolve ``MODULE:NAME`` (``brrr diagnose --help``) to ``(fn, args, kwargs)``."""
    module_part, _, name = target.rpartition(":")
    if not module_part or not name:
        raise Refusal(f"target {target!r} must look like MODULE:NAME or path/to/file.py:NAME")
    with _user_code(f"importing {module_part!r}"):
        module = _import(module_part)
    try:  # dotted names too
        factory = functools.reduce(getattr, name.split("."), module)
    except AttributeError:
        public = ", ".join(sorted(n for n in dir(module) if not n.startswith("_"))[:15])
        raise Refusal(f"{module_part} has no {name!r}; it defines: {public}") from None
    try:  # an nn.Module is called through its forward
        inspect.signature(getattr(factory, "forward", factory)).bind()
    except TypeError:  # not callable, or it needs an argument
        raise Refusal(f"{name} must be {_NAME_IS}") from None
    except ValueError:  # a builtin without a signature: call it and see
        pass
    with _user_code(f"{name}()"):
        result = factory()
    shaped = isinstance(result, tuple) and len(result) in (2, 3)
    fn, args, kwargs = (*result, {})[:3] if shaped else (None, None, None)
    if not (callable(fn) and isinstance(args, (tuple, list)) and isinstance(kwargs, dict)):
        raise Refusal(f"{name} must be {_NAME_IS}; it returned {result!r:.80}")
    return fn, tuple(args), kwargs


@contextlib.contextmanager
def _user_code(doing: str):
    """Around the learner's code (an import, a factory): any way it stops is a Refusal."""
    try:
        yield
    except (Exception, SystemExit, KeyboardInterrupt) as err:  # say where, without a traceback
        fix = ': put the script under `if __name__ == "__main__":`' * isinstance(err, SystemExit)
        raise Refusal(f"{doing}: {_describe(err)}{fix}") from None


def _import(module_part: str):
    """Import a module by name or a ``.py`` file by path; the working folder is on sys.path."""
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    if not module_part.endswith(".py") and "/" not in module_part and "\\" not in module_part:
        return importlib.import_module(module_part)
    path = Path(module_part).resolve()
    spec = importlib.util.spec_from_file_location(f"_brrr_target_{path.stem}", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)  # FileNotFoundError: no such file
    return module


def _describe(err: BaseException) -> str:
    """``KeyError: 'x' (model.py:12)``: the error and the learner's innermost line."""
    text = f"{type(err).__name__}: {err}".removesuffix(": ")  # SystemExit: 3 for sys.exit(3)
    paths = sysconfig.get_paths()  # frames in Python, site-packages or brrrlib are not theirs
    folders = (paths["stdlib"], paths["purelib"], paths["platlib"], str(Path(__file__).parents[1]))
    not_theirs = (*(os.path.join(f, "") for f in folders), "<")
    tb = traceback.extract_tb(err.__traceback__)
    theirs = [f for f in tb if not f.filename.startswith(not_theirs)]
    return text + (f" ({Path(theirs[-1].filename).name}:{theirs[-1].lineno})" if theirs else "")


def _diagnose(target: str) -> int:
    problem = torch_problem()
    if problem:
        raise _Failed(problem)
    import brrrlib

    fn, args, kwargs = load_target(target)
    own = inspect.signature(brrrlib.diagnose).parameters.keys() - {"args", "kwargs"}
    clash = sorted(own.intersection(kwargs))
    if clash:
        bind = f"functools.partial(fn, {clash[0]}={kwargs[clash[0]]!r:.40})"
        raise Refusal(f"{', '.join(clash)}: bl.diagnose's own keywords; bind with {bind}")
    try:
        result = brrrlib.diagnose(fn, *args, **kwargs)
    except (Exception, SystemExit) as err:  # the workload failed while measured: a real error
        raise _Failed(f"{target}: {_describe(err)}") from None
    print(repr(result))
    return 0


@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_course` did: paths relative to the workspace."""

    copied: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    backed_up: tuple[str, ...] = ()
    backup_dir: Path | None = None


def copy_course(source: Path, dest: Path, *, reset: bool = False) -> CopyReport:
    """Copy the course files ``dest`` lacks; ``reset`` backs up and replaces the changed ones."""
    backup_dir = Path(dest) / f".brrr-backup-{datetime.datetime.now():%Y%m%d-%H%M%S}"
    copied, kept, backed_up = [], [], []
    for src in sorted(Path(source).rglob("*")):
        rel = src.relative_to(source)
        if not src.is_file() or any(p.startswith(".") or p == "__pycache__" for p in rel.parts):
            continue
        dst = Path(dest) / rel
        if dst.exists():
            if not reset or dst.read_bytes() == src.read_bytes():
                kept.append(str(rel))
                continue
            (backup_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(dst, backup_dir / rel)
            backed_up.append(str(rel))
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        copied.append(str(rel))
    return CopyReport(*map(tuple, (copied, kept, backed_up)), backup_dir if backed_up else None)


def _lab(opts) -> int:
    src = course_source()
    if src is None:
        raise Refusal(": ".join(NO_COURSE))
    option, where = ("--copy-only", opts.copy_only) if opts.copy_only else ("--dir", opts.dir)
    try:
        dest = Path(where).expanduser().resolve()
        dest.mkdir(exist_ok=True)
        report = copy_course(src, dest, reset=opts.reset)
    except (OSError, RuntimeError) as err:  # RuntimeError: "~" without a home
        why = getattr(err, "strerror", None) or err
        raise Refusal(f"{option} {where}: {why}: choose a folder you can write") from None
    backup = f" backup_dir={report.backup_dir}" * bool(report.backed_up)
    print(
        f"brrr lab: {dest}: copied={len(report.copied)} kept={len(report.kept)}{backup}", flush=True
    )
    if opts.copy_only:  # a hub's start hook: the user is already in a JupyterLab
        return 0
    from jupyterlab.labapp import LabApp

    # JupyterLab's own options, on the command line so they win over the user's config:
    # loopback only, and its own Ctrl-C handler shuts the kernels down without asking.
    server = {"root_dir": dest, "ip": "127.0.0.1", "answer_yes": True}
    if opts.port:  # the port asked for, or an error: an ssh tunnel points at it
        server |= {"port": opts.port, "port_retries": 0}
    argv = [f"--ServerApp.{k}={v}" for k, v in server.items()] + ["--no-browser"] * opts.no_browser
    argv += ["--allow-root"] * (hasattr(os, "geteuid") and os.geteuid() == 0)  # containers
    LabApp.launch_instance(argv=argv)  # JupyterLab runs in this process until it stops
    return 0


_DIAGNOSE_HELP = f"""NAME is {_NAME_IS}, e.g. in mymodel.py
    def workload(): x = torch.randn(4096, 4096); return torch.mm, (x, x)
Exit status: 0 diagnosed, 1 the workload failed, 2 the target cannot be loaded."""

_LAB = "copy the notebooks a workspace lacks (never over your edits), open JupyterLab there"
_LAB_EPILOG = """Remote GPU: gpu-box$ brrr lab --no-browser --port 8888
            laptop$  ssh -N -L 8888:127.0.0.1:8888 you@gpu-box   (then open the URL it printed)"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="brrr")
    p.add_argument("--version", action="version", version=f"brrr {package_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("doctor", help="check that this machine can run the course (run this first)")
    d.add_argument("--refresh", action="store_true", help="measure the ceilings again (no cache)")
    d.add_argument("--quick", action="store_true", help="skip the torch.compile check")
    d.set_defaults(run=lambda opts: doctor(refresh=opts.refresh, quick=opts.quick))
    g = sub.add_parser(
        "diagnose",
        help="say whether your workload is compute-, memory- or overhead-bound (bl.diagnose)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_DIAGNOSE_HELP,
    )
    g.add_argument("target", metavar="MODULE:NAME")
    g.set_defaults(run=lambda opts: _diagnose(opts.target))
    lab = sub.add_parser(
        "lab",
        help=_LAB,
        description=_LAB,
        epilog=_LAB_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = lab.add_mutually_exclusive_group()
    where.add_argument("--dir", default="~/brrr-course", help="your workspace (~/brrr-course)")
    where.add_argument("--copy-only", metavar="DIR", help="only copy into DIR: a hub's start hook")
    lab.add_argument("--reset", action="store_true", help="copy afresh, old to DIR/.brrr-backup-*")
    lab.add_argument("--no-browser", action="store_true", help="do not open a browser")
    lab.add_argument(
        "--port",
        type=_workshop.whole_number,
        help="the port on 127.0.0.1 (8888 or the next free one)",
    )
    lab.set_defaults(run=_lab)
    _workshop.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``brrr`` and ``python -m brrrlib``; returns the exit status."""
    parser = _parser()
    opts = parser.parse_args(argv)
    if "run" not in opts:  # no command
        parser.print_help(sys.stdout)
        return 2
    try:
        return opts.run(opts)
    except (Refusal, _workshop.WorkshopError) as err:  # a refusal: what to do instead
        print(f"brrr {opts.command}: {err}", file=sys.stderr)
        return getattr(err, "status", 2)
    except KeyboardInterrupt:
        print("\nbrrr: interrupted", file=sys.stderr)
        return 130
