"""The workshop hub's side: who gets in, what each server runs, where the reports go."""

from __future__ import annotations

import asyncio
import os
import pwd
import socket
import sys
from pathlib import Path

from jupyterhub.auth import Authenticator
from tornado import web
from traitlets import Unicode

from brrrlib.cli._workshop import COURSE_DIR, Share, Workshop, check_password

__all__ = ["RosterAuthenticator", "configure", "copy_the_course"]

START_TIMEOUT_S = 180  # a server's start on a busy machine, before the hub gives up on it


class RosterAuthenticator(Authenticator):
    """Each account's own password, from ``accounts.json``; one window per learner."""

    workshop = Unicode(config=True, help=Workshop.__doc__)  # brrr workshop --dir

    async def authenticate(self, handler, data):
        name = self.normalize_username(data.get("username", ""))
        entry = Workshop(Path(self.workshop)).accounts().get(name)
        password = data.get("password", "")
        if entry is None or not await asyncio.to_thread(check_password, entry, password):
            return None  # the login page says "Invalid username or password"
        user = handler.find_user(name)
        if not entry["admin"] and user is not None and user.spawner.active:
            why = f"{name} is signed in elsewhere: sign out there, or ask the instructor"
            raise web.HTTPError(409, why)
        return name


async def copy_the_course(spawner) -> None:
    """Before each start: copy the chapters the learner lacks into ``~/brrr-course``, as them."""
    account = pwd.getpwnam(spawner.user.name)
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "brrrlib", "lab", "--copy-only", f"{account.pw_dir}/{COURSE_DIR}"),
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=os.getgrouplist(account.pw_name, account.pw_gid),
        cwd=account.pw_dir,
        env={"HOME": account.pw_dir, "PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    said = (await proc.communicate())[0].decode(errors="replace").strip()
    if proc.returncode != 0:
        raise RuntimeError(f"{account.pw_name}: {said[-800:]}")  # brrr lab's refusal
    spawner.log.info("%s", said)  # brrr lab: /home/NAME/brrr-course: copied=...


def _loopback_url() -> str:
    """A fresh port on loopback, for the hub's and the proxy's own APIs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def configure(c, settings: dict) -> None:
    """Fill JupyterHub's config ``c`` from ``brrr workshop``'s settings (its folder: "root")."""
    workshop = Workshop(Path(settings["root"]))
    accounts = workshop.accounts()
    share = Share(settings["cores"], settings["learners"])
    # Who gets in: the accounts, each with its password; the instructor alone is admin.
    c.JupyterHub.authenticator_class = RosterAuthenticator
    c.RosterAuthenticator.workshop = str(workshop.root)
    c.Authenticator.allowed_users = set(accounts)
    c.Authenticator.admin_users = {n for n, e in accounts.items() if e["admin"]}
    c.JupyterHub.shutdown_on_logout = True  # signing out frees the seat for another window
    # Where: the public address, with TLS if given; the hub's and the proxy's APIs on loopback.
    c.JupyterHub.bind_url = settings["url"]
    c.JupyterHub.ssl_cert, c.JupyterHub.ssl_key = settings["tls_cert"], settings["tls_key"]
    c.JupyterHub.hub_bind_url = _loopback_url()
    c.ConfigurableHTTPProxy.api_url = _loopback_url()
    c.ConfigurableHTTPProxy.command = [settings["proxy"]]
    # Its database, cookie secret, proxy pid file: JupyterHub's defaults, in its working folder hub/
    # What runs (JupyterHub's local spawner, which its exit stops): each learner's own
    # account, this environment, the course in their home.
    c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
    c.Spawner.default_url = f"/lab/tree/{COURSE_DIR}"
    c.Spawner.pre_spawn_hook = copy_the_course
    c.Spawner.environment = {**share.environment(), "BRRR_RESULTS_DIR": f"{workshop.root}/results"}
    c.Spawner.cpu_limit = share.cores_each
    c.Spawner.start_timeout = c.Spawner.http_timeout = START_TIMEOUT_S
