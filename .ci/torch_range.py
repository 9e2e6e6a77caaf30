"""Run the library tests and every notebook with the oldest and the newest torch the package allows.

Usage (from a clean clone, like CI; a run takes a few GB of disk per torch)::

    python3 .ci/torch_range.py                    # the floor in pyproject.toml, and the newest
    python3 .ci/torch_range.py 2.5.1 2.15.0       # chosen versions
    python3 .ci/torch_range.py --python python3.10 2.10.0   # the oldest Python too

For each torch it builds a fresh virtual environment under ``--workdir``,
installs that torch from the package index (on Linux PyPI's wheel is a CUDA
build: large, and it runs on a CPU too), then the project with its test
tools as README says (``pip install -e ".[test]"``), and runs ``pytest``:
the library tests and every course notebook under nbval, but not the browser
test, which checks JupyterLab rather than torch. Each run gets empty ceilings
and torch.compile caches. The summary (one line per torch: passed, failed,
minutes, and the numpy that came with it) is printed and added to
``<workdir>/summary.md``; the exit status is 1 if any run failed.

Default CI runs one torch (``.ci/run``); run this before raising or lowering
the floor in pyproject.toml, and quote its summary there.
"""

from __future__ import annotations

import argparse
import os
import re
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
NEWEST = "newest"


def claimed_floor() -> str:
    """The X in pyproject's ``torch>=X``."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(d for d in deps if re.match(r"torch\b", d))
    match = re.search(r">=\s*([\w.]+)", torch)
    if match is None:
        sys.exit(f"pyproject.toml's {torch!r} names no floor (torch>=X)")
    return match.group(1)


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


def run_one(version: str, workdir: Path, base_python: str) -> dict:
    """One torch: its venv, the project, pytest. A dict of what happened."""
    tag = f"torch-{version}-{Path(base_python).name}"
    env_dir = workdir / tag
    log_path = workdir / f"{tag}.log"
    python = env_dir / "bin" / "python"
    start = time.perf_counter()
    with log_path.open("w") as log:
        steps = [
            [base_python, "-m", "venv", "--clear", env_dir],
            [
                python,
                "-m",
                "pip",
                "install",
                "-q",
                "torch" if version == NEWEST else f"torch=={version}",
            ],
            [python, "-m", "pip", "install", "-q", "-e", ".[test]"],
        ]
        for step in steps:
            if _sh(step, log, cwd=ROOT) != 0:
                return {"torch": version, "result": "install failed", "log": log_path}
        installed = _versions(python)
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
    tail = log_path.read_text().splitlines()[-40:]
    counts = next((line for line in reversed(tail) if re.search(r"\d+ (passed|failed)", line)), "")
    return {
        "torch": version,
        "installed": installed,
        "result": "pass" if code == 0 else f"FAIL (pytest exit {code})",
        "counts": counts.strip("= "),
        "minutes": (time.perf_counter() - start) / 60,
        "log": log_path,
    }


def _commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+changes"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("versions", nargs="*", help="torch versions (default: the floor and newest)")
    p.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "brrr-torch-range")
    p.add_argument("--python", default=sys.executable, help="the Python of the venvs")
    opts = p.parse_args()
    versions = opts.versions or [claimed_floor(), NEWEST]
    opts.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for version in versions:
        print(f"torch {version} with {opts.python}: building ...", flush=True)
        row = run_one(version, opts.workdir, opts.python)
        print(f"  {row}", flush=True)
        rows.append(row)
    date = time.strftime("%Y-%m-%d")
    lines = [
        f"torch range, {date}, {sys.platform}, commit {_commit()}",
        "",
        "| torch asked | torch, numpy, Python installed | result | tests | minutes |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        minutes = f"{r['minutes']:.1f}" if "minutes" in r else "-"
        lines.append(
            f"| {r['torch']} | {r.get('installed', '-')} | {r['result']} "
            f"| {r.get('counts', '-')} | {minutes} |"
        )
    summary = "\n".join(lines)
    with (opts.workdir / "summary.md").open("a") as f:  # one block per run of this script
        f.write(summary + "\n\n")
    print("\n" + summary)
    return 0 if all(r["result"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
