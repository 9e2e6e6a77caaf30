"""``brrr workshop``: a JupyterHub on this machine for a class, one account per learner."""

from __future__ import annotations

import argparse
import hashlib
import hmac
import importlib.util
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from ipaddress import ip_address
from pathlib import Path

from brrrlib import _fmt
from brrrlib._files import write_atomic

__all__ = ["Share", "Workshop", "WorkshopError", "add_parser", "check_password", "run"]

DEFAULT_DIR = "/srv/brrr-workshop"
COURSE_DIR = "brrr-course"  # each account's copy of the chapters, in its home
PROXY = "configurable-http-proxy"
INSTALL = "pip install 'brrrlib[workshop]' and npm install -g configurable-http-proxy (Node.js 20+)"
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
# Passwords are read from a card and typed: no 0/o, 1/l/i. Four letters a group, 31 to
# choose from: 3 groups are 59 bits for a learner, 4 are 79 for the instructor.
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}  # ~50 ms and 16 MiB per check
_private = partial(write_atomic, mode=0o600)  # readable by root alone, never half-written


class WorkshopError(Exception):
    """Something ``brrr workshop`` cannot do as asked; the message says what to do."""


@dataclass(frozen=True)
class Share:
    """Each kernel's share of this machine: ``cores // learners`` threads, at least one."""

    cores: int
    learners: int

    @property
    def threads(self) -> int:
        return max(1, self.cores // self.learners)

    @property
    def cores_each(self) -> float:
        """CPU time per learner, in cores, when every learner measures at once."""
        return self.cores / self.learners

    def environment(self) -> dict[str, str]:
        """The variables that set each kernel's thread count (torch reads OMP_NUM_THREADS)."""
        return {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}


@dataclass(frozen=True)
class Workshop:
    """A workshop's folder: ``hub/`` (accounts, cards, settings), ``home/``, ``results/``."""

    root: Path

    @property
    def hub(self) -> Path:
        return self.root / "hub"

    def accounts(self) -> dict[str, dict]:
        """``{name: {"admin": bool, "salt": hex, "scrypt": hex}}``; empty before the first start."""
        path = self.hub / "accounts.json"
        return json.loads(path.read_text())["accounts"] if path.exists() else {}


def check_password(entry: Mapping, password: str) -> bool:
    """True when ``password`` is the one an ``accounts.json`` entry was made from."""
    key = hashlib.scrypt(password.encode(), salt=bytes.fromhex(entry["salt"]), **_SCRYPT)
    return hmac.compare_digest(key.hex(), entry["scrypt"])


def _new_entry(admin: bool) -> tuple[dict, str]:
    """A fresh password and the ``accounts.json`` entry that checks it."""
    groups = 4 if admin else 3
    password = "-".join("".join(secrets.choice(_ALPHABET) for _ in range(4)) for _ in range(groups))
    salt = secrets.token_bytes(16)
    key = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    return {"admin": admin, "salt": salt.hex(), "scrypt": key.hex()}, password


def _account(name: str):
    """The system account ``name`` (its ``pwd`` entry), or None."""
    import pwd  # Unix only: brrr's other commands run on Windows too

    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _path() -> str:
    """PATH with this environment's bin first: its brrr, its proxy (``npm -g --prefix``)."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def _closed(*paths: Path) -> str | None:
    """The first folder on the way to ``paths`` (links followed) other accounts cannot enter."""
    for real in (Path(os.path.realpath(p)) for p in paths):
        for folder in (*reversed(real.parents), real):
            if folder.is_dir() and not folder.stat().st_mode & stat.S_IXOTH:
                return f"{folder} is closed to other accounts"
    return None


def _check_machine(end: bool) -> None:
    """WorkshopError when this machine cannot hold a workshop (with ``end``: end one) now."""
    if sys.platform != "linux" or os.geteuid() != 0:
        raise WorkshopError(f"needs Linux and root: sudo {sys.executable} -m brrrlib workshop ...")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        raise WorkshopError("useradd/userdel missing: apt install passwd")
    if end:
        return
    if importlib.util.find_spec("jupyterhub") is None or shutil.which(PROXY, path=_path()) is None:
        raise WorkshopError(f"JupyterHub or {PROXY} missing: {INSTALL}")
    nobody = _account("nobody")  # can another account run this Python and the course?
    if nobody is None:
        return  # nobody to try with: the first learner's start will say
    probe = [sys.executable, "-c", "import brrrlib.cli, jupyterhub, jupyterlab, ipykernel"]
    as_nobody = dict(user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[], cwd="/", timeout=300)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": "/"}
    try:
        done = subprocess.run(probe, env=env, capture_output=True, text=True, **as_nobody)
        if done.returncode == 0:
            return
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    except OSError as err:  # the Python itself cannot be run as that account
        said = str(err)
    why = _closed(Path(sys.executable), Path(sys.prefix), Path(__file__)) or said
    fix = "install the course in a Python every account can read: course/INSTRUCTORS.md"
    raise WorkshopError(f"other accounts cannot run {sys.executable} ({why}): {fix}")


def _listen(opts) -> dict:
    """``--ip``, ``--port``, ``--tls-*`` and the hub's URL; beyond loopback only with TLS."""
    loopback, half = opts.ip.is_loopback, bool(opts.tls_cert) != bool(opts.tls_key)
    if half or not (loopback or opts.tls_cert or opts.behind_tls_proxy):
        fix = "give both --tls-cert and --tls-key, or --behind-tls-proxy"
        raise WorkshopError(f"--ip {opts.ip}: plain HTTP shows the passwords: {fix}")
    for option, path in (("--tls-cert", opts.tls_cert), ("--tls-key", opts.tls_key)):
        if path and not Path(path).is_file():
            raise WorkshopError(f"{option} {path}: no such file")
    host = f"[{opts.ip}]" if opts.ip.version == 6 else opts.ip
    url = f"{'https' if opts.tls_cert else 'http'}://{host}:{opts.port}"
    return {"url": url, "loopback": loopback, "tls_cert": opts.tls_cert, "tls_key": opts.tls_key}


def _name(text: str) -> str:
    """``--instructor``, and each of ``--learners``: a new account's name."""
    if not _NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an account name ({_NAME.pattern})")
    return text


def whole_number(text: str, high: int = 65535) -> int:
    """``--port`` (``brrr lab``'s too) and ``--learners N``: a whole number from 1 to ``high``."""
    if not (text.strip().isdigit() and 1 <= int(text) <= high):
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number from 1 to {high}")
    return int(text)


def _names(text: str) -> list[str]:
    """``--learners``: names separated by commas, or a number N (learner01 ... learnerNN)."""
    if text.strip().isdigit():
        n = whole_number(text, high=500)
        return [f"learner{i:0{max(2, len(str(n)))}d}" for i in range(1, n + 1)]
    return list(dict.fromkeys(_name(n.strip()) for n in text.split(",") if n.strip()))


def _prepare(workshop: Workshop, opts) -> tuple[dict[str, dict], dict[str, str]]:
    """Folders, accounts and their passwords; returns the accounts and the new passwords."""
    root, accounts = workshop.root, workshop.accounts()
    wanted = ([] if accounts else [opts.instructor]) + opts.learners
    if not accounts and opts.instructor in wanted[1:]:
        raise WorkshopError(f"--instructor {opts.instructor} is also among --learners")
    taken = [n for n in wanted if n not in accounts and _account(n)]
    if taken:  # the workshop makes accounts of its own, and never lends out an existing one
        raise WorkshopError(f"{taken[0]} is already an account here: pick another name")
    closed = _closed(root.parent)
    if closed:
        raise WorkshopError(f"--dir {root}: {closed}: choose a folder such as {DEFAULT_DIR}")
    results = root / "results"  # a drop box (1733): add a file, replace only your own
    modes = {root: 0o755, workshop.hub: 0o700, root / "home": 0o755, results: 0o1733}
    for folder, mode in modes.items():
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(mode)
    passwords = {}
    for name in wanted:
        if name not in accounts:  # the first start's first name: the instructor, the only admin
            accounts[name], passwords[name] = _new_entry(admin=not accounts)
    for name in [n for n in accounts if not _account(n)]:  # locked: no system password
        home = root / "home" / name
        useradd = ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash"]
        _system(*useradd, "--comment", str(root), name)
        _system("chown", "-R", "-h", f"{name}:", str(home))  # a home kept from before --end
        home.chmod(0o700)
    instructor = next(n for n, e in accounts.items() if e["admin"])
    _system("chown", f"{instructor}:", str(results))
    _private(workshop.hub / "accounts.json", json.dumps({"accounts": accounts}, indent=2))
    cards = workshop.hub / "cards.txt"
    new = [f"{n}\t{p}\t{'instructor' * accounts[n]['admin']}\n" for n, p in passwords.items()]
    _private(cards, (cards.read_text() if cards.exists() else "") + "".join(new))
    return accounts, passwords


def _system(*cmd: str) -> None:
    """Run an account command (useradd, userdel, chown) as root; WorkshopError if it fails."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise WorkshopError(f"{cmd[0]} {cmd[-1]}: {done.stderr.strip()}")


def _end(workshop: Workshop) -> int:
    """``--end``: remove the workshop's accounts; their homes and the reports stay."""
    removed = [n for n in workshop.accounts() if _account(n)]
    for name in removed:
        _system("userdel", name)
    print(_fmt.text_table(("workshop", str(workshop.root)), [("removed", str(len(removed)))]))
    return 0


def _start(workshop: Workshop, listen: dict, accounts: dict, new: dict) -> None:
    """Write the hub's settings and config, say where it is, then become JupyterHub."""
    learners = max(1, sum(not e["admin"] for e in accounts.values()))
    share = Share(len(os.sched_getaffinity(0)), learners)
    proxy, root = shutil.which(PROXY, path=_path()), str(workshop.root)
    settings = {**listen, "root": root, "proxy": proxy, "cores": share.cores, "learners": learners}
    config = f"from brrrlib.cli._hub import configure\n\nconfigure(c, {settings!r})\n"
    _private(workshop.hub / "jupyterhub_config.py", config)
    import psutil  # here, not at the top: `brrr --help` works before the course's packages

    url, gb = listen["url"] + "/", psutil.virtual_memory().total / len(accounts) / 2**30
    link = f"{url}hub/user-redirect/lab/tree/{COURSE_DIR}"
    rows = {
        "hub": url + " (open to the network)" * (not listen["loopback"]),
        "accounts": f"{len(accounts)} new={len(new)}",
        "cards": f"{workshop.hub / 'cards.txt'} (print, then delete)",
        "cores": share.cores,
        "learners": learners,
        "threads": share.threads,  # cores // learners, at least 1
        "GB each": f"{gb:.1f}" + " (low: 2 advised)" * (gb < 2),
        "chapter": f"{link}/00_the_factory.ipynb",
        "class": f"{link}/instructor/class_results.ipynb",
        "reports": workshop.root / "results",
    }
    print(_fmt.text_table(("workshop", root), [(k, str(v)) for k, v in rows.items()]), flush=True)
    env = {**os.environ, "PATH": _path()}
    os.chdir(workshop.hub)
    # JupyterHub takes this process over: Ctrl-C (or SIGTERM) reaches it, and it stops
    # every learner's server and the proxy before it exits.
    hub = [sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"]
    os.execve(sys.executable, hub, env)


def run(opts) -> int:
    """``brrr workshop``: prepare the folder and accounts, then become JupyterHub; WorkshopError."""
    workshop = Workshop(Path(opts.dir).expanduser().resolve())
    listen = _listen(opts)  # what was asked, before the machine
    _check_machine(end=opts.end)
    if not workshop.accounts() and (opts.end or not opts.learners):
        raise WorkshopError(f"--dir {workshop.root} holds no workshop: start one with --learners")
    if opts.end:
        return _end(workshop)
    _start(workshop, listen, *_prepare(workshop, opts))
    return 0  # not reached


def add_parser(sub) -> None:
    """The ``workshop`` subcommand's options."""
    w = sub.add_parser(
        "workshop",
        help="start a JupyterHub on this machine for a class (as root)",
        epilog="sudo .venv/bin/brrr workshop --learners ada,bob,cy   (restart: without --learners)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("--dir", default=DEFAULT_DIR, help="%(default)s")
    w.add_argument("--learners", type=_names, default=[], metavar="NAMES|N", help="ada,bob,cy or N")
    w.add_argument(
        "--instructor",
        type=_name,
        default="instructor",
        metavar="NAME",
        help="the admin (first start)",
    )
    w.add_argument("--ip", type=ip_address, default="127.0.0.1", help="%(default)s")
    w.add_argument("--port", type=whole_number, default=8000, help="%(default)s")
    w.add_argument("--tls-cert", metavar="PEM", default="")
    w.add_argument("--tls-key", metavar="PEM", default="")
    w.add_argument("--behind-tls-proxy", action="store_true")
    w.add_argument("--end", action="store_true", help="after class: remove the accounts; DIR stays")
    w.set_defaults(run=run)
