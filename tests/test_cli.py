"""The brrr console script: doctor, diagnose (bl.diagnose monkeypatched), lab (copy logic only)."""

import io
import sys
import textwrap

import pytest
import torch

import brrrlib
from brrrlib import cli

# ------------------------------------------------------------------ main ---


def test_no_command_prints_help_and_returns_2(capsys):
    assert cli.main([]) == 2
    assert "doctor" in capsys.readouterr().out


def test_unknown_command_exits_with_usage():
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


# ---------------------------------------------------------------- doctor ---


def _doctor(**kw):
    out = io.StringIO()
    code = cli.doctor(out=out, **kw)
    return code, out.getvalue()


def test_doctor_passes_on_this_environment(measured_ceilings):
    code, text = _doctor(quick=True)
    assert code == 0, text
    for section in ("Python and packages", "Device", "Ceilings", "Course notebooks"):
        assert section in text
    assert f"torch {torch.__version__}" in text
    assert measured_ceilings.nearest_spec().name + " (spec)" in text
    assert "00_the_factory.ipynb: can run" in text
    assert "FAIL" not in text and "all good" in text


def test_doctor_fails_with_advice_when_a_package_is_missing(measured_ceilings, monkeypatch):
    real = cli._version
    monkeypatch.setattr(cli, "_version", lambda name: None if name == "ipywidgets" else real(name))
    code, text = _doctor(quick=True)
    assert code == 1
    assert "FAIL  ipywidgets is not installed" in text and "pip install ipywidgets" in text


def test_doctor_reports_a_broken_torch_compile(measured_ceilings, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("InductorError: no C++ compiler found")

    monkeypatch.setattr(torch, "compile", broken)
    code, text = _doctor()
    assert code == 1
    assert "torch.compile failed: RuntimeError" in text and "build-essential" in text
    # chapters that use torch.compile are flagged, the others still run
    assert "03_overhead.ipynb: uses torch.compile, which fails here" in text
    assert "00_the_factory.ipynb: can run" in text


def test_doctor_reports_a_bad_brrr_device(measured_ceilings, monkeypatch):
    monkeypatch.setenv("BRRR_DEVICE", "tpu")
    code, text = _doctor(quick=True)
    assert code == 1 and "BRRR_DEVICE='tpu'" in text and "unset" in text


def test_doctor_without_course_notebooks_fails(measured_ceilings, monkeypatch):
    monkeypatch.setattr(cli, "course_source", lambda: None)
    code, text = _doctor(quick=True)
    assert code == 1 and "course notebooks not found" in text


def test_notebook_imports_are_found_by_parsing_code_cells():
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["%matplotlib inline\n", "import torch, numpy as np\n"],
            },
            {"cell_type": "code", "source": "from brrrlib import figures\nfrom . import x\n"},
            {"cell_type": "markdown", "source": "import not_code"},
            {"cell_type": "code", "source": "this is ( not python"},
        ]
    }
    assert cli._notebook_imports(nb) == {"torch", "numpy", "brrrlib"}


# -------------------------------------------------------------- diagnose ---


class _FakeDiagnosis:
    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __repr__(self):
        return f"FakeDiagnosis({getattr(self.fn, '__name__', type(self.fn).__name__)}, {len(self.args)} args, {sorted(self.kwargs)})"


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A temporary cwd with sys.path/sys.modules restored afterwards, and a fake bl.diagnose."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    seen = []

    def fake_diagnose(fn, *args, **kwargs):
        seen.append((fn, args, kwargs))
        return _FakeDiagnosis(fn, args, kwargs)

    monkeypatch.setattr(brrrlib, "diagnose", fake_diagnose)
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
    assert "FakeDiagnosis(mm, 2 args, [])" in capsys.readouterr().out
    assert cli.main(["diagnose", "wl_pair.py:with_kwargs"]) == 0  # a file path works too
    assert seen[-1][2] == {"dim": 0}


def test_diagnose_module_instance_and_function_with_example_inputs(workspace, capsys):
    tmp, seen = workspace
    _write(
        tmp / "wl_model.py",
        """
        import torch
        model = torch.nn.Linear(4, 2)
        def forward(x, y):
            return x + y
        example_inputs = (torch.ones(3, 4),)
        """,
    )
    assert cli.main(["diagnose", "wl_model:model"]) == 0
    assert isinstance(seen[-1][0], torch.nn.Linear) and seen[-1][1][0].shape == (3, 4)
    assert cli.main(["diagnose", "wl_model:forward"]) == 0
    assert seen[-1][0].__name__ == "forward"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_colon_here", "must look like MODULE:NAME"),
        ("wl_missing_module:fn", "cannot import 'wl_missing_module'"),
        ("wl_bad:nothing", "has no 'nothing'"),
        ("wl_bad:returns_one", "must return (fn, args)"),
        ("wl_bad:not_callable", "not a callable"),
        ("wl_bad:first_not_callable", "must be callable"),
        ("wl_bad:raises", "raised ZeroDivisionError"),
        ("wl_bad:needs_args", "define `example_inputs"),
        ("wl_broken:fn", "cannot import 'wl_broken': NameError"),
        ("nowhere/file.py:fn", "no such file"),
    ],
)
def test_diagnose_bad_targets_exit_2_with_a_clear_message(workspace, capsys, target, message):
    tmp, seen = workspace
    _write(
        tmp / "wl_bad.py",
        """
        import torch
        def returns_one():
            return torch.mm
        not_callable = 3
        def first_not_callable():
            return 3, ()
        def raises():
            return 1 / 0
        def needs_args(x):
            return x
        """,
    )
    _write(tmp / "wl_broken.py", "undefined_name\n")
    assert cli.main(["diagnose", target]) == 2
    assert message in capsys.readouterr().err
    assert seen == []


# ------------------------------------------------------------------- lab ---


@pytest.fixture
def course(tmp_path):
    src = tmp_path / "course"
    (src / "instructor").mkdir(parents=True)
    (src / ".ipynb_checkpoints").mkdir()
    (src / "00_a.ipynb").write_text('{"v": 1}')
    (src / "01_b.ipynb").write_text('{"v": 1}')
    (src / "instructor" / "answers.ipynb").write_text('{"answers": 1}')
    (src / ".ipynb_checkpoints" / "00_a-checkpoint.ipynb").write_text("old")
    return src


def test_copy_course_copies_missing_files_and_never_overwrites(course, tmp_path):
    dest = tmp_path / "ws"
    first = cli.copy_course(course, dest)
    assert sorted(first.copied) == ["00_a.ipynb", "01_b.ipynb", "instructor/answers.ipynb"]
    assert not (dest / ".ipynb_checkpoints").exists()
    (dest / "00_a.ipynb").write_text('{"v": "my edits"}')
    (dest / "01_b.ipynb").unlink()
    second = cli.copy_course(course, dest)
    assert second.copied == ("01_b.ipynb",)
    assert "00_a.ipynb" in second.kept
    assert (dest / "00_a.ipynb").read_text() == '{"v": "my edits"}'


def test_copy_course_reset_backs_up_edited_files(course, tmp_path):
    dest = tmp_path / "ws"
    cli.copy_course(course, dest)
    (dest / "00_a.ipynb").write_text('{"v": "my edits"}')
    report = cli.copy_course(course, dest, reset=True)
    assert report.backed_up == ("00_a.ipynb",)
    assert (dest / "00_a.ipynb").read_text() == '{"v": 1}'
    assert (report.backup_dir / "00_a.ipynb").read_text() == '{"v": "my edits"}'
    assert "01_b.ipynb" in report.kept  # unchanged files are not backed up


def test_copy_course_rejects_bad_folders(course, tmp_path):
    with pytest.raises(ValueError, match="source="):
        cli.copy_course(tmp_path / "nope", tmp_path / "ws")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="dest="):
        cli.copy_course(course, tmp_path / "afile")


def test_lab_copies_then_runs_jupyter_lab_with_this_python(course, tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(cli, "course_source", lambda: course)
    monkeypatch.setattr(cli.subprocess, "call", lambda cmd, cwd: calls.append((cmd, cwd)) or 0)
    dest = tmp_path / "ws"
    assert cli.main(["lab", "--dir", str(dest), "--no-browser", "--port", "8899"]) == 0
    (cmd, cwd) = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "jupyter", "lab"]
    assert "--no-browser" in cmd and "--port=8899" in cmd and cwd == dest
    assert (dest / "00_a.ipynb").exists()
    assert "copied 3 file(s)" in capsys.readouterr().out


def test_lab_allows_root_only_when_running_as_root(tmp_path):
    assert "--allow-root" in cli._lab_command(tmp_path, True, None, as_root=True)
    assert "--allow-root" not in cli._lab_command(tmp_path, True, None, as_root=False)


def test_lab_without_notebooks_exits_2(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "course_source", lambda: None)
    assert cli.main(["lab", "--dir", str(tmp_path / "ws")]) == 2
    assert "not found" in capsys.readouterr().err


def test_course_source_finds_the_clones_course_folder():
    src = cli.course_source()
    assert src is not None and any(src.glob("*.ipynb"))
