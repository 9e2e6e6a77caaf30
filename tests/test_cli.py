"""The brrr command line: doctor, diagnose (bl.diagnose replaced by a spy), lab (no server).

Subprocess tests run ``python -m brrrlib`` and the CLI with torch hidden by an
import hook, as on a machine where torch was never installed.
"""

import contextlib
import functools
import importlib.metadata
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest
import torch

import brrrlib
from brrrlib import cli
from brrrlib.cli import torch_problem
from brrrlib.cli._doctor import compiler_problem

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------- main ---


def test_no_command_prints_help_and_returns_2(capsys):
    assert cli.main([]) == 2
    assert "doctor" in capsys.readouterr().out


def test_unknown_command_exits_with_usage():
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


def test_version_comes_from_the_package_metadata(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"brrr {importlib.metadata.version('brrrlib')}"


def _not_installed(monkeypatch, name, version=None):
    """importlib.metadata sees ``name`` at ``version``, or not at all (uninstalling is no test)."""
    real = importlib.metadata.version

    def fake(dist):
        if dist != name:
            return real(dist)
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", fake)


def test_version_falls_back_to_the_source_tree(monkeypatch, capsys):
    _not_installed(monkeypatch, "brrrlib")
    monkeypatch.setattr(brrrlib, "__version__", "9.8.7")
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.strip() == "brrr 9.8.7"


def test_python_dash_m_brrrlib_runs_the_cli():
    run = subprocess.run(
        [sys.executable, "-m", "brrrlib", "--version"], capture_output=True, text=True, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("brrr ") and "Traceback" not in run.stderr


@pytest.mark.parametrize("port", ["0", "70000", "abc", "-1"])
def test_lab_port_must_be_a_port(port, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lab", "--port", port])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "65535" in err


# ------------------------------------------------------------ without torch ---

# An import hook that makes torch look uninstalled, as ModuleNotFoundError says it.
_HIDE_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTorch())
"""


def _run_without_torch(script: str, *args: str, hook=_HIDE_TORCH) -> subprocess.CompletedProcess:
    code = hook + textwrap.dedent(script)
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT
    )


# The cli module alone, with the package's own __init__ (which imports torch) bypassed.
_CLI_ALONE = f"""
import types
pkg = types.ModuleType("brrrlib")
pkg.__path__ = [{str(ROOT / "brrrlib")!r}]
sys.modules["brrrlib"] = pkg
from brrrlib import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as stop:
    code = stop.code
print("torch_imported=" + str("torch" in sys.modules))
sys.exit(code)
"""


def test_help_and_version_need_no_torch():
    for args in (["--help"], ["--version"], ["diagnose", "--help"]):
        run = _run_without_torch(_CLI_ALONE, *args)
        assert run.returncode == 0, run.stderr
        assert "torch_imported=False" in run.stdout and "Traceback" not in run.stderr


def test_doctor_without_torch_says_what_to_install():
    run = _run_without_torch(_CLI_ALONE, "doctor")
    assert run.returncode == 1, run.stderr
    tag, said = _finding(run.stdout, "torch")
    assert tag == "FAIL" and "installed" in said and "pip" in said  # the command: below
    assert "Device" not in run.stdout  # it stops after the packages
    assert "torch_imported=False" in run.stdout and "Traceback" not in run.stderr


def test_brrr_doctor_without_torch_end_to_end():
    """The console script's own path: ``python -m brrrlib doctor`` imports the package first."""
    script = """
    import runpy
    sys.argv = ["brrr", "doctor"]
    runpy.run_module("brrrlib", run_name="__main__", alter_sys=True)
    """
    run = _run_without_torch(script)
    assert run.returncode == 1, run.stderr
    assert _finding(run.stdout, "torch")[0] == "FAIL" and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("system", "gpu", "index"),
    [
        ("Linux", True, None),  # PyPI's Linux wheel is the CUDA build
        ("Linux", False, "whl/cpu"),
        ("Windows", True, "whl/cu"),  # PyPI's Windows wheel is the CPU build
        ("Windows", False, None),
        ("Darwin", False, None),  # Apple's MPS is in the default wheel
    ],
)
def test_an_old_torch_is_told_the_index_its_system_needs(monkeypatch, system, gpu, index):
    # a fake machine: the system and whether nvidia-smi is on PATH
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(shutil, "which", lambda name: "/x/nvidia-smi" if gpu else None)
    monkeypatch.setattr(torch, "__version__", "2.5.1+cu124")
    problem = torch_problem()
    assert "2.5.1+cu124" in problem and "pip install -U torch" in problem
    assert ("--index-url" not in problem) if index is None else (index in problem)


def _no_compiler(monkeypatch, system, release=None):
    """A machine of ``system`` whose PATH has no C++ compiler (and no nvidia-smi)."""
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "prefix", "/nonexistent-env")
    monkeypatch.setattr(platform, "freedesktop_os_release", lambda: release or {})


@pytest.mark.parametrize(
    ("release", "advice"),
    [
        ({"ID": "ubuntu", "ID_LIKE": "debian"}, "sudo apt install build-essential"),
        ({"ID": "fedora"}, "sudo dnf install gcc-c++"),
        ({"ID": "alpine"}, "sudo apk add build-base"),
    ],
)
def test_a_missing_compiler_is_found_without_compiling(monkeypatch, release, advice):
    _no_compiler(monkeypatch, "Linux", release)
    monkeypatch.setattr(torch, "compile", lambda *a, **k: pytest.fail("doctor compiled"))
    missing, fix = compiler_problem()
    assert "g++" in missing and fix == advice


def test_a_mac_without_command_line_tools_has_no_compiler(monkeypatch):
    _no_compiler(monkeypatch, "Darwin")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")  # the stub
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: types.SimpleNamespace(returncode=2))
    assert compiler_problem()[1] == "xcode-select --install"


def test_windows_compiler_advice_is_true_on_windows(monkeypatch):
    _no_compiler(monkeypatch, "Windows")
    missing, fix = compiler_problem()
    assert "(cl)" in missing and "Build" in fix and "WSL" in fix


def test_a_conda_environment_is_told_the_conda_compiler(monkeypatch, tmp_path):
    _no_compiler(monkeypatch, "Linux", {"ID": "ubuntu"})
    (tmp_path / "conda-meta").mkdir()
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert compiler_problem()[1] == "conda install -c conda-forge cxx-compiler"


def test_an_explicit_cxx_is_the_one_looked_up(monkeypatch):
    # a fake machine whose PATH holds only the compiler CXX names
    monkeypatch.setenv("CXX", "my-clang++")
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(shutil, "which", lambda name: "/opt/x" if name == "my-clang++" else None)
    assert compiler_problem() is None


def test_a_broken_torch_is_named_as_such():
    broken = _HIDE_TORCH.replace(
        'ModuleNotFoundError(f"No module named {name!r}", name=name)',
        'OSError("libtorch_cpu.so: cannot open shared object file")',
    )
    run = _run_without_torch(_CLI_ALONE, "doctor", hook=broken)
    tag, said = _finding(run.stdout, "torch")
    assert run.returncode == 1 and tag == "FAIL" and "Traceback" not in run.stderr
    assert "OSError" in said and "libtorch_cpu.so" in said and "--force-reinstall" in said


# ---------------------------------------------------------------- doctor ---

# Doctor's report: one line per finding, "  TAG   text", its advice on the next line after "->".
_FINDING = re.compile(r"^  (ok|WARN|FAIL) +(.*)\n?(?: +-> (.*))?", re.M)


def _finding(text: str, subject: str) -> tuple[str, str]:
    """The tag of doctor's first line about ``subject``, and that line with its advice."""
    for tag, line, advice in _FINDING.findall(text):
        if subject in line:
            return tag, f"{line} {advice}"
    raise AssertionError(f"no line about {subject!r} in:\n{text}")


def _doctor_run(**kw):
    out = io.StringIO()
    code = cli.doctor(out=out, **kw)
    return code, out.getvalue()


def test_doctor_passes_on_this_environment(measured_ceilings):
    code, text = _doctor_run(quick=True)
    assert code == 0, text
    assert _finding(text, "torch")[1].split()[:2] == ["torch", torch.__version__]  # its build
    assert measured_ceilings.nearest_spec().name + " (spec)" in text
    assert _finding(text, "00_the_factory.ipynb")[0] == "ok"
    assert "FAIL" not in [tag for tag, *_ in _FINDING.findall(text)]


def test_doctor_fails_with_advice_when_a_package_is_missing(measured_ceilings, monkeypatch):
    _not_installed(monkeypatch, "ipywidgets")
    code, text = _doctor_run(quick=True)
    assert code == 1
    tag, said = _finding(text, "ipywidgets")
    assert tag == "FAIL" and "pip install ipywidgets" in said


def test_doctor_reports_a_broken_torch_compile(measured_ceilings, monkeypatch):
    # a compiler that fails, on a fake Ubuntu: no machine here has a broken one to test on
    def broken(*a, **k):
        raise RuntimeError("InductorError: no C++ compiler found")

    monkeypatch.setattr(torch, "compile", broken)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(sys, "prefix", "/nonexistent-env")  # not conda: apt's advice
    monkeypatch.setattr(platform, "freedesktop_os_release", lambda: {"ID": "ubuntu"})
    code, text = _doctor_run()
    assert code == 1
    tag, said = _finding(text, "RuntimeError")
    assert tag == "FAIL" and "build-essential" in said
    # chapters that use torch.compile are flagged, the others still run
    tag, said = _finding(text, "03_overhead.ipynb")
    assert tag == "FAIL" and "torch.compile" in said
    assert _finding(text, "00_the_factory.ipynb")[0] == "ok"


def test_doctor_quick_names_a_missing_compiler_before_chapter_02(measured_ceilings, monkeypatch):
    # a fake Ubuntu without g++ on PATH (this machine has one)
    real_which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, *a: None if name == "g++" else real_which(name, *a)
    )
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "freedesktop_os_release", lambda: {"ID": "ubuntu"})
    code, text = _doctor_run(quick=True)
    assert code == 1
    tag, said = _finding(text, "(g++)")
    assert tag == "FAIL" and "build-essential" in said
    tag, said = _finding(text, "02_memory_bandwidth.ipynb")
    assert tag == "FAIL" and "torch.compile" in said


def test_doctor_warns_of_a_cpu_torch_on_a_machine_with_an_nvidia_gpu(
    measured_ceilings, monkeypatch
):
    if torch.cuda.is_available():
        pytest.skip("this machine's torch uses its GPU")
    # a fake NVIDIA GPU (nvidia-smi on PATH) beside a CPU build of torch
    real_which = shutil.which
    monkeypatch.setattr(
        shutil,
        "which",
        lambda name, *a: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else real_which(name, *a),
    )
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    code, text = _doctor_run(quick=True)
    tag, said = _finding(text, "NVIDIA")
    assert tag == "WARN" and "--force-reinstall" in said and "torch" in said


def test_doctor_reports_a_bad_brrr_device(measured_ceilings, monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "tpu")
    code, text = _doctor_run(quick=True)
    assert code == 1 and "BRRR_DEVICE='tpu'" in text and "unset" in text


@pytest.fixture
def notebooks(tmp_path, monkeypatch):
    """A course folder of hand-made notebooks that doctor checks (an install without the course
    needs one too); returns a function that writes ``name`` with the given code cells."""
    # a seam: the installed course folder cannot be swapped for a test's otherwise
    monkeypatch.setattr(cli, "course_source", lambda: tmp_path)

    def write(name, *cells):
        code = [{"cell_type": "code", "source": c} for c in cells]
        markdown = {"cell_type": "markdown", "source": "import not_code_at_all"}
        (tmp_path / name).write_text(json.dumps({"cells": [*code, markdown]}))

    return write


def test_doctor_without_course_notebooks_fails(measured_ceilings, monkeypatch):
    monkeypatch.setattr(cli, "course_source", lambda: None)  # an install without it
    code, text = _doctor_run(quick=True)
    assert code == 1 and _finding(text, "notebooks")[0] == "FAIL"


def test_doctor_names_what_a_notebook_imports_at_its_top_level(measured_ceilings, notebooks):
    colab = (
        "import sys\n\nif 'google.colab' in sys.modules:\n"
        "    %pip install -q brrrlib\n    from google.colab import output\n\nimport brrrlib\n"
    )
    notebooks("00_ok.ipynb", "%matplotlib inline\nimport torch, numpy as np\n", colab)
    notebooks("01_broken_cell.ipynb", "this is ( not python", "from . import x\n")
    notebooks("02_missing.ipynb", "from brrrlib import figures\nimport not_a_module_here\n")
    code, text = _doctor_run(quick=True)
    assert [_finding(text, f"0{i}_")[0] for i in range(3)] == ["ok", "ok", "FAIL"] and code == 1
    assert _finding(text, "02_missing")[1].split()[-3:] == ["pip", "install", "not_a_module_here"]


# -------------------------------------------------------------- diagnose ---


class _FakeDiagnosis:
    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __repr__(self):
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return f"FakeDiagnosis({name}, {len(self.args)} args, {sorted(self.kwargs)})"


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A temporary cwd, sys.path/sys.modules restored afterwards, and a spy for bl.diagnose.

    The spy calls the workload once (as diagnose would) and carries the real
    diagnose's signature, so its own keywords are the real ones.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    seen = []

    @functools.wraps(brrrlib.diagnose)
    def spy(fn, *args, **kwargs):
        seen.append((fn, args, kwargs))
        fn(*args, **kwargs)
        return _FakeDiagnosis(fn, args, kwargs)

    monkeypatch.setattr(brrrlib, "diagnose", spy)
    return tmp_path, seen


def _write(path, code):
    path.write_text(textwrap.dedent(code))


def test_diagnose_factory_returning_fn_and_args(workspace, capsys):
    tmp, seen = workspace
    _write(
        tmp / "wl_pair.py",
        """
        import torch
        def workload():
            x = torch.ones(8, 8)
            return torch.mm, (x, x)
        def with_kwargs():
            return torch.sum, (torch.ones(3),), {"dim": 0}
        """,
    )
    assert cli.main(["diagnose", "wl_pair:workload"]) == 0
    fn, args, kwargs = seen[-1]
    assert fn is torch.mm and len(args) == 2 and kwargs == {}
    assert repr(_FakeDiagnosis(fn, args, kwargs)) in capsys.readouterr().out  # its repr, printed
    assert cli.main(["diagnose", "wl_pair.py:with_kwargs"]) == 0  # a file path works too
    assert seen[-1][2] == {"dim": 0}


def test_diagnose_the_readmes_example_target(workspace, capsys):
    tmp, seen = workspace
    assert cli.main(["diagnose", "brrrlib.workloads:mystery_a"]) == 0
    assert len(seen) == 1 and "FakeDiagnosis(" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon_here", "must look like MODULE:NAME"),
        ("wl_missing_module:fn", "importing 'wl_missing_module': ModuleNotFoundError"),
        ("wl_bad:nothing", "has no 'nothing'"),
        ("wl_bad:returns_one", "returns_one must be"),
        ("wl_bad:not_callable", "not_callable must be"),
        ("wl_bad:first_not_callable", "first_not_callable must be"),
        ("wl_bad:raises", "raises(): ZeroDivisionError: division by zero (wl_bad.py:10)"),
        ("wl_bad:needs_args", "needs_args must be"),
        ("wl_bad:model", "model must be"),  # an nn.Module: wrap it
        ("wl_bad:exits", "exits(): SystemExit: 0"),
        ("wl_bad:interrupted", "interrupted(): KeyboardInterrupt"),
        ("wl_broken:fn", "importing 'wl_broken': NameError"),
        ("wl_exits_at_import.py:fn", "importing 'wl_exits_at_import.py': SystemExit: 0"),
        ("wl_interrupts:fn", "importing 'wl_interrupts': KeyboardInterrupt"),
        ("nowhere/file.py:fn", "FileNotFoundError"),
    ],
)
def test_diagnose_bad_targets_exit_2_with_a_clear_message(workspace, capsys, target, message):
    tmp, seen = workspace
    _write(
        tmp / "wl_bad.py",
        """
        import sys, torch
        model = torch.nn.Linear(4, 2)
        def returns_one():
            return torch.mm
        not_callable = 3
        def first_not_callable():
            return 3, ()
        def raises():
            return 1 / 0
        def needs_args(x):
            return x
        def exits():
            sys.exit(0)
        def interrupted():
            raise KeyboardInterrupt
        """,
    )
    _write(tmp / "wl_broken.py", "undefined_name\n")
    _write(tmp / "wl_exits_at_import.py", "import sys\nprint('a script')\nsys.exit(0)\n")
    _write(tmp / "wl_interrupts.py", "raise KeyboardInterrupt\n")
    assert cli.main(["diagnose", target]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1  # one line
    assert seen == []


def test_diagnose_refuses_keywords_that_diagnose_would_take(workspace, capsys):
    tmp, seen = workspace
    _write(
        tmp / "wl_kw.py",
        """
        import torch
        def run(x, budget_s):
            return x * budget_s
        def workload():
            return run, (torch.ones(3),), {"budget_s": 5.0}
        """,
    )
    assert cli.main(["diagnose", "wl_kw:workload"]) == 2
    err = capsys.readouterr().err
    assert "functools.partial" in err and "budget_s=5.0" in err
    assert seen == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("raise KeyError('no such layer')", "KeyError: 'no such layer' (wl_fail.py:4)"),
        ("sys.exit(3)", "SystemExit: 3 (wl_fail.py:4)"),
    ],
)
def test_a_workload_that_fails_while_measured_exits_1(workspace, capsys, body, message):
    tmp, seen = workspace
    _write(
        tmp / "wl_fail.py",
        f"""
        import sys, torch
        def step(x):
            {body}
        def workload():
            return step, (torch.ones(2),)
        """,
    )
    assert cli.main(["diagnose", "wl_fail:workload"]) == 1
    err = capsys.readouterr().err
    assert "wl_fail:workload" in err and message in err
    assert "Traceback" not in err and len(seen) == 1


def test_diagnose_interrupted_exits_130(workspace, capsys, monkeypatch):
    tmp, seen = workspace
    _write(
        tmp / "wl_ok.py", "import torch\ndef workload():\n    return torch.neg, (torch.ones(2),)\n"
    )

    def interrupted(fn, *args, **kwargs):  # Ctrl-C while measuring, at a known moment
        raise KeyboardInterrupt

    monkeypatch.setattr(brrrlib, "diagnose", interrupted)
    assert cli.main(["diagnose", "wl_ok:workload"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_diagnose_without_torch_says_what_to_install():
    run = _run_without_torch(_CLI_ALONE, "diagnose", "wl_anything:workload")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "torch" in run.stderr and "pip" in run.stderr


# ------------------------------------------------------------------- lab ---


@pytest.fixture
def course(tmp_path):
    src = tmp_path / "course"
    (src / "instructor").mkdir(parents=True)
    (src / ".ipynb_checkpoints").mkdir()
    (src / "00_a.ipynb").write_text('{"v":1}')
    (src / "01_b.ipynb").write_text('{"v":1}')
    (src / "instructor" / "answers.ipynb").write_text('{"answers": 1}')
    (src / ".ipynb_checkpoints" / "00_a-checkpoint.ipynb").write_text("old")
    return src


def _copied(out: str) -> tuple[int, int]:
    """The counts in lab's "copied=N kept=M" line: files copied, files kept."""
    found = re.search(r"copied=(\d+) kept=(\d+)", out)
    assert found, out
    return int(found[1]), int(found[2])


def test_copy_course_copies_missing_files_and_never_overwrites(course, tmp_path):
    dest = tmp_path / "ws"
    first = cli.copy_course(course, dest)
    assert sorted(first.copied) == ["00_a.ipynb", "01_b.ipynb", "instructor/answers.ipynb"]
    assert not (dest / ".ipynb_checkpoints").exists()
    (dest / "00_a.ipynb").write_text('{"v":"edited"}')
    (dest / "01_b.ipynb").unlink()
    second = cli.copy_course(course, dest)
    assert second.copied == ("01_b.ipynb",)
    assert "00_a.ipynb" in second.kept
    assert (dest / "00_a.ipynb").read_text() == '{"v":"edited"}'


def test_copy_course_reset_backs_up_edited_files(course, tmp_path):
    dest = tmp_path / "ws"
    cli.copy_course(course, dest)
    (dest / "00_a.ipynb").write_text('{"v":"edited"}')
    report = cli.copy_course(course, dest, reset=True)
    assert report.backed_up == ("00_a.ipynb",)
    assert (dest / "00_a.ipynb").read_text() == '{"v":1}'
    assert (report.backup_dir / "00_a.ipynb").read_text() == '{"v":"edited"}'
    assert "01_b.ipynb" in report.kept  # unchanged files are not backed up


@pytest.fixture
def lab_argv(monkeypatch):
    """JupyterLab's command lines from brrr lab; no server starts (it would outlive the test)."""
    from jupyterlab.labapp import LabApp

    calls = []
    monkeypatch.setattr(LabApp, "launch_instance", lambda argv: calls.append(argv))
    return calls


def test_lab_copies_the_course_then_runs_jupyterlab_on_loopback(lab_argv, tmp_path, capsys):
    dest = tmp_path / "ws"
    assert cli.main(["lab", "--dir", str(dest), "--no-browser", "--port", "8899"]) == 0
    (argv,) = lab_argv
    assert f"--ServerApp.root_dir={dest}" in argv and "--ServerApp.ip=127.0.0.1" in argv
    assert {"--no-browser", "--ServerApp.port=8899", "--ServerApp.port_retries=0"} <= set(argv)
    copied, kept = _copied(capsys.readouterr().out)
    assert (copied, kept) == (len([p for p in dest.rglob("*") if p.is_file()]), 0)
    assert cli.main(["lab", "--dir", str(dest)]) == 0  # again: nothing copied, nothing lost
    assert _copied(capsys.readouterr().out) == (0, copied)
    assert not any(a.startswith("--ServerApp.port") for a in lab_argv[1])  # Jupyter's 8888


@pytest.mark.skipif(os.name != "posix", reason="a terminal's Ctrl-C: POSIX")
def test_ctrl_c_stops_brrr_lab_and_its_kernels(tmp_path):
    """In a terminal, one Ctrl-C: JupyterLab shuts its kernels down and exits, leaving none."""
    import json
    import pty
    import urllib.request

    import psutil

    runtime = tmp_path / "runtime"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)}
    _, terminal = pty.openpty()  # stdin a terminal, as when a learner types brrr lab
    cmd = [sys.executable, "-m", "brrrlib", "lab", "--dir", str(tmp_path / "ws"), "--no-browser"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    brrr = subprocess.Popen(cmd, env=env, stdin=terminal, **quiet)
    try:
        deadline, kernel = time.monotonic() + 120, None
        while kernel is None:  # until JupyterLab answers
            assert time.monotonic() < deadline and brrr.poll() is None, "JupyterLab never answered"
            time.sleep(0.3)
            for found in runtime.glob("jpserver-*.json"):
                server = json.loads(found.read_text())
                url = f"{server['url']}api/kernels?token={server['token']}"
                with contextlib.suppress(OSError):
                    kernel = json.load(urllib.request.urlopen(url, b"{}", timeout=60))
        assert (runtime / f"kernel-{kernel['id']}.json").exists()
        started = psutil.Process(brrr.pid).children(recursive=True)
        brrr.send_signal(signal.SIGINT)
        assert brrr.wait(timeout=60) == 0
        assert not psutil.wait_procs(started, timeout=10)[1]  # nothing it started outlives it
        assert not list(runtime.glob("*.json"))  # the server's and the kernel's files removed
    finally:
        brrr.kill()


def test_lab_help_describes_every_flag_and_the_remote_case(capsys):
    with pytest.raises(SystemExit):
        cli.main(["lab", "--help"])
    text = capsys.readouterr().out
    for flag in ("--dir DIR", "--copy-only DIR", "--reset", "--no-browser", "--port PORT"):
        line = next(line for line in text.splitlines() if line.strip().startswith(flag))
        assert len(line.split(flag, 1)[1].split()) >= 3, f"{flag} has no description"
    assert "ssh -N -L 8888:127.0.0.1:8888" in text


_LINUX = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux's")


@pytest.mark.parametrize(
    "where",
    [
        pytest.param("/proc", marks=_LINUX),
        pytest.param("/proc/brrr-ws", marks=_LINUX),
        "{tmp}/afile",  # a file, not a folder
        "{tmp}/missing/ws",  # its parent does not exist
    ],
)
def test_lab_with_an_unusable_dir_names_it_in_one_line(lab_argv, tmp_path, capsys, where):
    (tmp_path / "afile").write_text("x")
    where = where.format(tmp=tmp_path)
    assert cli.main(["lab", "--dir", where]) == 2
    err = capsys.readouterr().err
    assert f"--dir {where}: " in err and "Traceback" not in err and err.count("\n") == 1
    assert lab_argv == []


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders"
)
def test_lab_in_a_read_only_folder_says_why(lab_argv, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    assert cli.main(["lab", "--dir", str(ro)]) == 2
    err = capsys.readouterr().err
    assert "--dir" in err and str(ro) in err and "Permission" in err


def test_lab_without_notebooks_exits_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "course_source", lambda: None)  # an install without the course
    assert cli.main(["lab", "--dir", str(tmp_path / "ws")]) == 2
    assert "notebooks" in capsys.readouterr().err


def test_course_source_finds_the_clones_course_folder():
    src = cli.course_source()
    assert src is not None and any(src.glob("*.ipynb"))


def test_lab_copy_only_copies_and_starts_nothing(lab_argv, tmp_path, monkeypatch, capsys):
    dest = tmp_path / "home" / "brrr-course"
    dest.parent.mkdir()
    monkeypatch.setitem(sys.modules, "jupyterlab", None)  # a hub's start hook needs no JupyterLab
    assert cli.main(["lab", "--copy-only", str(dest)]) == 0
    assert lab_argv == [] and any(dest.glob("*.ipynb"))
    out = capsys.readouterr().out
    copied, kept = _copied(out)
    assert str(dest) in out and copied > 0 and kept == 0
    (dest / "00_the_factory.ipynb").write_text('{"v":"edited"}')
    assert cli.main(["lab", "--copy-only", str(dest)]) == 0  # a start hook runs every time
    assert (dest / "00_the_factory.ipynb").read_text() == '{"v":"edited"}'
    assert _copied(capsys.readouterr().out) == (0, copied)


def test_lab_copy_only_names_its_own_option_when_the_folder_is_unusable(lab_argv, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert cli.main(["lab", "--copy-only", str(tmp_path / "afile")]) == 2
    err = capsys.readouterr().err
    assert "--copy-only" in err and str(tmp_path / "afile") in err and "--dir" not in err


def test_lab_takes_either_dir_or_copy_only(lab_argv, tmp_path):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lab", "--dir", str(tmp_path / "a"), "--copy-only", str(tmp_path / "b")])
    assert exc.value.code == 2 and lab_argv == []


def test_the_torch_floor_is_the_one_the_package_declares(monkeypatch):
    floor = re.search(r'"torch>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    major, minor = map(int, floor.split(".")[:2])
    monkeypatch.setattr(torch, "__version__", f"{floor}.0+cpu")
    assert torch_problem() is None
    monkeypatch.setattr(torch, "__version__", f"{major}.{minor - 1}.9+cu124")
    assert floor in torch_problem()
