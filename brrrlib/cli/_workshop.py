"""``brrr workshop``: a JupyterHub on this machine for a class, one account per learner."""

from __future__ import annotations

import argparse
import hashlib
import hmac
import importlib.util
import ipaddress
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
from pathlib import Path

__all__ = ["Share", "Workshop", "WorkshopError", "add_parser", "check_password", "run"]

DEFAULT_DIR = "/srv/brrr-workshop"
COURSE_DIR = "brrr-course"
"""Each account's copy of the chapters, in its home."""
PROXY = "configurable-http-proxy"
INSTALL_PROXY = "npm install -g configurable-http-proxy (Node.js 20 or newer)"
INSTALL_HUB = "pip install 'brrrlib[workshop]' (in a clone: pip install -e '.[workshop]')"

_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
# Passwords are read from a card and typed: no 0/o, 1/l/i. Four letters a group, 31 to
# choose from: 3 groups are 59 bits for a learner, 4 are 79 for the instructor.
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}  # ~50 ms and 16 MiB per check


class WorkshopError(Exception):
    """Something ``brrr workshop`` cannot do as asked; the message says what to do."""


@dataclass(frozen=True)
class Share:
    """Each kernel's share of this machine: ``cores // learners`` threads, at least one."""

    cores: int
    learners: int

    @property
    def threads(self) -> int:
        """Threads per kernel: the whole cores each learner's share holds, at least one."""
        return max(1, self.cores // self.learners)

    @property
    def cores_each(self) -> float:
        """CPU time per learner, in cores, when every learner measures at once."""
        return self.cores / self.learners

    def environment(self) -> dict[str, str]:
        """The variables that set each kernel's thread count (torch reads OMP_NUM_THREADS)."""
        return {"OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads)}

    def __str__(self) -> str:
        return (
            f"{self.threads} thread(s) per kernel: {self.cores} cores / {self.learners} "
            f"learners = {self.cores_each:.2g} core each when all measure at once"
        )


@dataclass(frozen=True)
class Workshop:
    """A workshop's folder: where the hub, the homes and the reports live."""

    root: Path

    @property
    def hub(self) -> Path:
        return self.root / "hub"

    @property
    def homes(self) -> Path:
        return self.root / "home"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def accounts_file(self) -> Path:
        return self.hub / "accounts.json"

    @property
    def cards_file(self) -> Path:
        return self.hub / "cards.txt"

    @property
    def settings_file(self) -> Path:
        return self.hub / "workshop.json"

    @property
    def config_file(self) -> Path:
        return self.hub / "jupyterhub_config.py"

    def accounts(self) -> dict[str, dict]:
        """``{name: {"admin": bool, "salt": hex, "scrypt": hex}}``; empty before the first start."""
        if not self.accounts_file.exists():
            return {}
        return json.loads(self.accounts_file.read_text())["accounts"]


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


# ------------------------------------------------------------------------ checks ---


def _system_problem(end: bool) -> str | None:
    """Why this machine cannot hold a workshop here and now, or None."""
    if sys.platform != "linux":
        return (
            "runs on Linux only (an account per learner, servers started as them); elsewhere "
            "use The Littlest JupyterHub or your institution's hub (course/INSTRUCTORS.md)"
        )
    if os.geteuid() != 0:
        return (
            "needs root: each learner gets an account of their own and the hub starts their "
            f"servers as them. Run it with sudo: sudo {sys.executable} -m brrrlib workshop ..."
        )
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        return "useradd/userdel were not found (Debian, Ubuntu: apt install passwd)"
    if end:
        return None
    if importlib.util.find_spec("jupyterhub") is None:
        return f"JupyterHub is not installed in this environment: {INSTALL_HUB}"
    if _proxy() is None:
        return f"{PROXY}, the proxy JupyterHub starts, was not found: {INSTALL_PROXY}"
    return None


def _proxy() -> str | None:
    """configurable-http-proxy: on PATH, or in this environment's bin (``npm -g --prefix``)."""
    here = str(Path(sys.executable).parent)
    return shutil.which(PROXY, path=os.pathsep.join([os.environ.get("PATH", ""), here]))


def _closed_folder(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (links followed) other accounts cannot enter."""
    real = Path(os.path.realpath(path))
    for folder in (*reversed(real.parents), real):
        if folder.is_dir() and not folder.stat().st_mode & stat.S_IXOTH:
            return folder
    return None


def _environment_problem() -> str | None:
    """None if another account can run this environment's Python and the course, else why."""
    import pwd

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None  # nobody to try with: the first learner's start will say
    probe = [sys.executable, "-c", "import brrrlib.cli, jupyterhub, jupyterlab, ipykernel"]
    try:
        done = subprocess.run(
            probe,
            user=nobody.pw_uid,
            group=nobody.pw_gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": os.environ.get("PATH", ""), "HOME": "/"},
            capture_output=True,
            text=True,
            timeout=300,
        )
        said = (done.stderr.strip().splitlines() or ["it failed"])[-1]
    except OSError as err:  # the Python itself cannot be run as that account
        done, said = None, str(err)
    if done is not None and done.returncode == 0:
        return None
    import brrrlib

    places = (Path(sys.executable), Path(sys.prefix), Path(brrrlib.__file__))
    closed = next(filter(None, map(_closed_folder, places)), None)
    why = (
        f"{closed} is closed to other accounts ({stat.filemode(closed.stat().st_mode)})"
        if closed
        else said
    )
    return (
        f"the learners' accounts cannot run this environment ({sys.executable}): {why}. "
        "Their servers run as their own accounts: install the course where every account "
        "can read it, with a Python outside any private home (a pyenv or conda Python in "
        "/root will not do), e.g. sudo /usr/bin/python3 -m venv /opt/brrr, then install "
        "torch and brrrlib[workshop] into it and run /opt/brrr/bin/brrr workshop "
        "(course/INSTRUCTORS.md)"
    )


@dataclass(frozen=True)
class Listen:
    """Where the hub listens, and with what certificate."""

    ip: str
    port: int
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.ip).is_loopback

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert else "http"
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{scheme}://{host}:{self.port}/"

    def exposure(self) -> str:
        """What binding here opens, in one sentence ("" on loopback)."""
        if self.loopback:
            return ""
        return (
            f"--ip {self.ip} opens the hub to every machine that can reach {self.ip}:"
            f"{self.port}: its login page, and behind each password a Python kernel running "
            "as that account on this machine"
        )


def _listen(opts) -> Listen:
    """The address from ``--ip``/``--port``/``--tls-*``; beyond loopback only with TLS."""
    try:
        ipaddress.ip_address(opts.ip)
    except ValueError:
        raise WorkshopError(
            f"--ip {opts.ip!r} is not an IP address: give 127.0.0.1 (this machine only, the "
            "default) or this machine's address on the room's network"
        ) from None
    if bool(opts.tls_cert) != bool(opts.tls_key):
        raise WorkshopError("--tls-cert and --tls-key go together: give both files, or neither")
    for option, path in (("--tls-cert", opts.tls_cert), ("--tls-key", opts.tls_key)):
        if path and not Path(path).is_file():
            raise WorkshopError(f"{option} {path}: no such file")
    listen = Listen(opts.ip, opts.port, opts.tls_cert, opts.tls_key)
    if not listen.loopback and not listen.tls_cert and not opts.behind_tls_proxy:
        raise WorkshopError(
            f"{listen.exposure()}. Over plain HTTP every password and every cell crosses the "
            "network readable by anyone on it: give --tls-cert PEM --tls-key PEM, or "
            "--behind-tls-proxy if a proxy with TLS in front forwards to this address"
        )
    return listen


# ---------------------------------------------------------------------- accounts ---


def _names(text: str | None) -> list[str]:
    """``--learners``: names separated by commas, or a number N (learner01 ... learnerNN)."""
    if not text:
        return []
    if text.strip().isdigit():
        n = int(text)
        if not 1 <= n <= 500:
            raise WorkshopError(f"--learners {text}: give between 1 and 500 learners")
        return [f"learner{i:0{max(2, len(str(n)))}d}" for i in range(1, n + 1)]
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    for name in names:
        if not _NAME.fullmatch(name):
            raise WorkshopError(
                f"--learners: {name!r} cannot be an account name: use lower-case letters, "
                "digits, - and _, starting with a letter (at most 32)"
            )
    return names


def _plan(workshop: Workshop, opts) -> tuple[dict[str, dict], list[str]]:
    """The workshop's accounts so far, and the names that need a system account made."""
    accounts = workshop.accounts()
    if not accounts:
        if not opts.learners:
            raise WorkshopError(
                f"{workshop.root} holds no workshop yet: name the learners, e.g. "
                "--learners ada,bob,cy or --learners 20"
            )
        if not _NAME.fullmatch(opts.instructor):
            raise WorkshopError(f"--instructor {opts.instructor!r} cannot be an account name")
    wanted = ([] if accounts else [opts.instructor]) + _names(opts.learners)
    if not accounts and opts.instructor in wanted[1:]:
        raise WorkshopError(f"--instructor {opts.instructor} is also among --learners")
    taken = [n for n in wanted if n not in accounts and _exists(n)]
    if taken:
        raise WorkshopError(
            f"{taken[0]} is already an account on this machine: pick another name (the "
            "workshop makes accounts of its own, and never lends out an existing one)"
        )
    missing = [n for n in dict.fromkeys([*accounts, *wanted]) if not _exists(n)]
    return accounts, missing


def _exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _add_account(workshop: Workshop, name: str) -> None:
    """A system account for ``name`` with its home in the workshop, locked (no password)."""
    home = workshop.homes / name
    cmd = ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash"]
    cmd += ["--comment", f"brrr workshop {workshop.root}", name]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise WorkshopError(f"useradd {name} failed: {done.stderr.strip()}")
    import pwd

    account = pwd.getpwnam(name)  # a home kept from before --end becomes the new account's
    for folder, _dirs, files in os.walk(home):
        for path in (folder, *(os.path.join(folder, f) for f in files)):
            os.lchown(path, account.pw_uid, account.pw_gid)
    home.chmod(0o700)


def _prepare(workshop: Workshop, opts) -> tuple[dict[str, dict], dict[str, str]]:
    """Folders, accounts and their passwords; returns the accounts and the new passwords."""
    accounts, missing = _plan(workshop, opts)
    closed = _closed_folder(workshop.root.parent)
    if closed is not None:
        raise WorkshopError(
            f"--dir {workshop.root}: {closed} is closed to other accounts, so no learner "
            f"could reach their home in it: choose a folder such as {DEFAULT_DIR}"
        )
    for folder, mode in ((workshop.root, 0o755), (workshop.hub, 0o700), (workshop.homes, 0o755)):
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(mode)
    passwords = {}
    if not accounts:  # the first start: the instructor's account, the only admin
        accounts[opts.instructor], passwords[opts.instructor] = _new_entry(admin=True)
    for name in [n for n in _names(opts.learners) if n not in accounts]:
        accounts[name], passwords[name] = _new_entry(admin=False)
    for name in missing:
        _add_account(workshop, name)
    instructor = next(n for n, e in accounts.items() if e["admin"])
    import pwd

    owner = pwd.getpwnam(instructor)
    workshop.results.mkdir(exist_ok=True)
    os.chown(workshop.results, owner.pw_uid, owner.pw_gid)
    workshop.results.chmod(0o1733)  # drop box: add a file, replace only your own
    _write_private(workshop.accounts_file, json.dumps({"accounts": accounts}, indent=2) + "\n")
    if passwords:
        cards = workshop.cards_file.read_text() if workshop.cards_file.exists() else ""
        for name, password in passwords.items():
            cards += f"{name}\t{password}\t{'instructor' if accounts[name]['admin'] else ''}\n"
        _write_private(workshop.cards_file, cards)
    return accounts, passwords


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by root alone (0600), never half-written."""
    tmp = path.with_suffix(".tmp")
    tmp.touch(mode=0o600)
    tmp.chmod(0o600)
    tmp.write_text(text)
    os.replace(tmp, path)


def _end(workshop: Workshop, out) -> int:
    """``--end``: remove the workshop's accounts; their homes and the reports stay."""
    accounts = workshop.accounts()
    if not accounts:
        print(f"brrr workshop: {workshop.root} holds no workshop accounts", file=sys.stderr)
        return 2
    removed = [n for n in accounts if _exists(n)]
    for name in removed:
        done = subprocess.run(["userdel", name], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"brrr workshop: userdel {name}: {done.stderr.strip()}", file=sys.stderr)
            return 1
    print(
        f"brrr workshop: removed {len(removed)} account(s); their homes and the reports stay "
        f"in {workshop.root} (delete it when you have kept what you need)",
        file=out,
    )
    return 0


# --------------------------------------------------------------------------- run ---


def _settings(workshop: Workshop, listen: Listen, accounts: dict) -> Share:
    """Write workshop.json and the hub's config file; returns each kernel's share."""
    cores = len(os.sched_getaffinity(0))
    share = Share(cores, max(1, sum(not e["admin"] for e in accounts.values())))
    settings = {
        "ip": listen.ip,
        "port": listen.port,
        "tls_cert": listen.tls_cert,
        "tls_key": listen.tls_key,
        "proxy": _proxy(),
        "cores": share.cores,
        "learners": share.learners,
    }
    _write_private(workshop.settings_file, json.dumps(settings, indent=2) + "\n")
    config = (
        "# Written by `brrr workshop` at every start; JupyterHub reads it. The settings are\n"
        "# in workshop.json beside it; brrrlib/cli/_hub.py says what each one does.\n"
        "from brrrlib.cli._hub import configure\n\n"
        f"configure(c, {str(workshop.config_file)!r})\n"
    )
    _write_private(workshop.config_file, config)
    return share


def _summary(workshop: Workshop, listen: Listen, accounts: dict, share: Share, new: dict) -> str:
    """What the instructor reads before the hub's own log starts."""
    import psutil

    learners = share.learners
    link = f"{listen.url}hub/user-redirect/lab/tree/{COURSE_DIR}"
    lines = [
        f"hub at {listen.url}"
        + (" (this machine only; --ip to open it to the room)" if listen.loopback else ""),
        f"  accounts: {len(accounts) - learners} instructor, {learners} learner(s); "
        f"{len(new)} new. Names and passwords: {workshop.cards_file} (print it, hand out the "
        "cards, then delete it: the hub keeps only scrypt hashes)",
        f"  each kernel: {share}",
        f"  a chapter: {link}/00_the_factory.ipynb (00 to 06 alike)",
        f"  the class view: {link}/instructor/class_results.ipynb; reports land in "
        f"{workshop.results}",
        "  Ctrl-C stops the hub and every server; --end then removes the accounts",
    ]
    if not listen.loopback:
        lines.insert(1, f"  NOTE: {listen.exposure()}")
    memory_each = psutil.virtual_memory().total / len(accounts)
    if memory_each < 2 * 2**30:
        lines.append(
            f"  NOTE: {memory_each / 2**30:.1f} GB of memory per account; a chapter's kernel "
            "peaks near 1 GB, so give each learner 2 GB"
        )
    return "\n".join(f"brrr workshop: {line}" if i == 0 else line for i, line in enumerate(lines))


def run(opts, out) -> int:
    """``brrr workshop``: prepare the workshop folder and accounts, then become JupyterHub."""
    workshop = Workshop(Path(opts.dir).expanduser().resolve())
    try:
        listen, _ = _listen(opts), _names(opts.learners)  # what was asked, before the machine
        problem = _system_problem(end=opts.end)
        if problem:
            raise WorkshopError(problem)
        if opts.end:
            return _end(workshop, out)
        problem = _environment_problem()
        if problem:
            raise WorkshopError(problem)
        accounts, new = _prepare(workshop, opts)
        share = _settings(workshop, listen, accounts)
    except WorkshopError as err:
        print(f"brrr workshop: {err}", file=sys.stderr)
        return 2
    print(_summary(workshop, listen, accounts, share, new), file=out, flush=True)
    here = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([here, os.environ.get("PATH", "")])}
    os.chdir(workshop.hub)
    # JupyterHub takes this process over: Ctrl-C (or SIGTERM) reaches it, and it stops
    # every learner's server and the proxy before it exits.
    os.execve(
        sys.executable, [sys.executable, "-m", "jupyterhub", "-f", "jupyterhub_config.py"], env
    )
    return 0  # not reached


# ------------------------------------------------------------------------ parser ---

_DESCRIPTION = """\
Start JupyterHub on this machine for a class (run as root, Linux): an account and a
password per learner and one for the instructor (the only admin), each learner's own
copy of the chapters, the course's environment as every kernel, each kernel's thread
count set to its share of the cores, and a shared folder where bl.report() writes and
the instructor's class view reads. It listens on 127.0.0.1 unless told otherwise."""

_EPILOG = f"""\
First start:   sudo .venv/bin/brrr workshop --learners ada,bob,cy   (or --learners 20)
Again:         sudo .venv/bin/brrr workshop          (the same accounts and passwords)
More learners: sudo .venv/bin/brrr workshop --learners dan,eve
The room:      add --ip <this machine's address> --tls-cert PEM --tls-key PEM
After class:   Ctrl-C, then sudo .venv/bin/brrr workshop --end

Names and passwords: DIR/hub/cards.txt. Needs JupyterHub and its proxy:
  {INSTALL_HUB}
  {INSTALL_PROXY}
Exit status: 2 when it cannot start as asked (the message says why)."""


def add_parser(sub, port_type) -> argparse.ArgumentParser:
    """The ``workshop`` subcommand's options."""
    w = sub.add_parser(
        "workshop",
        help="start a JupyterHub on this machine for a class (as root)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("--dir", default=DEFAULT_DIR, help=f"the workshop's folder ({DEFAULT_DIR})")
    w.add_argument(
        "--learners",
        metavar="NAMES|N",
        help="account names separated by commas (ada,bob,cy), or a number N (learner01 to "
        "learnerNN); names new to the workshop are added",
    )
    w.add_argument(
        "--instructor", default="instructor", help="the admin account's name (first start)"
    )
    w.add_argument("--ip", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    w.add_argument("--port", type=port_type, default=8000, help="the port (8000)")
    w.add_argument("--tls-cert", metavar="PEM", help="TLS certificate (needed beyond loopback)")
    w.add_argument("--tls-key", metavar="PEM", help="its private key")
    w.add_argument(
        "--behind-tls-proxy",
        action="store_true",
        help="plain HTTP beyond loopback, because a proxy with TLS in front forwards to it",
    )
    w.add_argument(
        "--end", action="store_true", help="remove the workshop's accounts (homes stay in DIR)"
    )
    return w
