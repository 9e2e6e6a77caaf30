"""Each chapter opens in Colab: its badge, its set-up cell, and the hub link agree with pyproject.

The set-up cell is run here twice, as IPython would run it (its ``%pip``
lines become ``run_line_magic`` calls): once as on any machine that is not
Colab, where it must do nothing but import the library, and once in a fake
Colab without the library, where it must install it (without touching
Colab's own Jupyter) and turn on the widget manager ipywidgets 8 needs there.
Colab itself cannot be reached from a test.
"""

from __future__ import annotations

import importlib.util
import re
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


def _run_setup(path: Path) -> tuple[_FakeIPython, dict]:
    """Run a chapter's set-up cell as IPython would, with the magics recorded."""
    cell = _cells(path)["colab-setup"]
    assert cell.cell_type == "code"
    shell = _FakeIPython()
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


def test_in_colab_the_setup_cell_installs_the_library_and_the_widget_manager(monkeypatch, capsys):
    calls = _fake_colab(monkeypatch)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(  # a fresh Colab runtime: no brrrlib yet
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "brrrlib" else real_find_spec(name, *a),
    )
    shell, _ = _run_setup(CHAPTERS[0])
    assert [name for name, _ in shell.magics] == ["pip", "pip"]
    deps, package = (line for _, line in shell.magics)
    assert '"ipywidgets>=8"' in deps and "torch" not in deps  # Colab's own torch (GPU) stays
    assert f'"brrrlib @ git+{SOURCE}"' in package
    assert "--no-deps" in package  # jupyterlab's deps would replace Colab's ipykernel
    assert calls == ["enable_custom_widget_manager"]


def test_in_colab_with_the_library_installed_the_cell_installs_nothing(monkeypatch):
    calls = _fake_colab(monkeypatch)
    shell, _ = _run_setup(CHAPTERS[0])
    assert shell.magics == [] and calls == ["enable_custom_widget_manager"]


def test_every_chapter_has_the_same_setup_cell():
    sources = {path.name: _cells(path)["colab-setup"].source for path in CHAPTERS}
    assert len(set(sources.values())) == 1, "the chapters' Colab set-up cells differ"


def test_the_colab_install_brings_what_the_library_imports_beyond_colab():
    """Colab has torch, numpy, matplotlib; the cell installs the rest of pyproject's runtime."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] for d in deps}
    line = next(line for line in _setup_source().splitlines() if "ipywidgets" in line)
    colab_has = {"torch", "numpy", "matplotlib", "jupyterlab"}  # jupyterlab: Colab is the UI
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
