"""The GPU recording's three commands (.ci/gpu.py), on this machine's CPU: the dry run's
fast path end to end (run, pack, summary, unpack into a recordings folder), and the
pieces a GPU run depends on that a CPU never reaches (the summary's peak check, the
device's short name, paths scrubbed, older recordings retired)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_ci", ROOT / ".ci" / "gpu.py")
gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu)


#: Where a made-up H100 run says it ran.
H100_RUN = {
    "device": "NVIDIA H100 80GB HBM3",
    "date": "2026-02-02",
    "commit": "abc1234",
    "torch": "2.11.0+cu130",
    "cuda": "13.0",
    "driver": "580",
    "python": "3.12.3",
    "cpu_cores": 16,
    "kind": "cuda",
}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory, measured_ceilings):
    """``gpu.py run --device cpu --quick``: the GPU tests, one notebook, the small record."""
    out = tmp_path_factory.mktemp("gpu-out")
    steps = "gpu-tests,chapters,record"
    cmd = [sys.executable, str(ROOT / ".ci" / "gpu.py"), "run", "--device", "cpu", "--quick"]
    proc = subprocess.run(
        [*cmd, "--steps", steps, "--out", str(out), "--budget-s", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, out


def test_the_dry_run_passes_every_step_and_packs_what_the_site_needs(dry_run):
    proc, out = dry_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["steps"]) == {"environment", "gpu-tests", "chapters", "record"}
    assert all(s["status"] == "ok" for s in summary["steps"].values())
    assert (out / "summary.txt").read_text() in proc.stdout  # the same screen, printed and kept
    chapters = summary["steps"]["chapters"]["chapters"]
    assert list(chapters) == ["instructor/class_results"]
    assert chapters["instructor/class_results"]["errors"] == []
    with tarfile.open(out / "recording.tar.gz") as tar:
        names = set(tar.getnames())
    assert "chapters/instructor/class_results.ipynb" in names
    assert {"recorded/traces/short_chain_1k.json", "recorded/traces/add_1_element.json"} <= names
    assert any(n.startswith("recorded/reports/measured-") for n in names)
    assert {"logs/gpu-tests.log", "logs/chapters.log", "logs/record.log"} <= names


def test_unpack_writes_a_recording_the_site_and_the_library_can_read(dry_run, tmp_path):
    import brrrlib as bl

    recordings = tmp_path / "recordings"
    dest = gpu.unpack(dry_run[1], recordings)
    label = json.loads((dest / "notebooks" / "run.json").read_text())
    assert label["device_short"] == "CPU" and dest.name == f"cpu-{label['date']}"
    notebook = (dest / "notebooks" / "class_results.ipynb").read_text()
    assert "brrr-gpu-run-" not in notebook and str(ROOT) not in notebook
    trace = bl.Trace.from_chrome_trace(dest / "traces" / "short_chain_1k.json")
    assert len(trace.runs) == 3
    assert "## The run's summary" in (dest / "README.md").read_text()


def test_unpack_retires_the_older_recording_of_the_same_gpu_only(tmp_path):
    recordings = tmp_path / "recordings"
    for run, short in (("h100-2026-01-01", "NVIDIA H100"), ("t4-2026-01-01", "NVIDIA T4")):
        (recordings / run / "notebooks").mkdir(parents=True)
        label = {"device_short": short}
        (recordings / run / "notebooks" / "run.json").write_text(json.dumps(label))
    work = tmp_path / "work"
    (work / "chapters").mkdir(parents=True)
    (work / "chapters" / "00_the_factory.ipynb").write_text('{"cells": []}')
    summary = {
        "environment": H100_RUN,
        "steps": {
            "chapters": {
                "status": "failed",
                "seconds": 1,
                "chapters": {
                    "00_the_factory": {"seconds": 1, "errors": [], "rule_breaks": []},
                    "01_compute": {"seconds": 1, "errors": ["3: KeyError: x"], "rule_breaks": []},
                },
            }
        },
    }
    (work / "summary.json").write_text(json.dumps(summary))
    (work / "chapters.json").write_text(json.dumps(summary["steps"]["chapters"]["chapters"]))
    dest = gpu._unpack_into(work, recordings)
    assert dest.name == "h100-2026-02-02"
    assert sorted(p.name for p in (dest / "notebooks").glob("*.ipynb")) == ["00_the_factory.ipynb"]
    assert "01_compute" in (dest / "notebooks" / "README.md").read_text()  # named as not recorded
    assert not (recordings / "h100-2026-01-01" / "notebooks").exists()  # retired from the site
    assert (recordings / "h100-2026-01-01").is_dir()  # its other files stay
    assert (recordings / "t4-2026-01-01" / "notebooks" / "run.json").is_file()


def test_the_summary_flags_a_ceiling_above_the_sheet_peak():
    rows = [
        {
            "what": "matmul bf16",
            "reference": 7e14,
            "ceiling": 7.2e14,
            "unit": "FLOP/s",
            "peak": 9.9e14,
        },
        {
            "what": "bandwidth",
            "reference": 3.0e12,
            "ceiling": 3.5e12,
            "unit": "B/s",
            "peak": 3.35e12,
        },
        {"what": "a + b", "reference": 8e-6, "ceiling": 7e-6, "unit": "s", "peak": None},
    ]
    lines = gpu._ceiling_lines(rows)
    flagged = [line for line in lines if "ABOVE" in line]
    assert len(flagged) == 1 and flagged[0].endswith("ABOVE THE PEAK: bandwidth")


@pytest.mark.parametrize(
    "name, kind, short, slug",
    [
        ("NVIDIA H100 80GB HBM3", "cuda", "NVIDIA H100", "h100"),
        ("NVIDIA GeForce RTX 4090", "cuda", "NVIDIA RTX 4090", "rtx-4090"),
        ("Tesla T4", "cuda", "NVIDIA T4", "t4"),
        ("NVIDIA A100-SXM4-40GB", "cuda", "NVIDIA A100", "a100"),
        ("AMD EPYC 7B13", "cpu", "CPU", "cpu"),
    ],
)
def test_a_recording_is_named_after_its_device(name, kind, short, slug):
    assert gpu._short_name(name, kind) == short
    assert gpu._slug(short) == slug


def test_bundle_fits_the_working_tree_limit_with_room_for_the_project():
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True).stdout
    project = sum(
        (ROOT / p).stat().st_size
        for p in tracked.decode().split("\0")
        if p and (ROOT / p).is_file()
    )
    assert project + gpu.BUNDLE_LIMIT_BYTES < 64 * 2**20


def test_the_summary_names_the_tests_that_failed(tmp_path):
    xml = tmp_path / "tests.xml"
    xml.write_text(
        '<testsuites><testsuite tests="3" failures="1" errors="0" skipped="1">'
        '<testcase classname="tests.test_a" name="t1"><failure/></testcase>'
        '<testcase classname="tests.test_a" name="t2"/>'
        '<testcase classname="tests.test_a" name="t3"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    counts, failed = gpu._junit_counts(xml)
    assert counts == {"passed": 1, "failed": 1, "errors": 0, "skipped": 1}
    step = {"status": "failed", "seconds": 1, "failed_tests": failed}
    text = gpu.render_summary({"environment": {}, "steps": {"tests": step}})
    assert "FAILED tests.test_a::t1" in text and "t2" not in text


def _packed_run(
    tmp_path: Path, name: str, commit: str, steps: dict, files: dict, device: str = ""
) -> Path:
    """A run's OUT folder: ``recording.tar.gz`` holding a summary and ``files``."""
    work = tmp_path / f"{name}-work"
    environment = {**H100_RUN, "commit": commit, "device": device or H100_RUN["device"]}
    summary = {"environment": environment, "steps": steps, "seconds": 100.0}
    for rel, text in {**files, "summary.json": json.dumps(summary)}.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    out = tmp_path / name
    out.mkdir()
    with tarfile.open(out / "recording.tar.gz", "w:gz") as tar:
        for f in work.rglob("*"):
            tar.add(f, arcname=str(f.relative_to(work)), recursive=False)
    return out


def test_unpack_joins_two_runs_and_a_later_step_replaces_an_earlier(tmp_path):
    ok, skipped = {"status": "ok", "seconds": 1}, {"status": "skipped", "seconds": 0}
    chapter = {"00_the_factory": {"seconds": 1, "errors": [], "rule_breaks": []}}
    doctor_log = "  ok    torch\n  FAIL  jupyterlab missing\n"
    first = _packed_run(
        tmp_path,
        "first",
        "abc1234",
        {
            "doctor": {"status": "failed", "seconds": 1, "detail": "exit 1"},
            "chapters": {**ok, "chapters": chapter},
            "record": {**skipped, "detail": "no time left"},
        },
        {
            "chapters.json": json.dumps(chapter),
            "chapters/00_the_factory.ipynb": '{"cells": []}',
            "logs/doctor.log": doctor_log,
        },
    )
    second = _packed_run(
        tmp_path,
        "second",
        "abc1234",
        {"chapters": skipped, "record": {**ok, "detail": "1 files"}},
        {
            "recorded/traces/short.json": "[]",
            "chapters/00_the_factory.ipynb": '{"cells": [{}]}',  # packed beside, not run
        },
    )
    dest = gpu.unpack([first, second], tmp_path / "recordings")
    kept = json.loads((dest / "notebooks" / "00_the_factory.ipynb").read_text())
    assert kept["cells"] == []  # the first run's executed copy, not the second's packed one
    assert (dest / "traces" / "short.json").is_file()  # from the second
    readme = (dest / "README.md").read_text()
    assert "two passes" in readme and "(2 runs)" in readme
    steps = {ln.split()[0]: ln.split()[1] for ln in readme.splitlines() if ln.endswith(" files")}
    assert steps == {"record": "ok"}  # the second run's record replaced the first's skip
    assert "chapters    ok" in readme  # the second run's skipped chapters did not replace it
    assert "doctor      ok" in readme  # only the unbundled lab failed: not a failure
    fixed = _packed_run(tmp_path, "fixed", "def5678", {"record": ok}, {})  # a fix between
    joined = gpu.unpack([first, fixed], tmp_path / "recordings") / "notebooks" / "run.json"
    assert json.loads(joined.read_text())["commit"].split(", ") == ["abc1234", "def5678"]
    h200 = _packed_run(tmp_path, "h200", "abc1234", {"record": ok}, {}, device="NVIDIA H200")
    with pytest.raises(SystemExit, match="device"):
        gpu.unpack([first, h200], tmp_path / "recordings")


@pytest.mark.parametrize(
    "status, log, verdict",
    [
        (1, "  FAIL  jupyterlab missing\n", "ok"),
        (1, "  FAIL  jupyterlab missing\nFAIL=1 WARN=0\n", "ok"),
        (1, "  FAIL  jupyterlab missing\n  FAIL  torch 2.11.0 cannot see the GPU\n", "failed"),
        (1, "Traceback (most recent call last):\n", "failed"),
        (0, "  ok    torch\n", "ok"),
    ],
)
def test_the_doctor_step_fails_on_any_fail_but_the_unbundled_lab(status, log, verdict):
    assert gpu.doctor_verdict(status, log)["status"] == verdict
