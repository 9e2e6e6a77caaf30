"""Run the library tests and every notebook with the oldest, a middle and the newest torch.

Usage (from a clean clone, like CI; each torch takes a few GB of disk while it runs)::

    python3 .ci/torch_range.py                    # the floor, a middle release, the newest
    python3 .ci/torch_range.py 2.12.1 2.15.0      # chosen versions
    python3 .ci/torch_range.py --python python3.10 2.10.0   # the oldest Python too

The default versions come from the package index: the floor in
pyproject.toml (``torch>=X``), the newest release there, and the minor
release halfway between them (rounded up; its latest patch). For each torch
it builds a fresh virtual environment under ``--workdir``, installs that
torch from the package index (on Linux PyPI's wheel is a CUDA build: large,
and it runs on a CPU too), then the project with its test tools as README
says (``pip install -e ".[test]"``), and runs ``pytest``: the library tests
and every course notebook under nbval, but not the browser tests, which
check JupyterLab and the site rather than torch. Each run gets empty
ceilings and torch.compile caches, and its environment is deleted afterwards
(``--keep-envs`` keeps them).

The results (one row per torch: what was installed, passed or failed, the
test counts, minutes, date and commit) are written into the committed record
``.ci/torch_range.md``, which README.md quotes: a row replaces the earlier
row for the same torch, the others stay. A torch that cannot be installed on
this machine is recorded as such, with pip's reason, never as a pass. The
exit status is 1 if any run failed.

Default CI runs one torch (``.ci/run``); run this before raising or lowering
the floor in pyproject.toml, and commit the record it updates.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / ".ci" / "torch_range.md"
_HEADER = "| torch | installed (torch, numpy, Python) | result | tests | minutes | date | commit |"
_ROW = re.compile(r"^\| (\S+) \|")


def claimed_floor() -> str:
    """The X in pyproject's ``torch>=X``."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(d for d in deps if re.match(r"torch\b", d))
    match = re.search(r">=\s*([\w.]+)", torch)
    if match is None:
        sys.exit(f"pyproject.toml's {torch!r} names no floor (torch>=X)")
    return match.group(1)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])


def index_versions(python: str) -> list[str]:
    """torch's releases on the package index pip is set up for, newest first."""
    out = subprocess.run(
        [python, "-m", "pip", "index", "versions", "torch"], capture_output=True, text=True
    )
    match = re.search(r"Available versions: (.+)", out.stdout)
    if match is None:
        sys.exit(f"cannot list torch's versions on the package index: {out.stderr.strip()[-300:]}")
    plain = {v.strip() for v in match.group(1).split(",") if "+" not in v and "rc" not in v}
    return sorted(plain, key=_release, reverse=True)


def default_versions(available: list[str], floor: str) -> list[str]:
    """The floor's latest patch, the minor release halfway to the newest, and the newest."""

    def latest(minor: tuple[int, int]) -> str | None:
        return next((v for v in available if _release(v)[:2] == minor), None)

    newest = available[0]
    (major, low), high = _release(floor)[:2], _release(newest)[1]
    picks = [latest((major, low)), latest((major, (low + high + 1) // 2)), newest]
    return list(dict.fromkeys(v for v in picks if v))  # in order, without repeats


def _sh(cmd: list, log, **kwargs) -> int:
    print("+", " ".join(map(str, cmd)), file=log, flush=True)
    return subprocess.call([str(c) for c in cmd], stdout=log, stderr=subprocess.STDOUT, **kwargs)


def _versions(python: Path) -> str:
    code = (
        "import platform, numpy, torch; "
        "print(torch.__version__, numpy.__version__, 'Python', platform.python_version())"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.strip() or f"(import failed: {out.stderr.strip().splitlines()[-1:]})"


def _last_error(log_path: Path) -> str:
    lines = [line.strip() for line in log_path.read_text().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")] or lines[-1:]
    return (errors[-1] if errors else "no output")[:160].replace("|", "/")


def run_one(version: str, workdir: Path, base_python: str, keep_env: bool) -> dict:
    """One torch: its venv, the project, pytest. A dict of what happened."""
    tag = f"torch-{version}-{Path(base_python).name}"
    env_dir = workdir / tag
    log_path = workdir / f"{tag}.log"
    python = env_dir / "bin" / "python"
    start = time.perf_counter()
    row = {"torch": version, "date": time.strftime("%Y-%m-%d"), "log": str(log_path)}
    try:
        with log_path.open("w") as log:
            steps = [
                [base_python, "-m", "venv", "--clear", env_dir],
                [python, "-m", "pip", "install", "-q", f"torch=={version}"],
                [python, "-m", "pip", "install", "-q", "-e", ".[test]"],
            ]
            for step in steps:
                if _sh(step, log, cwd=ROOT) != 0:
                    reason = _last_error(log_path)
                    return {**row, "result": f"not tried: install failed ({reason})"}
            row["installed"] = _versions(python)
            caches = Path(tempfile.mkdtemp(prefix="caches-", dir=workdir))
            env = {
                **os.environ,
                "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                "BRRR_CACHE_DIR": str(caches / "brrr"),
                "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            }
            pytest = [python, "-m", "pytest", "-m", "not browser", "-q", "-rfE"]
            pytest += ["--continue-on-collection-errors", "--durations=5"]
            code = _sh(pytest, log, cwd=ROOT, env=env)
            shutil.rmtree(caches, ignore_errors=True)
    finally:
        if not keep_env:
            shutil.rmtree(env_dir, ignore_errors=True)
    return {**row, **_outcome(log_path, code), "minutes": (time.perf_counter() - start) / 60}


def _outcome(log_path: Path, code: int) -> dict:
    """pytest's summary line, and the tests that failed, from the end of a run's log."""
    tail = log_path.read_text().splitlines()[-60:]
    counts = next((line for line in reversed(tail) if re.search(r"\d+ (passed|failed)", line)), "")
    failed = [line.split()[1] for line in tail if line.startswith(("FAILED ", "ERROR "))]
    result = "pass" if code == 0 else f"FAIL (pytest exit {code})"
    if failed:
        result += ": " + ", ".join(f"`{name}`" for name in failed[:3])
        result += f" and {len(failed) - 3} more" if len(failed) > 3 else ""
    return {"result": result, "counts": counts.strip("= ")}


def _commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+changes"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def _line(r: dict, commit: str) -> str:
    minutes = f"{r['minutes']:.1f}" if "minutes" in r else "-"
    return (
        f"| {r['torch']} | {r.get('installed', '-')} | {r['result']} | {r.get('counts', '-')} "
        f"| {minutes} | {r['date']} | {commit} |"
    )


def update_record(record: Path, rows: list[dict], commit: str, machine: str) -> str:
    """Put this run's rows into the record (replacing older rows for the same torch)."""
    old = {}
    if record.exists():
        for line in record.read_text().splitlines():
            m = _ROW.match(line)
            if m and not line.startswith(("| torch ", "|---")):
                old[m.group(1)] = line
    for r in rows:
        old[r["torch"]] = _line(r, commit)
    ordered = sorted(old.values(), key=lambda line: _release(_ROW.match(line).group(1)))
    text = "\n".join(
        [
            "# torch versions the course was tested with",
            "",
            "Written by `python3 .ci/torch_range.py` (see its docstring): for each torch, a",
            'fresh environment, `pip install -e ".[test]"`, then `pytest -m "not browser"`',
            "(the library tests and every chapter under nbval). pyproject.toml's floor is the",
            "oldest row that passes. A row is rewritten when its torch is run again.",
            "",
            f"Last run on: {machine}.",
            "",
            _HEADER,
            "|---|---|---|---|---|---|---|",
            *ordered,
            "",
        ]
    )
    record.write_text(text)
    return text


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("versions", nargs="*", help="torch versions (default: floor, middle, newest)")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "brrr-torch-range")
    p.add_argument("--python", default=sys.executable, help="the Python of the venvs")
    p.add_argument("--record", type=Path, default=RECORD, help="the results file to update")
    p.add_argument("--keep-envs", action="store_true", help="keep each torch's environment")
    opts = p.parse_args()
    versions = opts.versions or default_versions(index_versions(opts.python), claimed_floor())
    opts.workdir.mkdir(parents=True, exist_ok=True)
    commit = _commit()
    rows = []
    for version in versions:
        print(f"torch {version} with {opts.python}: building ...", flush=True)
        row = run_one(version, opts.workdir, opts.python, opts.keep_envs)
        print(f"  {json.dumps(row)}", flush=True)
        rows.append(row)
    smi = shutil.which("nvidia-smi")
    gpu = subprocess.run([smi, "-L"], capture_output=True, text=True).stdout.strip() if smi else ""
    gpus = "; ".join(gpu.splitlines()) if gpu else "no NVIDIA GPU"
    machine = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, {gpus}"
    print("\n" + update_record(opts.record, rows, commit, machine))
    return 0 if all(r["result"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
