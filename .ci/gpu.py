"""The course on a GPU in three commands: bundle here, run there, unpack here.

    python .ci/gpu.py bundle                  # here, with the package index
    python3 .ci/gpu.py run --out OUT          # on the GPU machine, from the repository root
    python .ci/gpu.py unpack OUT              # here again: OUT -> brrrlib/recordings/<gpu>-<date>/

``bundle`` puts what the GPU machine lacks into ``.gpu-bundle/`` (ignored by git, so it
travels only when named): the wheels of the notebook executor, nbval and the widgets for
the GPU machine's Python (3.12 by default), resolved together, and ``source.json``, the
commit being recorded. The GPU machine has torch, numpy, matplotlib, pytest and triton.

``run`` installs from that folder with no network, then works through the steps below in
one pass within ``--budget-s`` (default 480 s), each in its own process with its own
time limit, so one that fails or hangs costs only itself. Every log, the executed
notebooks, traces, reports and sweeps go into ``OUT/recording.tar.gz``; the one-screen
summary is printed and written to ``OUT/summary.txt`` (with ``OUT/summary.json``).

=========== =============================================================================
environment the device, driver, CUDA, torch, Python, CPU cores; the commit (source.json)
install     the bundle's wheels (pip, --no-index), then the course itself (editable)
doctor      ``brrr doctor``: versions, torch.compile, the ceilings (measured, cached
            for the steps after it)
gpu-tests   ``pytest -m gpu``: the library's CUDA paths
chapters    every chapter and the class-results notebook, top to bottom, through the
            site's executor (``docs/build.py``); cells that raised, and output that
            breaks the course's rules (``conftest.output_problems``), per chapter
benchmarks  ``benchmarks/timer_agreement.py``, ``ceilings.py`` (each ceiling against a
            same-run reference and the sheet's peak), ``decode_roofline.py`` (compiled)
record      traces (``bl.profile``), a ``bl.report()`` file, the matmul and repeat
            sweeps (``.ci/gpu_record.py``)
tests       the library's tests (``tests/``, not the browser, site or install ones), in
            whatever time is left
=========== =============================================================================

``--device cpu`` is the dry run: every step on this machine's CPU (the install step is
skipped unless ``--bundle`` names one), as CI would see it. ``--quick`` is its fast path
for the test suite: the class-results notebook only, the small traces, no sweeps.

``unpack`` reads ``OUT`` (the folder the three files came back to) and writes
``brrrlib/recordings/<gpu>-<date>/``: ``notebooks/`` (the chapters that ran without a
cell raising, machine paths replaced, with ``run.json``), ``traces/``, ``reports/``,
``sweeps/`` and a README of what ran, with the summary. The site shows a recording's
``notebooks/``; those of an older recording of the same GPU are retired (removed: git
keeps them), so the site shows the newest beside each chapter.

Only the standard library is used here: ``run`` starts before anything is installed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / ".gpu-bundle"
RECORDINGS = ROOT / "brrrlib" / "recordings"
#: What the notebooks, the GPU tests and the executor need that the GPU machine's image
#: lacks (it has torch, numpy, matplotlib, psutil, pytest, triton): resolved together,
#: with everything they depend on, so pip on the GPU machine never looks for more.
WANTED = (
    "ipykernel",
    "nbclient",
    "nbformat",
    "nbval",
    "ipywidgets>=8",
    "platformdirs>=3",
    "psutil>=5.9",
    "setuptools>=77",  # the course's build backend, for its editable install
    "tqdm>=4.66",  # progress of long measurements
)
#: What the bundle leaves out on purpose (the chapters run headless, through nbclient):
#: ``brrr doctor``'s FAIL for it alone does not fail the doctor step.
NOT_BUNDLED = ("jupyterlab",)
#: The wheels may together take this much: the working tree travels in 64 MiB, project
#: (about 5 MiB) included.
BUNDLE_LIMIT_BYTES = 48 * 2**20
#: The most seconds each step may take, in the order they run (each also gets no more than
#: what is left of the budget).
STEP_LIMITS_S = {
    "environment": 30,
    "install": 120,
    "doctor": 150,
    "gpu-tests": 120,
    "chapters": 420,
    "benchmarks": 240,
    "record": 150,
    "tests": 600,
}
STEPS = tuple(STEP_LIMITS_S)
PACK_RESERVE_S = 30  # kept back for a stopped step's grace, packing and the summary
STOP_GRACE_S = 10  # a step out of time gets Ctrl-C, then this long before it is killed
CHAPTERS_CPU_QUICK = ("instructor/class_results",)


# --------------------------------------------------------------------------- bundle


def bundle(python_version: str, dest: Path = BUNDLE) -> int:
    """Download the wheels the GPU machine lacks into ``dest/wheels``; write ``source.json``."""
    wheels = dest / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)  # one Python's wheels, one version of each
    wheels.mkdir(parents=True)
    platforms = [f"manylinux_2_{n}_x86_64" for n in (17, 27, 28, 34)]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "-d",
        str(wheels),
        *(arg for p in ("manylinux2014_x86_64", *platforms) for arg in ("--platform", p)),
        *WANTED,
    ]
    print("+ " + " ".join(cmd), flush=True)
    status = subprocess.call(cmd)
    if status != 0:
        return status
    _drop_duplicates(wheels)
    size = sum(p.stat().st_size for p in wheels.glob("*.whl"))
    (dest / "source.json").write_text(json.dumps(_source(), indent=1) + "\n")
    print(f"{len(list(wheels.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB in {wheels}")
    if size > BUNDLE_LIMIT_BYTES:
        print(f"the wheels exceed {BUNDLE_LIMIT_BYTES >> 20} MiB: trim WANTED", file=sys.stderr)
        return 1
    _exclude_from_git(dest)
    return 0


def _drop_duplicates(wheels: Path) -> None:
    """Keep one version of each project (the newest downloaded): two stop the whole install."""
    seen: dict[str, Path] = {}
    for whl in sorted(wheels.glob("*.whl"), key=lambda p: p.stat().st_mtime):
        name = re.sub(r"[-_.]+", "-", whl.name.split("-")[0]).lower()
        if name in seen:
            seen[name].unlink()
        seen[name] = whl


def _source() -> dict:
    """The commit the run records, and whether the working tree differed from it."""

    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain")),
    }


def _exclude_from_git(dest: Path) -> None:
    exclude = ROOT / ".git" / "info" / "exclude"
    if not dest.is_relative_to(ROOT):
        return
    line = f"/{dest.relative_to(ROOT)}/"
    if exclude.parent.is_dir() and line not in exclude.read_text().splitlines():
        with exclude.open("a") as f:
            f.write(line + "\n")


# --------------------------------------------------------------------------- run


class Run:
    """One pass over the steps: a work folder, a deadline, and what each step found."""

    def __init__(self, out: Path, device: str, budget_s: float, quick: bool, bundle_dir):
        self.out, self.device, self.quick, self.bundle = out, device, quick, bundle_dir
        self.only_chapters: list[str] = list(CHAPTERS_CPU_QUICK) if quick else []
        self.only_benchmarks: list[str] = []  # only these benchmarks (a second pass's); [] = all
        self.start = time.monotonic()
        self.deadline = self.start + budget_s
        self.work = Path(tempfile.mkdtemp(prefix="brrr-gpu-run-"))
        self.logs = self.work / "logs"
        self.logs.mkdir()
        self.results: dict[str, dict] = {}
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", MPLBACKEND="Agg")
        # The ceilings: measured by the doctor step into a fresh cache, read by the steps
        # after it; a BRRR_CACHE_DIR already set (a dry run's, the test suite's) is kept.
        self.env.setdefault("BRRR_CACHE_DIR", str(self.work / "cache"))
        if device == "cpu":
            self.env["BRRR_DEVICE"] = "cpu"

    def left_s(self) -> float:
        return self.deadline - time.monotonic() - PACK_RESERVE_S

    def sh(self, name: str, cmd: list[str], limit_s: float, cwd: Path = ROOT) -> tuple[int, float]:
        """Run ``cmd`` with its output in ``logs/<name>.log``; (exit status, seconds). 124: timed out."""
        t0 = time.monotonic()
        log = self.logs / f"{name}.log"
        with log.open("a") as f:
            f.write(f"+ {' '.join(cmd)}  (limit {limit_s:.0f} s)\n")
            f.flush()
            proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                env=self.env,
                stdout=f,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                status = proc.wait(timeout=max(limit_s, 1))
            except subprocess.TimeoutExpired:
                # Ctrl-C first: pytest then still writes its summary and its junit XML
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # and whatever it started (kernels)
                except ProcessLookupError:
                    pass  # the whole group had already gone
                proc.wait()
                status = 124
                f.write(f"\n[stopped after {limit_s:.0f} s]\n")
        return status, time.monotonic() - t0

    def step(self, name: str, fn) -> None:
        limit_s = min(STEP_LIMITS_S[name], self.left_s())
        if limit_s < 5:
            self.results[name] = {"status": "skipped", "seconds": 0, "detail": "no time left"}
            return
        t0 = time.monotonic()
        print(f"[{t0 - self.start:5.0f} s] {name} (limit {limit_s:.0f} s)", flush=True)
        try:
            result = fn(limit_s) or {}
        except Exception as exc:  # a step's own bug must not cost the others
            result = {"status": "failed", "detail": f"{type(exc).__name__}: {exc}"}
        result.setdefault("status", "ok")
        result["seconds"] = round(time.monotonic() - t0, 1)
        self.results[name] = result

    # ----------------------------------------------------------------- the steps

    def environment(self, limit_s: float) -> dict:
        code = (  # brrrlib.machine needs torch alone: it runs before the install step
            "import json, os, platform, torch\n"
            "from brrrlib import machine\n"
            "dev = machine.device()\n"
            "d = {'python': platform.python_version(), 'torch': torch.__version__,\n"
            "     'cuda': torch.version.cuda, 'cpu_cores': os.cpu_count(),\n"
            "     'kind': dev.type, 'device': machine.device_name(dev)}\n"
            "if dev.type == 'cuda':\n"
            "    p = torch.cuda.get_device_properties(dev)\n"
            "    d['props'] = {k: getattr(p, k) for k in dir(p) if not k.startswith('_')\n"
            "                  and isinstance(getattr(p, k, None), (int, float, str))}\n"
            "print(json.dumps(d))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=limit_s,
        )
        (self.logs / "environment.log").write_text(proc.stdout + proc.stderr)
        facts = json.loads(proc.stdout.strip().splitlines()[-1])
        facts.update(_nvidia_smi())
        source = self.bundle / "source.json" if self.bundle else None
        facts.update(json.loads(source.read_text()) if source and source.is_file() else _source())
        facts["date"] = datetime.date.today().isoformat()
        facts["root"] = str(ROOT)  # the checkout's path there, which unpack takes out again
        facts["platform"] = platform.platform()
        (self.work / "environment.json").write_text(json.dumps(facts, indent=1) + "\n")
        self.facts = facts
        return {"detail": f"{facts['device']}, torch {facts['torch']}"}

    def install(self, limit_s: float) -> dict:
        wheels = self.bundle / "wheels" if self.bundle else None
        if wheels is None or not wheels.is_dir():
            return {"status": "skipped", "detail": f"no {wheels}: using this environment"}
        pip = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(wheels),
            "--no-cache-dir",
        ]
        names = [w.split(">")[0].split("=")[0] for w in WANTED if not w.startswith("setuptools")]
        status, _ = self.sh("install", [*pip, *names], limit_s)
        if status != 0:  # an environment pip may not change: beside it, on PYTHONPATH
            target = self.work / "site"
            status, _ = self.sh("install", [*pip, "--target", str(target), *names], self.left_s())
            paths = [str(target), str(ROOT), self.env.get("PYTHONPATH", "")]
            self.env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
            return {"status": _status(status), "detail": f"pip --target exit {status}"}
        if status == 0:
            status, _ = self.sh("install", [*pip, "--no-deps", "-e", str(ROOT)], self.left_s())
        return {"status": "ok" if status == 0 else "failed", "detail": f"pip exit {status}"}

    def doctor(self, limit_s: float) -> dict:
        args = ["--quick"] if self.quick else []
        status, _ = self.sh("doctor", [sys.executable, "-m", "brrrlib", "doctor", *args], limit_s)
        return doctor_verdict(status, (self.logs / "doctor.log").read_text(errors="replace"))

    def gpu_tests(self, limit_s: float) -> dict:
        return self._pytest("gpu-tests", ["-m", "gpu", "tests"], limit_s)

    def tests(self, limit_s: float) -> dict:
        skip = ("test_browser.py", "test_site.py", "test_install.py")
        # one at a time: timing tests that shared the device would measure each other
        args = ["-m", "not gpu and not browser", "tests", *(f"--ignore=tests/{s}" for s in skip)]
        return self._pytest("tests", args, limit_s)

    def _pytest(self, name: str, args: list[str], limit_s: float) -> dict:
        xml = self.work / f"{name}.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            f"--junitxml={xml}",
            "-o",
            "addopts=",
            *args,
        ]
        status, _ = self.sh(name, cmd, limit_s)
        counts, failed_tests = _junit_counts(xml)
        detail = ", ".join(f"{v} {k}" for k, v in counts.items())
        if status == 124:
            detail += " (stopped: out of time)"
        bad = counts.get("failed", 0) + counts.get("errors", 0)
        return {
            "status": "failed" if bad or status not in (0, 5, 124) else _status(status),
            "detail": detail or f"exit {status}",
            "counts": counts,
            "failed_tests": failed_tests,
        }

    def chapters(self, limit_s: float) -> dict:
        source = self.work / "chapters"
        cmd = [sys.executable, str(Path(__file__)), "_execute", str(source), *self.only_chapters]
        status, _ = self.sh("chapters", cmd, limit_s)
        found = self.work / "chapters.json"
        per = json.loads(found.read_text()) if found.is_file() else {}
        bad = [k for k, v in per.items() if v["errors"] or v["rule_breaks"]]
        detail = "; ".join(f"{k} {v['seconds']:.0f} s" for k, v in per.items())
        if status == 124:
            detail += "; stopped: out of time"
        failed = bad or status != 0
        return {"status": "failed" if failed else "ok", "detail": detail, "chapters": per}

    def benchmarks(self, limit_s: float) -> dict:
        end = time.monotonic() + limit_s
        scripts = {  # script: (its arguments, the most seconds it may take)
            "timer_agreement": (["--rounds", "1" if self.quick else "3"], 90),
            "ceilings": (["--json", str(self.work / "ceilings.json")], 150),
            "decode_roofline": (["--json", str(self.work / "decode.json")], 150),
        }
        if self.only_benchmarks:
            scripts = {k: v for k, v in scripts.items() if k in self.only_benchmarks}
        done = {}
        for script, (args, most_s) in scripts.items():
            cmd = [sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), *args]
            status, seconds = self.sh(f"bench-{script}", cmd, min(most_s, end - time.monotonic()))
            done[script] = (_status(status), seconds)
        return {
            "status": "ok" if all(s == "ok" for s, _ in done.values()) else "failed",
            "detail": "; ".join(f"{k} {s} {t:.0f} s" for k, (s, t) in done.items()),
        }

    def record(self, limit_s: float) -> dict:
        cmd = [sys.executable, str(ROOT / ".ci" / "gpu_record.py"), str(self.work / "recorded")]
        cmd += ["--budget-s", f"{limit_s - 10:.0f}"]
        if self.quick:
            cmd.append("--quick")
        status, _ = self.sh("record", cmd, limit_s)
        made = sorted(p.name for p in (self.work / "recorded").rglob("*.json"))
        return {"status": _status(status), "detail": f"{len(made)} files"}

    # ----------------------------------------------------------------- the end

    def pack(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        summary = {
            "environment": getattr(self, "facts", {}),
            "steps": self.results,
            "ceilings": _read_json(self.work / "ceilings.json"),
            "decode": _read_json(self.work / "decode.json"),
            "seconds": round(time.monotonic() - self.start, 1),
        }
        (self.work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        text = render_summary(summary)
        (self.work / "summary.txt").write_text(text)
        with tarfile.open(self.out / "recording.tar.gz", "w:gz") as tar:
            for name in (
                "environment.json",
                "summary.json",
                "summary.txt",
                "logs",
                "chapters",
                "recorded",
                "chapters.json",
                "ceilings.json",
                "decode.json",
            ):
                if (self.work / name).exists():
                    tar.add(self.work / name, arcname=name, filter=_no_clutter)
        shutil.copy2(self.work / "summary.json", self.out / "summary.json")
        shutil.copy2(self.work / "summary.txt", self.out / "summary.txt")
        return summary


def _no_clutter(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    parts = Path(info.name).parts
    skip = {"__pycache__", ".ipynb_checkpoints", "recordings", "_build"}
    return None if skip & set(parts) else info


def _status(code: int) -> str:
    return "ok" if code == 0 else "timeout" if code == 124 else "failed"


def _read_json(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def _junit_counts(xml: Path) -> tuple[dict[str, int], list[str]]:
    """passed / failed / errors / skipped from pytest's junit XML, and the failed tests' names."""
    if not xml.is_file():
        return {}, []
    root = ET.parse(xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    failed = [
        f"{c.get('classname')}::{c.get('name')}"
        for c in suite.iter("testcase")
        if c.find("failure") is not None or c.find("error") is not None
    ]
    counts = {
        "passed": passed,
        "failed": n["failures"],
        "errors": n["errors"],
        "skipped": n["skipped"],
    }
    return counts, failed


def _nvidia_smi() -> dict:
    """Driver, clocks and memory as nvidia-smi reports them (nothing without one)."""
    fields = ("name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.memory")
    try:
        out = (
            subprocess.run(
                ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            .stdout.strip()
            .splitlines()
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if not out:
        return {}
    values = [v.strip() for v in out[0].split(",")]
    keys = ("smi_name", "driver", "memory_mib", "max_sm_mhz", "max_memory_mhz")
    return dict(zip(keys, values, strict=False))


def run(opts: argparse.Namespace) -> int:
    """Every step within the budget, then the pack and the summary; 0 if all passed."""
    bundle_dir = Path(opts.bundle) if opts.bundle else (BUNDLE if opts.device == "cuda" else None)
    r = Run(Path(opts.out).resolve(), opts.device, opts.budget_s, opts.quick, bundle_dir)
    if opts.chapters:
        r.only_chapters = opts.chapters.split(",")
    if opts.benchmarks:
        r.only_benchmarks = opts.benchmarks.split(",")
    wanted = opts.steps.split(",") if opts.steps else list(STEPS)
    unknown = set(wanted) - set(STEPS)
    if unknown:
        raise SystemExit(f"--steps: unknown {sorted(unknown)}; the steps are {', '.join(STEPS)}")
    if "environment" not in wanted:
        wanted.insert(0, "environment")
    for name in STEPS:
        if name in wanted:
            r.step(name, getattr(r, name.replace("-", "_")))
            r.pack()  # after every step: a run stopped from outside still sends back its work
    print(render_summary(r.pack()), end="")
    shutil.rmtree(r.work, ignore_errors=True)
    return 0 if all(s["status"] in ("ok", "skipped") for s in r.results.values()) else 1


def doctor_verdict(status: int, log: str) -> dict:
    """``brrr doctor``'s exit and FAIL lines -> the step's result.

    A FAIL for a package the bundle leaves out on purpose (``NOT_BUNDLED``) alone does not
    fail the step; any other FAIL does, and the summary names it.
    """
    # a check's line starts with "FAIL "; the closing "FAIL=1 WARN=0" is not one
    fails = [ln.strip()[4:].strip() for ln in log.splitlines() if ln.strip().startswith("FAIL ")]
    expected = tuple(f"{n} missing" for n in NOT_BUNDLED)
    if status != 0 and fails and all(f.startswith(expected) for f in fails):
        return {"status": "ok", "detail": f"exit {status}: only {'; '.join(fails)} (not bundled)"}
    return {
        "status": _status(status),
        "detail": f"exit {status}" + "".join(f"; {f}" for f in fails[:3]),
    }


# --------------------------------------------------------------------------- summary


def render_summary(s: dict) -> str:
    """The one screen: where it ran, each step, the chapters, the ceilings, decode."""
    e = s.get("environment") or {}
    lines = [
        f"brrr on {e.get('device', '?')}: torch {e.get('torch')}, CUDA {e.get('cuda')}, "
        f"driver {e.get('driver', '-')}, Python {e.get('python')}, {e.get('cpu_cores')} CPU "
        f"cores; commit {e.get('commit')}{' (+ changes)' if e.get('dirty') else ''}, "
        f"{e.get('date')}; {s.get('seconds', 0):.0f} s in all"
        + (f" ({s['runs']} runs)" if s.get("runs", 1) > 1 else ""),
        "",
        f"{'step':<12}{'status':<9}{'time':>7}  detail",
    ]
    for name, r in s["steps"].items():
        lines.append(f"{name:<12}{r['status']:<9}{r['seconds']:>5.0f} s  {r.get('detail', '')}")
    for name in ("gpu-tests", "tests"):
        for test in (s["steps"].get(name) or {}).get("failed_tests", [])[:8]:
            lines.append(f"  {name}: FAILED {test}")
    chapters = (s["steps"].get("chapters") or {}).get("chapters") or {}
    for name, c in chapters.items():
        for err in c["errors"][:3]:
            lines.append(f"  {name}: cell {err}")
        for brk in c["rule_breaks"][:3]:
            lines.append(f"  {name}: {brk}")
        if c.get("stderr_cells"):
            lines.append(f"  {name}: {c['stderr_cells']} cell(s) wrote to stderr")
    lines += _ceiling_lines(s.get("ceilings"))
    lines += _decode_lines(s.get("decode"))
    failed = [k for k, r in s["steps"].items() if r["status"] not in ("ok", "skipped")]
    lines += ["", f"failed: {', '.join(failed)}" if failed else "every step passed"]
    return "\n".join(lines) + "\n"


def _ceiling_lines(rows) -> list[str]:
    """Each ceiling beside its same-run reference and the sheet's peak; above the peak: flagged."""
    if not rows:
        return []
    head = f"{'ceiling':>12}{'same-run ref':>14}{'ref/ceil':>9}{'sheet peak':>13}{'of peak':>9}"
    out = ["", head + "  what (benchmarks/ceilings.py)"]
    for r in rows:
        peak = r.get("peak")
        share = r["ceiling"] / peak if peak else None
        flag = "ABOVE THE PEAK: " if share and share > 1.0 else ""
        out.append(
            f"{_si(r['ceiling'], r['unit']):>12}{_si(r['reference'], r['unit']):>14}"
            f"{r['reference'] / r['ceiling']:>9.2f}{_si(peak, r['unit']) if peak else '-':>13}"
            f"{f'{share:.0%}' if share else '-':>9}  {flag}{r['what']}"
        )
    return out


def _decode_lines(d) -> list[str]:
    if not d:
        return []
    out = ["", "decode, batch 1 (bandwidth achieved = bytes read per step / time; gpt-fast ~70%)"]
    for r in d.get("decode", []):
        sheet = f", {_pct(r['share_of_sheet'])} of the sheet" if r.get("share_of_sheet") else ""
        out.append(
            f"  {r['label']:<28}{r['tokens_per_s']:>10,.0f} tokens/s {r['bytes_per_s'] / 1e9:>8.1f}"
            f" GB/s = {_pct(r['share_of_copy'])} of the copy ceiling{sheet}"
        )
    return out


def _pct(share: float) -> str:
    """0.28 -> "28%"; a share that rounds to nothing -> "<1%", not "0%"."""
    return f"{share:.0%}" if share >= 0.005 else "<1%"


def _si(value, unit: str) -> str:
    if value is None:
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    for scale, prefix in ((1e-3, "m"), (1e-6, "µ"), (1e-9, "n")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


# --------------------------------------------------------------------------- chapters


def execute_chapters(source: Path, only: list[str]) -> int:
    """Stage the course, execute it with the site's executor; ``chapters.json`` beside it."""
    sys.path.insert(0, str(ROOT / "docs"))
    sys.path.insert(0, str(ROOT))
    import build  # docs/build.py: the site's stage and executor

    import conftest  # the course's output rules

    build.stage(source)
    done: dict[str, dict] = {}
    record = source.parent / "chapters.json"
    paths = {str(p.relative_to(source).with_suffix("")): p for p in build.course_notebooks(source)}
    unknown = set(only) - set(paths)
    if unknown:
        raise SystemExit(f"no such notebook: {sorted(unknown)}; the course has {sorted(paths)}")
    for name in only or paths:  # in the order asked for
        path = paths[name]
        t0 = time.perf_counter()
        try:
            nb, errors = build.execute_notebook(path, allow_errors=True)
        except Exception as exc:  # the kernel died (memory?), or would not start: the next one
            done[name] = {
                "seconds": round(time.perf_counter() - t0, 1),
                "rule_breaks": [],
                "errors": [f"the kernel: {type(exc).__name__}: {exc}"[:300]],
            }
            record.write_text(json.dumps(done, indent=1) + "\n")
            continue
        cells = [c for c in nb.cells if c.cell_type == "code"]
        breaks = [
            f"cell {i}: {p}"
            for i, c in enumerate(cells)
            for p in conftest.output_problems(conftest.output_text(c.outputs))
        ]
        stderr = sum(any(o.get("name") == "stderr" for o in c.outputs) for c in cells)
        done[name] = {
            "seconds": round(time.perf_counter() - t0, 1),
            "errors": errors,
            "rule_breaks": breaks,
            "stderr_cells": stderr,
        }
        record.write_text(json.dumps(done, indent=1) + "\n")
        print(f"{name}: {done[name]['seconds']:.0f} s, {len(errors)} cell(s) raised", flush=True)
    return 0


# --------------------------------------------------------------------------- unpack


def unpack(srcs: list[Path] | Path, recordings: Path = RECORDINGS) -> Path:
    """What runs sent back -> ``recordings/<gpu>-<date>/``; retire the older one's notebooks.

    Several runs of one commit on one GPU (a budget that ends before the last step, then a
    second call for the steps left) become one recording: a later run's step replaces an
    earlier one's where it ran (not skipped), and the files of both are kept.
    """
    srcs = [Path(srcs)] if isinstance(srcs, (str, Path)) else [Path(s) for s in srcs]
    with tempfile.TemporaryDirectory() as tmp:
        merged = Path(tmp) / "merged"
        for i, src in enumerate(srcs):
            one = Path(tmp) / str(i)
            with tarfile.open(src / "recording.tar.gz") as tar:
                tar.extractall(one, filter="data")
            _merge_run(one, merged)
        summary = json.loads((merged / "summary.json").read_text())
        log = merged / "logs" / "doctor.log"
        doctor = summary["steps"].get("doctor")
        if (
            doctor and doctor["status"] != "skipped" and log.is_file()
        ):  # today's rule, not the run's
            exit_status = int(re.search(r"exit (\d+)", doctor.get("detail", "exit 1")).group(1))
            doctor.update(doctor_verdict(exit_status, log.read_text(errors="replace")))
            (merged / "summary.json").write_text(json.dumps(summary, indent=1))
        return _unpack_into(merged, recordings)


def _merge_run(one: Path, merged: Path) -> None:
    """Lay one run's files over the runs before it (same GPU and date, or refuse).

    A later pass may run a later commit (a fix made between passes): the recording then
    names each pass's commit, in order.
    """
    new = json.loads((one / "summary.json").read_text())
    if not merged.exists():
        shutil.copytree(one, merged)
        (merged / "summary.json").write_text(json.dumps({**new, "runs": 1}, indent=1))
        return
    old = json.loads((merged / "summary.json").read_text())
    for key in ("device", "date"):
        if old["environment"].get(key) != new["environment"].get(key):
            raise SystemExit(
                f"unpack: the runs differ in {key} ({old['environment'].get(key)} vs "
                f"{new['environment'].get(key)}); unpack each on its own"
            )
    chapters = {}
    for run in (merged, one):
        ran = run / "chapters.json"
        chapters.update(json.loads(ran.read_text()) if ran.is_file() else {})
    ran_steps = {k: v for k, v in new["steps"].items() if v["status"] != "skipped"}
    ran = (
        json.loads((one / "chapters.json").read_text()) if (one / "chapters.json").is_file() else {}
    )
    for f in one.rglob("*"):
        if f.suffix == ".ipynb" and f.relative_to(one).parts[0] == "chapters":
            if str(f.relative_to(one / "chapters").with_suffix("")) not in ran:
                continue  # packed beside the chapters this pass ran, not executed by it
        if f.is_file() and f.name not in ("summary.json", "summary.txt", "chapters.json"):
            target = merged / f.relative_to(one)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, target)
    (merged / "chapters.json").write_text(json.dumps(chapters, indent=1) + "\n")
    old["steps"] = {**old["steps"], **ran_steps}
    if "chapters" in ran_steps:
        old["steps"]["chapters"]["chapters"] = chapters
    for key in ("ceilings", "decode"):
        if "benchmarks" in ran_steps and new.get(key):
            old[key] = new[key]
    commits = old["environment"]["commit"].split(", ")
    if new["environment"]["commit"] != commits[-1]:
        old["environment"]["commit"] = ", ".join([*commits, new["environment"]["commit"]])
    old["seconds"] = old.get("seconds", 0) + new.get("seconds", 0)
    old["runs"] = old.get("runs", 1) + 1
    (merged / "summary.json").write_text(json.dumps(old, indent=1))


def _unpack_into(tmp: Path, recordings: Path) -> Path:
    summary = json.loads((tmp / "summary.json").read_text())
    e = summary["environment"]
    short = _short_name(e["device"], e.get("kind", "cuda"))
    dest = recordings / f"{_slug(short)}-{e['date']}"
    if dest.exists():
        shutil.rmtree(dest)
    ran = tmp / "chapters.json"  # written as each notebook finished: kept by a stopped step
    chapters = json.loads(ran.read_text()) if ran.is_file() else {}
    if "chapters" in summary["steps"]:
        summary["steps"]["chapters"].setdefault("chapters", chapters)
    clean = {k: v for k, v in chapters.items() if not v["errors"]}
    notebooks = dest / "notebooks"
    notebooks.mkdir(parents=True)
    for name in clean:
        text = (tmp / "chapters" / f"{name}.ipynb").read_text(encoding="utf-8")
        (notebooks / f"{Path(name).name}.ipynb").write_text(_scrub(text, e), encoding="utf-8")
    label = {
        "device": e["device"],
        "device_short": short,
        "date": e["date"],
        "commit": e["commit"],
        "torch": e["torch"],
        "cuda": e.get("cuda"),
        "driver": e.get("driver"),
        "python": ".".join(e["python"].split(".")[:2]),
        "cpu_cores": e["cpu_cores"],
    }
    if clean:
        (notebooks / "run.json").write_text(json.dumps(label, indent=2) + "\n")
    for kind in ("traces", "reports", "sweeps"):
        for f in sorted((tmp / "recorded" / kind).glob("*.json")):
            (dest / kind).mkdir(exist_ok=True)
            (dest / kind / f.name).write_text(_scrub(f.read_text(), e))
    (notebooks / "README.md").write_text(_notebooks_readme(label, clean, chapters))
    (dest / "README.md").write_text(_readme(label, summary, dest))
    if clean:
        _retire(recordings, dest, short)
    return dest


def _short_name(device: str, kind: str = "cuda") -> str:
    """The short name of a device: "NVIDIA H100 80GB HBM3" -> "NVIDIA H100"; a CPU -> "CPU"."""
    if kind != "cuda":
        return "CPU"
    words = re.split(r"[\s-]+", re.sub(r"^(NVIDIA|Tesla|GeForce)\s+", "", device).strip())
    words = [w for w in words if w not in ("NVIDIA", "Tesla", "GeForce")]
    model = words[:2] if words[0] in ("RTX", "GTX", "Quadro", "TITAN") else words[:1]
    return "NVIDIA " + " ".join(model)


def _slug(short: str) -> str:
    """ "NVIDIA H100" -> "h100", "NVIDIA RTX 4090" -> "rtx-4090", "CPU" -> "cpu"."""
    return "-".join(short.removeprefix("NVIDIA ").lower().split())


def _scrub(text: str, e: dict) -> str:
    """Machine paths out: the run's checkout, home, temporary folders and site-packages."""
    text = re.sub(r"/tmp/brrr-gpu-run-[\w]+/", "", text)
    text = re.sub(r"(/[\w.+-]+)+/site-packages/", "site-packages/", text)
    for root in {e.get("root"), str(ROOT)} - {None}:
        text = text.replace(root + "/", "")
    return text.replace(str(Path.home()) + "/", "~/")


def _retire(recordings: Path, new: Path, short: str) -> None:
    """Older recordings of the same GPU leave the site where the new one replaces them.

    A chapter the new recording holds is removed from the older one's ``notebooks/`` (git
    keeps it); an older folder left with no chapter goes, ``run.json`` and all, so the site
    shows one recording of each chapter per GPU, the newest.
    """
    stems = {p.stem for p in (new / "notebooks").glob("*.ipynb")}
    for label in recordings.glob("*/notebooks/run.json"):
        run = label.parent
        if run.parent == new or json.loads(label.read_text()).get("device_short") != short:
            continue
        replaced = [old for old in run.glob("*.ipynb") if old.stem in stems]
        for old in replaced:
            old.unlink()
        if not any(run.glob("*.ipynb")):
            shutil.rmtree(run)
        if replaced:
            names = ", ".join(sorted(p.stem for p in replaced))
            print(f"retired {names} of {run.parent.name} from the site (git keeps them)")


def _notebooks_readme(label: dict, clean: dict, chapters: dict) -> str:
    failed = sorted(set(chapters) - set(clean))
    times = " + ".join(f"{v['seconds']:.0f}" for v in clean.values())
    return (
        f"# The chapters as executed on an {label['device_short']}, {label['date']}\n\n"
        f"Executed top to bottom in a Jupyter kernel by the site's executor (`docs/build.py`) "
        f"on an {label['device']} (driver {label['driver']}, CUDA {label['cuda']}, torch "
        f"{label['torch']}, Python {label['python']}, {label['cpu_cores']} CPU cores) at commit{'s' * (',' in label['commit'])} "
        f"`{label['commit']}`, by `python .ci/gpu.py run`, with their outputs, figures and the "
        "explorers' widget state kept; only machine paths were replaced. `run.json` says the "
        "same as data (the course site reads it for its labels).\n\n"
        "They are a record, not the course: open one in JupyterLab to see what a learner on "
        "this GPU saw; the course site shows each beside the chapter's own reference run.\n\n"
        f"Seconds per notebook: {times or 'none ran'}"
        + (f". Not recorded (a cell raised): {', '.join(failed)}" if failed else "")
        + ".\nThese notebooks keep their outputs on purpose: the pre-commit hooks and ruff "
        "skip `brrrlib/recordings/`.\n"
    )


def _readme(label: dict, summary: dict, dest: Path) -> str:
    traces = sorted(p.name for p in (dest / "traces").glob("*.json"))
    reports = sorted(p.name for p in (dest / "reports").glob("*.json"))
    sweeps = sorted(p.name for p in (dest / "sweeps").glob("*.json"))
    listing = "\n".join(
        f"- `{kind}/`: " + (", ".join(f"`{n}`" for n in names) if names else "none")
        for kind, names in (("traces", traces), ("reports", reports), ("sweeps", sweeps))
    )
    return (
        f"# Recorded on an {label['device_short']}, {label['date']}\n\n"
        f"What the course measured on an **{label['device']}** (driver {label['driver']}, "
        f"CUDA {label['cuda']}, torch {label['torch']}, Python {label['python']}, "
        f"{label['cpu_cores']} CPU cores) at commit{'s' * (',' in label['commit'])} `{label['commit']}`, in "
        f"{_passes(summary.get('runs', 1))} of `python .ci/gpu.py run` (CONTRIBUTING.md, "
        '"Re-record the GPU runs"). Shipped so '
        "that a learner without a GPU can see what a GPU does, clearly labelled as recorded. "
        "Nothing was edited except machine-specific paths.\n\n"
        "- `notebooks/`: the chapters as they ran (see its README).\n"
        f"{listing}\n\n"
        "Traces load with `bl.Trace.from_chrome_trace(path)`; reports are `bl.report()` "
        "files; the sweep is `figures.recorded_sweeps`' format.\n\n"
        "## The run's summary\n\n```text\n" + render_summary(summary) + "```\n"
    )


def _passes(n: int) -> str:
    """1 -> "one pass", 2 -> "two passes (a later pass's steps replace an earlier's)"."""
    if n == 1:
        return "one pass"
    words = {2: "two", 3: "three", 4: "four"}
    return f"{words.get(n, n)} passes (a later pass's steps replace an earlier's)"


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle", help="here: the wheels the GPU machine lacks -> .gpu-bundle/")
    b.add_argument("--python-version", default="3.12", help="the GPU machine's Python (3.12)")
    b.add_argument("--dest", default=str(BUNDLE), help="where (.gpu-bundle)")
    r = sub.add_parser("run", help="there: install, check, record; OUT/recording.tar.gz")
    r.add_argument("--out", default=os.environ.get("OUT", "gpu-out"), help="where to pack ($OUT)")
    r.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    r.add_argument("--budget-s", type=float, default=480.0, help="all steps together (480)")
    r.add_argument("--steps", default="", help=f"some of: {','.join(STEPS)} (default: all)")
    r.add_argument("--quick", action="store_true", help="the fast path (the test suite's)")
    r.add_argument(
        "--chapters", default="", help="only these notebooks, in this order (06_one_model,...)"
    )
    r.add_argument(
        "--benchmarks",
        default="",
        help="only these benchmarks (timer_agreement,ceilings,decode_roofline)",
    )
    r.add_argument(
        "--bundle", help="the bundle folder (default: .gpu-bundle on CUDA; none on a CPU)"
    )
    u = sub.add_parser("unpack", help="here: OUT -> brrrlib/recordings/<gpu>-<date>/")
    u.add_argument("src", nargs="+", help="the folder(s) the run's files came back to, in order")
    x = sub.add_parser("_execute")  # the chapters step's own process
    x.add_argument("source")
    x.add_argument("only", nargs="*")
    opts = p.parse_args(argv)
    if opts.command == "bundle":
        return bundle(opts.python_version, Path(opts.dest).resolve())
    if opts.command == "run":
        return run(opts)
    if opts.command == "unpack":
        print(f"wrote {unpack([Path(x) for x in opts.src]).relative_to(ROOT)}")
        return 0
    return execute_chapters(Path(opts.source), opts.only)


if __name__ == "__main__":
    raise SystemExit(main())
