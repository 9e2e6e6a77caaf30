"""A class on a real JupyterHub, end to end: ``brrr workshop`` and headless Chromium.

The first tests check ``brrr workshop``'s arithmetic and refusals without a hub. The
rest start one, as an instructor would (``brrr workshop --learners ... --port ...``, as
root: it makes a system account per learner), in a temporary folder on a fresh loopback
port, and drive headless Chromium (the system one; every request that is not loopback is
blocked) as two learners, a third learner and the instructor:

1. no one gets in without a password, a wrong password is refused, the hub and its
   proxy listen on loopback only;
2. each learner follows chapter 00's link, signs in, lands in their own copy of the
   chapter (in a home only they can open) and runs all of it, while the instructor
   measures this machine in the class view's kernel;
3. a second sign-in of a learner whose server runs is refused, and the first goes on;
4. a third learner cannot read the others' homes, list the reports or open their
   servers, nor the admin page;
5. each learner's ``bl.report()`` lands in the class folder, with the thread count the
   share rule gives (cores // learners, at least 1);
6. a learner's kernel killed while it reports leaves the last whole report;
7. the instructor (the only admin) runs the class view: both learners in the table and
   on the roofline, a file that is not JSON named in a warning;
8. stopping the hub stops every process it started.

Without root, Linux, JupyterHub, its proxy, Chromium or Playwright the hub tests skip
locally and fail in CI (``CI=true``). Where this environment's Python lies behind a
folder other accounts cannot enter (a pyenv Python in /root), the accounts get the
system's Python of the same version with this environment's files hard-linked into a
temporary venv (:func:`_python_every_account_runs`).

Run it alone with ``pytest tests/test_workshop.py``; its times are printed at the end.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import _fakes
import psutil
import pytest
from test_browser import (
    _KERNEL_READY_JS,
    _NOTEBOOK,
    CHROMIUM,
    CHROMIUM_ARGS,
    _run_all_cells,
    _tracebacks,
    _wait_for_run_all,
)

from brrrlib.classroom import load_reports
from brrrlib.cli import main
from brrrlib.cli._workshop import PROXY, Share

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts" / "workshop"
CHAPTER = "brrr-course/00_the_factory.ipynb"
CLASS_VIEW = "brrr-course/instructor/class_results.ipynb"

# Time limits (seconds), generous for a busy 2-core machine: a server starts in a few
# seconds; chapter 00 measures this machine's ceilings (~50 s on one thread, cold).
HUB_START_S = 120
SIGN_IN_S = 180
RUN_ALL_S = 600
CELL_S = 120
STOP_S = 60


# --------------------------------------------------------------- without a hub ---


@pytest.mark.parametrize(
    ("cores", "learners", "threads"), [(16, 20, 1), (2, 3, 1), (64, 20, 3), (8, 1, 8)]
)
def test_each_kernel_gets_the_threads_its_share_of_the_cores_holds(cores, learners, threads):
    share = Share(cores, learners)
    assert share.threads == threads and share.cores_each == pytest.approx(cores / learners)
    assert share.environment()["OMP_NUM_THREADS"] == str(threads)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--ip", "0.0.0.0"], ("--tls-cert", "--behind-tls-proxy")),
        (["--ip", "192.168.1.20", "--tls-cert", "cert.pem"], ("--tls-key",)),
        (["--ip", "room"], ("--ip",)),
        (["--learners", "Ada Lovelace"], ("--learners",)),
        (["--learners", "0"], ("--learners",)),
    ],
)
def test_what_it_cannot_do_as_asked_is_refused_before_anything_starts(
    tmp_path, capsys, args, named
):
    """Beyond loopback without TLS, a half-given certificate, bad names: exit 2, the fix."""
    try:
        code = main(["workshop", "--dir", str(tmp_path / "w"), *args])
    except SystemExit as stop:  # argparse's refusal of a value (--ip room), as for --port
        code = stop.code
    said = capsys.readouterr().err
    assert code == 2
    assert all(option in said for option in named), said
    assert not (tmp_path / "w").exists()  # nothing was made


# -------------------------------------------------------------------- the hub ---


def _missing_prerequisite() -> str | None:
    """Why a hub cannot run here, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "the workshop hub needs Linux and root (it makes an account per learner)"
    if shutil.which("useradd") is None:
        return "useradd is missing (Debian: apt-get install passwd)"
    try:
        importlib.metadata.version("jupyterhub")
        import playwright.sync_api  # noqa: F401
    except (ImportError, importlib.metadata.PackageNotFoundError) as exc:
        return f"{exc}: pip install -e '.[test,workshop]'"
    if _proxy_path() is None:
        return f"{PROXY} is missing: npm install -g --prefix .venv {PROXY}"
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    return None


def _proxy_path() -> str | None:
    here = os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.executable).parent)])
    return shutil.which(PROXY, path=here)


def _require_prerequisites() -> None:
    _fakes.require(_missing_prerequisite(), "the workshop test")


def _runs_as_nobody(python: str) -> bool:
    """Can an account other than root run ``python`` and import the course?"""
    import pwd

    nobody = pwd.getpwnam("nobody")
    try:
        done = subprocess.run(
            [python, "-c", "import brrrlib.cli, jupyterhub, ipykernel"],
            user=nobody.pw_uid,
            group=nobody.pw_gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "HOME": "/"},
            capture_output=True,
            timeout=300,
        )
    except OSError:
        return False
    return done.returncode == 0


def _python_every_account_runs(root: Path) -> tuple[str, float]:
    """A Python with the course that every account can run, and the seconds it took to get.

    This environment's, if other accounts can run it. Else (a pyenv Python in /root)
    a venv from the system's Python of the same version, holding this environment's
    packages, data and config as hard links and a copy of the course's source: the
    same files a kernel here imports, under folders every account can enter. On
    another file system than this environment it installs them instead, as
    course/INSTRUCTORS.md tells an instructor to (minutes on a busy machine).
    """
    started = time.monotonic()
    if _runs_as_nobody(sys.executable):
        return sys.executable, 0.0
    minor = f"python{sys.version_info.major}.{sys.version_info.minor}"
    bases = [shutil.which(n, path="/usr/bin:/usr/local/bin") for n in (minor, "python3")]
    base = next((b for b in bases if b and _is_world_runnable(b)), None)
    if base is None:
        pytest.fail(
            f"no {minor} outside a private folder to make the learners' environment from "
            f"({sys.executable} lies behind one): install {minor} from the system's packages",
            pytrace=False,
        )
    env, source = root / "env", root / "source"
    not_source = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
    ignore = shutil.ignore_patterns(*not_source, "_build", "test-artifacts")
    shutil.copytree(REPO, source, ignore=ignore)
    source.chmod(0o755)  # the clone's own folder may be private (mktemp -d)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True)
    try:
        _link_environment(env, source)
    except OSError:  # another file system: no hard links across it
        shutil.rmtree(env)
        torch = importlib.metadata.version("torch").split("+")[0]
        pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
        for cmd in (
            [base, "-m", "venv", str(env)],
            [*pip, f"torch=={torch}"],
            [*pip, f"{source}[workshop]"],  # pip builds in place: a copy, not the clone
        ):
            done = subprocess.run(cmd, capture_output=True, text=True)
            assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}"
    python = str(env / "bin" / "python")
    assert _runs_as_nobody(python), f"{python} was made, yet other accounts cannot run it"
    return python, time.monotonic() - started


def _link_environment(env: Path, source: Path) -> None:
    """This environment's packages, data and config hard-linked into ``env``; the course
    from ``source`` (a plain folder on the path, as in a clone)."""
    here, site = Path(sys.prefix), Path(sysconfig.get_path("purelib"))
    editable = shutil.ignore_patterns("__editable__*", "brrrlib-*.dist-info")
    for part in (site.relative_to(here), Path("share"), Path("etc")):
        if (here / part).is_dir():
            shutil.copytree(
                here / part, env / part, copy_function=os.link, ignore=editable, dirs_exist_ok=True
            )
    (env / site.relative_to(here) / "brrr-course-source.pth").write_text(f"{source}\n")


def _is_world_runnable(path: str) -> bool:
    real = Path(os.path.realpath(path))
    folders = [*real.parents]
    return all(f.stat().st_mode & 0o001 for f in folders) and real.stat().st_mode & 0o001 != 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Hub:
    """A running ``brrr workshop``: where it is, its accounts, what it started."""

    url: str
    root: Path
    proc: subprocess.Popen
    log: Path
    passwords: dict[str, str]
    learners: tuple[str, str, str]
    instructor: str
    python: str  # the Python brrr workshop runs with
    seen: dict[int, float] = field(default_factory=dict)  # pid -> create time
    times: dict[str, float] = field(default_factory=dict)
    pages: dict[str, object] = field(default_factory=dict)  # each account's browser page
    cells: dict[str, object] = field(default_factory=dict)  # cells still running

    @property
    def results(self) -> Path:
        return self.root / "results"

    def home(self, name: str) -> Path:
        return self.root / "home" / name

    def uid(self, name: str) -> int:
        import pwd

        return pwd.getpwnam(name).pw_uid

    def has_account(self, name: str) -> bool:
        import pwd

        return name in {entry.pw_name for entry in pwd.getpwall()}

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def note_processes(self) -> None:
        """Remember every process the hub started so far (the stop test checks them)."""
        try:
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self.seen.setdefault(child.pid, child.create_time())
        except psutil.NoSuchProcess:
            pass

    def still_running(self, accounts) -> list[psutil.Process]:
        """What the hub started, or runs as ``accounts``, and has not ended (a zombie has:
        it only waits for its parent to read its exit status)."""
        found = {p.pid: p for name in accounts for p in self.processes_of(name)}
        for pid, created in self.seen.items():
            try:
                process = psutil.Process(pid)
                if process.create_time() == created:
                    process.info = {"cmdline": process.cmdline()}
                    found[pid] = process
            except psutil.Error:  # gone, or a zombie whose command line is gone with it
                continue
        return [p for p in found.values() if _running(p)]

    def processes_of(self, name: str) -> list[psutil.Process]:
        """The processes running as ``name``'s account, each with its command line."""
        uid = self.uid(name)
        return [
            p
            for p in psutil.process_iter(["uids", "cmdline"])
            if p.info["uids"] and p.info["uids"].real == uid
        ]


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _launch(tmp: Path, python: str) -> Hub:
    """Start ``brrr workshop`` for fresh accounts on a fresh port (not yet waited for)."""
    tag = secrets.token_hex(2)  # fresh account names: never an account that exists
    learners = (f"ada{tag}", f"bob{tag}", f"cy{tag}")
    instructor = f"teach{tag}"
    port = _free_port()
    log = tmp / "hub.log"
    env = {
        **os.environ,
        "PATH": os.pathsep.join([os.environ["PATH"], str(Path(_proxy_path()).parent)]),
    }
    cmd = [python, "-m", "brrrlib", "workshop", "--dir", str(tmp / "workshop")]
    cmd += ["--learners", ",".join(learners), "--instructor", instructor, "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    return Hub(url, tmp / "workshop", proc, log, {}, learners, instructor, python)


def _wait_until_up(hub: Hub) -> None:
    """Wait until the hub answers through its proxy; read the cards it wrote."""
    started = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(f"{hub.url}/hub/api/", timeout=5) as resp:
                json.loads(resp.read())  # {"version": ...}
            break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            assert hub.proc.poll() is None, f"brrr workshop exited:\n{hub.log_tail()}"
            assert time.monotonic() - started < HUB_START_S, f"no hub:\n{hub.log_tail()}"
            time.sleep(0.3)
    hub.times["hub start"] = time.monotonic() - started
    for line in (hub.root / "hub" / "cards.txt").read_text().splitlines():
        name, password = line.split("\t")[:2]
        hub.passwords[name] = password


def _stop(hub: Hub) -> None:
    """SIGTERM to the hub (as Ctrl-C): it stops every server and the proxy, then exits."""
    if hub.proc.poll() is None:
        hub.proc.send_signal(signal.SIGTERM)
        try:
            hub.proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            hub.proc.kill()
            hub.proc.wait()


@pytest.fixture(scope="module")
def hub():
    """``brrr workshop`` for three learners and an instructor, in a temporary folder."""
    _require_prerequisites()
    tmp = Path(tempfile.mkdtemp(prefix="brrr-workshop-", dir="/tmp"))
    tmp.chmod(0o755)  # the learners' homes lie inside: their accounts pass through
    running = None
    try:
        python, built_s = _python_every_account_runs(tmp)
        running = _launch(tmp, python)
        _wait_until_up(running)
        running.times["learners' environment built"] = built_s
        yield running
    finally:
        if running is not None:
            _clean_up(running)
        shutil.rmtree(tmp, ignore_errors=True)


def _clean_up(hub: Hub) -> None:
    """Stop the hub; end what it left (only when a test failed); remove its accounts."""
    _stop(hub)
    accounts = [n for n in (*hub.learners, hub.instructor) if hub.has_account(n)]
    left = hub.still_running(accounts)
    for process in left:
        process.kill()
    psutil.wait_procs(left, timeout=10)
    end = [hub.python, "-m", "brrrlib", "workshop", "--dir", str(hub.root), "--end"]
    subprocess.run(end, capture_output=True, check=False)


@pytest.fixture(scope="module")
def browser(hub):
    """Headless system Chromium that can reach loopback only."""
    from playwright.sync_api import sync_playwright

    def only_loopback(route):
        host = urllib.parse.urlsplit(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_ARGS)
        )

        def new_page():
            context = chromium.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", only_loopback)
            return context.new_page()

        yield new_page
        chromium.close()


# ------------------------------------------------------------------- helpers ---


def _sign_in(page, hub: Hub, name: str, password: str) -> object:
    """Fill the hub's login form as a learner would; returns the form's response."""
    if not page.url.startswith(f"{hub.url}/hub/login"):
        page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    with page.expect_navigation() as answer:
        page.click("#login_submit")
    return answer.value


def _follow_link(page, hub: Hub, name: str, path: str) -> None:
    """Follow a chapter's link and sign in; the hub starts the server meanwhile."""
    page.goto(f"{hub.url}/hub/user-redirect/lab/tree/{path}")
    assert "/hub/login" in page.url, f"the link did not ask {name} to sign in: {page.url}"
    _sign_in(page, hub, name, hub.passwords[name])


def _wait_for_notebook(page, hub: Hub, name: str, path: str) -> None:
    """Wait until the linked notebook is open in ``name``'s own lab with an idle kernel."""
    page.wait_for_selector(f"{_NOTEBOOK} .jp-Cell", timeout=SIGN_IN_S * 1000)
    page.wait_for_function(_KERNEL_READY_JS, timeout=SIGN_IN_S * 1000)
    assert f"/user/{name}/lab/tree/{path}" in page.url, page.url
    hub.note_processes()


def _open_through_link(page, hub: Hub, name: str, path: str) -> float:
    """Follow a link, sign in, wait for the notebook and an idle kernel; returns the seconds."""
    started = time.monotonic()
    _follow_link(page, hub, name, path)
    _wait_for_notebook(page, hub, name, path)
    return time.monotonic() - started


def _add_cell(page, code: str):
    """Add a code cell at the end of the open notebook, as a learner would, and run it."""
    cells = page.locator(f"{_NOTEBOOK} .jp-Cell")
    n = cells.count()
    cells.nth(n - 1).click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new cell below
    cell = page.locator(f"{_NOTEBOOK} .jp-Cell").nth(n)
    cell.locator(".cm-content").click()
    page.keyboard.insert_text(code)
    page.keyboard.press("Shift+Enter")
    return cell


def _output(page, cell, timeout_s: float = CELL_S) -> str:
    """Wait until ``cell`` ran (its prompt shows a count); its output's text."""
    deadline = time.monotonic() + timeout_s
    while not re.fullmatch(r"\[\d+\]:", cell.locator(".jp-InputArea-prompt").inner_text().strip()):
        assert time.monotonic() < deadline, f"a cell still runs after {timeout_s:.0f} s"
        page.wait_for_timeout(250)
    return cell.locator(".jp-OutputArea").inner_text()


def _shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def _login_error(page) -> str:
    found = page.locator(".login_error")
    return found.inner_text().strip() if found.count() else ""


def _server_pid(hub: Hub, name: str) -> int | None:
    """The pid of ``name``'s single-user server, if one runs."""
    for p in hub.processes_of(name):
        if "jupyterhub.singleuser" in (p.info["cmdline"] or ()):
            return p.pid
    return None


# ----------------------------------------------------------------- the class ---


def test_no_one_gets_in_without_a_password_and_the_hub_is_on_loopback(hub, browser):
    ada = hub.learners[0]
    # The hub and its proxy listen on loopback alone (its own API, the proxy's API too).
    hub.note_processes()
    listening = [
        c.laddr.ip
        for pid in (hub.proc.pid, *hub.seen)
        if psutil.pid_exists(pid)
        for c in psutil.Process(pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert len(listening) >= 3 and set(listening) == {"127.0.0.1"}, listening
    # No session: a learner's lab sends to the login page, the REST API refuses.
    page = browser()
    page.goto(f"{hub.url}/user/{ada}/lab")
    assert urllib.parse.urlsplit(page.url).path == "/hub/login", page.url
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{hub.url}/hub/api/users", timeout=10)
    assert refused.value.code == 403
    # A wrong password: the login page again, with an error, and no server started.
    answer = _sign_in(page, hub, ada, hub.passwords[ada] + "x")
    assert answer.status == 403 and _login_error(page), page.url
    page.goto(f"{hub.url}/hub/home")
    assert urllib.parse.urlsplit(page.url).path == "/hub/login"
    assert _server_pid(hub, ada) is None
    page.context.close()


def test_the_class_follows_links_into_their_own_copies(hub, browser):
    ada, bob, _ = hub.learners
    teach = hub.instructor
    started = time.monotonic()
    links = {ada: CHAPTER, bob: CHAPTER, teach: CLASS_VIEW}
    for name, path in links.items():  # everyone signs in at once, as a class does
        hub.pages[name] = browser()
        _follow_link(hub.pages[name], hub, name, path)
    for name in (ada, bob):  # the learners run chapter 00, each on their share of the cores
        _wait_for_notebook(hub.pages[name], hub, name, CHAPTER)
        hub.times[f"{name}: link to an idle kernel"] = time.monotonic() - started
        hub.times[f"{name}: run all started"] = time.monotonic()
        _run_all_cells(hub.pages[name])
    # Meanwhile the instructor measures this machine in the class view's kernel (its
    # "this machine" row), which chapter 00 would do before a class (INSTRUCTORS.md).
    _wait_for_notebook(hub.pages[teach], hub, teach, CLASS_VIEW)
    hub.times["instructor: measuring started"] = time.monotonic()
    hub.cells["instructor's measuring"] = _add_cell(
        hub.pages[teach], "import brrrlib as bl\nbl.measure_ceilings(progress=False);"
    )
    for name, path in links.items():
        copy = hub.home(name) / path
        assert copy.is_file() and copy.stat().st_uid == hub.uid(name)
        assert hub.home(name).stat().st_mode & 0o777 == 0o700


def test_a_second_sign_in_of_a_learner_is_refused_while_the_first_runs(hub, browser):
    bob = hub.learners[1]
    server = _server_pid(hub, bob)
    assert server is not None
    page = browser()
    answer = _sign_in(page, hub, bob, hub.passwords[bob])
    assert answer.status == 409 and _login_error(page), page.url
    assert urllib.parse.urlsplit(page.url).path == "/hub/login"
    assert _server_pid(hub, bob) == server  # the first window's server runs on
    page.context.close()


_PROBE = """
import os
for path in {paths!r}:
    try:
        os.listdir(path) if os.path.isdir(path) else open(path).read(1)
        print("READ", path)
    except PermissionError:
        print("DENIED", path)
"""


def test_a_third_learner_cannot_read_the_others_files_or_reach_their_servers(hub, browser):
    ada, bob, cy = hub.learners
    import nbformat

    paths = [str(hub.home(ada)), str(hub.home(bob) / CHAPTER), str(hub.results)]
    probe = hub.home(cy) / "probe.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(_PROBE.format(paths=paths))]
    nbformat.write(nb, probe)
    os.chown(probe, hub.uid(cy), hub.uid(cy))
    page = browser()
    _open_through_link(page, hub, cy, "probe.ipynb")
    _run_all_cells(page)
    state = _wait_for_run_all(page, CELL_S)
    assert not _tracebacks(state), _tracebacks(state)
    said = page.locator(f"{_NOTEBOOK} .jp-OutputArea").first.inner_text().split()
    assert said.count("DENIED") == 3 and "READ" not in said, said
    # Nor another learner's server, nor the admin page.
    assert page.goto(f"{hub.url}/user/{ada}/lab").status == 403
    assert page.goto(f"{hub.url}/hub/admin").status == 403
    page.context.close()


def test_each_learner_reports_their_share_into_the_class_folder(hub):
    threads = max(1, len(os.sched_getaffinity(hub.proc.pid)) // len(hub.learners))
    for name in hub.learners[:2]:
        page = hub.pages[name]
        state = _wait_for_run_all(page, RUN_ALL_S)
        hub.times[f"{name}: chapter 00, run all"] = time.monotonic() - hub.times.pop(
            f"{name}: run all started"
        )
        _shot(page, f"{name}-chapter-00")
        assert not _tracebacks(state), f"{name}: chapter 00 failed:\n{_tracebacks(state)}"
        said = _output(page, _add_cell(page, "print(bl.report())"))
        path = Path(said.strip().splitlines()[-1])  # above it, any measuring's progress
        assert path.parent == hub.results and path.stat().st_uid == hub.uid(name), said
        data = json.loads(path.read_text())
        assert data["name"] == name and data["ceilings"]["num_threads"] == threads
    hub.note_processes()


def test_a_kernel_killed_mid_report_leaves_the_last_whole_report(hub):
    ada = hub.learners[0]
    page = hub.pages[ada]
    # Report over and over, so that the kill lands inside a report.
    _add_cell(page, "i = 0\nwhile True:\n    bl.report(chapter=0, extra={'i': i})\n    i += 1")
    page.wait_for_timeout(2000)
    kernels = [
        p for p in hub.processes_of(ada) if "ipykernel_launcher" in " ".join(p.info["cmdline"])
    ]
    assert len(kernels) == 1, kernels
    kernels[0].send_signal(signal.SIGKILL)
    page.wait_for_selector(".jp-Dialog", timeout=60_000)  # JupyterLab says the kernel died
    _shot(page, f"{ada}-kernel-killed")
    (mine,) = [r for r in load_reports(hub.results) if r.name == ada]
    assert mine.chapters["00"]["i"] >= 0  # a whole report, from one of the loop's rounds
    assert len(list(hub.results.glob(f"{ada}-*.json"))) == 1
    page.keyboard.press("Escape")
    page.wait_for_function(_KERNEL_READY_JS, timeout=CELL_S * 1000)  # restarted, ready again


def test_the_instructor_sees_both_learners_on_one_roofline(hub):
    ada, bob, cy = hub.learners
    # A bad upload: a file that is not JSON, written by a learner.
    junk = hub.results / "junk.json"
    junk.write_text("this is not a report")
    os.chown(junk, hub.uid(cy), hub.uid(cy))
    page = hub.pages[hub.instructor]
    _output(page, hub.cells["instructor's measuring"], RUN_ALL_S)
    hub.times["instructor: measuring"] = time.monotonic() - hub.times.pop(
        "instructor: measuring started"
    )
    started = time.monotonic()
    _run_all_cells(page)
    state = _wait_for_run_all(page, RUN_ALL_S)
    hub.times["class view: run all"] = time.monotonic() - started
    _shot(page, "class-view")
    assert not _tracebacks(state), _tracebacks(state)
    assert any("junk.json" in text for text in state["stderr"]), state["stderr"]  # named
    tables = page.locator(f"{_NOTEBOOK} .jp-RenderedHTMLCommon table").all_inner_texts()
    assert any(ada in table and bob in table for table in tables), tables
    drawn = "import json\nax = plot_reports(reports)\n"
    drawn += "print(json.dumps(sorted({line.get_label() for line in ax.get_lines()})))"
    labels = json.loads(_output(page, _add_cell(page, drawn)).strip())
    assert any(ada in label for label in labels) and any(bob in label for label in labels)
    assert page.context.new_page().goto(f"{hub.url}/hub/admin").status == 200  # admin alone
    hub.note_processes()


def test_stopping_the_hub_stops_every_process_it_started(hub, capsys):
    hub.note_processes()
    started = time.monotonic()
    _stop(hub)
    hub.times["stop"] = time.monotonic() - started
    assert hub.proc.returncode == 0, hub.log_tail()
    left = hub.still_running((*hub.learners, hub.instructor))
    assert not left, [(p.pid, p.info) for p in left]
    assert len(hub.seen) >= 8  # the proxy, four servers and their kernels were all seen
    with capsys.disabled():
        print("\n[workshop] times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in hub.times.items()))
