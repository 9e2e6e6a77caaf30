"""Each chapter opens in Colab: its badge, its set-up cell, and the hub link agree with pyproject.

``.ci/colab_cells.py`` writes the badges (README and each chapter's first
cell), the set-up cells (each chapter's second cell) and INSTRUCTORS.md's
nbgitpuller link from pyproject.toml; ``--check`` here fails when any of them
disagrees. The set-up cell is run as IPython would run it (its ``%pip`` lines
become ``run_line_magic`` calls): on a machine that is not Colab, where it
must do nothing but import the library, and in fake Colabs: without the
library (it installs it, without touching Colab's own Jupyter), with an old
ipywidgets imported or not, a new one, and a torch older than the course's floor.
Colab itself cannot be reached from a test.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
import types
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "course").glob("0*.ipynb"))
SOURCE = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]
REPO = urllib.parse.urlsplit(SOURCE).path.strip("/")  # owner/name


def _generator():
    spec = importlib.util.spec_from_file_location("colab_cells", ROOT / ".ci" / "colab_cells.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_badges_setup_cells_and_hub_link_are_what_pyproject_says():
    run = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "colab_cells.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, f"{run.stdout}{run.stderr}"


def test_the_generator_writes_only_the_first_two_cells_and_is_idempotent(tmp_path, monkeypatch):
    gen = _generator()
    course = tmp_path / "course"
    course.mkdir()
    chapter = json.loads(CHAPTERS[0].read_text(encoding="utf-8"))
    chapter["cells"][0]["source"] = ["[![Open In Colab](x.svg)](https://example.org/old)"]
    chapter["cells"][1]["source"] = ["import brrrlib as bl"]
    (course / "03_x.ipynb").write_text(json.dumps(chapter, indent=1) + "\n", encoding="utf-8")
    new = {  # a new chapter, without the two cells: they are put on top
        "cells": [
            {"cell_type": "markdown", "id": "07-00", "metadata": {}, "source": ["# 07 · New"]}
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (course / "07_new.ipynb").write_text(json.dumps(new, indent=1) + "\n", encoding="utf-8")
    monkeypatch.setattr(gen, "COURSE", course)
    first = {p.name: gen.render_notebook(p) for p in gen.chapters()}
    assert sorted(first) == ["03_x.ipynb", "07_new.ipynb"]
    for name, text in first.items():
        (course / name).write_text(text, encoding="utf-8")
        assert gen.render_notebook(course / name) == text  # idempotent
    rewritten = json.loads(first["03_x.ipynb"])
    assert rewritten["cells"][2:] == chapter["cells"][2:]  # every other cell as it was
    assert gen.colab_url("03_x.ipynb") in "".join(rewritten["cells"][0]["source"])
    six = json.loads(first["07_new.ipynb"])
    assert [c["id"] for c in six["cells"]] == ["colab-badge", "colab-setup", "07-00"]
    readme = gen.render_readme(ROOT / "README.md")  # the README gains a row for it
    assert f"| `course/07_new.ipynb` | New | {gen.badge_markdown('07_new.ipynb')} |" in (readme)


def _cells(path: Path) -> dict[str, nbformat.NotebookNode]:
    return {cell.id: cell for cell in nbformat.read(path, as_version=4).cells}


def test_the_repository_is_on_github():
    assert SOURCE.startswith("https://github.com/") and REPO.count("/") == 1


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_badge_opens_this_chapter_in_colab(path):
    badge = _cells(path)["colab-badge"]
    assert badge.cell_type == "markdown"
    target = f"https://colab.research.google.com/github/{REPO}/blob/main/course/{path.name}"
    assert f"]({target})" in badge.source
    assert "colab-badge.svg" in badge.source


class _FakeIPython:
    """Records the magics a cell runs instead of running them."""

    def __init__(self) -> None:
        self.magics: list[tuple[str, str]] = []

    def run_line_magic(self, name: str, line: str) -> None:
        self.magics.append((name, line))


def _run_setup(path: Path, shell: _FakeIPython | None = None) -> tuple[_FakeIPython, dict]:
    """Run a chapter's set-up cell as IPython would, with the magics recorded."""
    cell = _cells(path)["colab-setup"]
    assert cell.cell_type == "code"
    shell = shell or _FakeIPython()
    code = TransformerManager().transform_cell(cell.source)
    namespace = {"get_ipython": lambda: shell}
    exec(compile(code, f"{path.name}:colab-setup", "exec"), namespace)
    return shell, namespace


def _setup_source() -> str:
    return _cells(CHAPTERS[0])["colab-setup"].source


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_outside_colab_the_setup_cell_only_imports_the_library(path, monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    shell, namespace = _run_setup(path)
    assert shell.magics == []  # nothing installed
    assert namespace["bl"].__name__ == "brrrlib"
    assert capsys.readouterr().out.startswith("brrrlib ")


def _fake_colab(monkeypatch) -> list[str]:
    calls: list[str] = []
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("enable_custom_widget_manager")
    colab = types.ModuleType("google.colab")
    colab.output = output
    google = types.ModuleType("google")
    google.colab = colab
    for name, module in {
        "google": google,
        "google.colab": colab,
        "google.colab.output": output,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    return calls


def _colab_with(monkeypatch, ipywidgets: str, imported: bool, torch_version: str | None = None):
    """A fake Colab runtime: no brrrlib yet, Colab's ipywidgets (imported or not), its torch."""
    calls = _fake_colab(monkeypatch)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "brrrlib" else real_find_spec(name, *a),
    )
    installed = {"ipywidgets": ipywidgets}
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: installed.get(name) or real_version(name)
    )
    if not imported:
        monkeypatch.delitem(sys.modules, "ipywidgets", raising=False)
    if torch_version:
        import torch

        monkeypatch.setattr(torch, "__version__", torch_version)
    return calls, installed


def test_in_colab_the_setup_cell_installs_the_library_and_keeps_colabs_jupyter(monkeypatch):
    calls, _ = _colab_with(monkeypatch, ipywidgets="8.1.5", imported=False)
    shell, _ = _run_setup(CHAPTERS[0])
    assert [name for name, _ in shell.magics] == ["pip", "pip"]
    deps, package = (line for _, line in shell.magics)
    assert "psutil" in deps and "platformdirs" in deps and "torch" not in deps
    assert f'"brrrlib @ git+{SOURCE}"' in package
    assert "--no-deps" in package  # jupyterlab's deps would replace Colab's ipykernel
    assert calls == ["enable_custom_widget_manager"]  # ipywidgets 8 draws through it


def test_in_colab_an_old_ipywidgets_not_yet_imported_is_upgraded(monkeypatch):
    calls, installed = _colab_with(monkeypatch, ipywidgets="7.7.1", imported=False)
    shell = _FakeIPython()

    def pip(name, line):  # the upgrade lands: importlib.metadata then reads 8
        shell.magics.append((name, line))
        if "ipywidgets" in line:
            installed["ipywidgets"] = "8.1.5"

    shell.run_line_magic = pip
    _run_setup(CHAPTERS[0], shell)
    assert any('"ipywidgets>=8"' in line for _, line in shell.magics)
    assert calls == ["enable_custom_widget_manager"]


def test_in_colab_an_old_ipywidgets_already_imported_asks_for_a_restart(monkeypatch):
    # upgrading a module already imported changes nothing until the session restarts
    calls, _ = _colab_with(monkeypatch, ipywidgets="7.7.1", imported=True)
    import ipywidgets  # noqa: F401

    with pytest.raises(RuntimeError, match="Restart session"):
        _run_setup(CHAPTERS[0])
    assert calls == []


def test_in_colab_a_new_enough_ipywidgets_is_kept(monkeypatch):
    calls, _ = _colab_with(monkeypatch, ipywidgets="8.1.5", imported=True)
    shell, _ = _run_setup(CHAPTERS[0])
    assert not any("ipywidgets" in line for _, line in shell.magics)
    assert calls == ["enable_custom_widget_manager"]


def test_in_colab_a_torch_below_the_floor_stops_with_what_to_do(monkeypatch):
    _colab_with(monkeypatch, ipywidgets="8.1.5", imported=False, torch_version="2.9.1+cu126")
    floor = re.search(r'"torch>=([\d.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    with pytest.raises(
        RuntimeError, match=rf"torch 2\.9\.1\+cu126; the course needs torch {floor}"
    ):
        _run_setup(CHAPTERS[0])


def test_in_colab_with_the_library_installed_the_cell_installs_nothing(monkeypatch):
    calls = _fake_colab(monkeypatch)
    shell, _ = _run_setup(CHAPTERS[0])
    assert shell.magics == [] and calls == ["enable_custom_widget_manager"]


def test_every_chapter_has_the_same_setup_cell():
    sources = {path.name: _cells(path)["colab-setup"].source for path in CHAPTERS}
    assert len(set(sources.values())) == 1, "the chapters' Colab set-up cells differ"


def test_the_colab_install_brings_what_the_library_imports_beyond_colab():
    """Colab has torch, numpy, matplotlib, ipywidgets; the cell installs the rest of pyproject's."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] for d in deps}
    line = next(line for line in _setup_source().splitlines() if "psutil" in line)
    colab_has = {"torch", "numpy", "matplotlib", "jupyterlab", "ipywidgets"}  # jupyterlab: the UI
    assert {n for n in names - colab_has if n not in line} == set()


def test_the_nbgitpuller_link_opens_a_chapter_of_this_repository():
    text = (ROOT / "course" / "INSTRUCTORS.md").read_text()
    link = re.search(r"https://\S+/hub/user-redirect/git-pull\?\S+", text)
    assert link, "INSTRUCTORS.md has no nbgitpuller link"
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(link.group(0)).query)
    assert query["repo"] == [SOURCE] and query["branch"] == ["main"]
    folder = REPO.split("/")[1]  # nbgitpuller clones into a folder named after the repository
    urlpath = query["urlpath"][0]
    assert urlpath.startswith(f"lab/tree/{folder}/")
    assert (ROOT / urlpath.removeprefix(f"lab/tree/{folder}/")).is_file(), urlpath
