"""Every course notebook is committed clean: valid nbformat, no outputs, no execution counts.

Why clean: outputs are machine-specific measurements (an H100's numbers would
look wrong on a laptop), they bloat diffs, and a learner should see a cell's
result appear when *they* run it.

Why no ``nbval-check-output`` tags either: nbval compares a tagged cell's new
outputs with the outputs stored in the notebook, but only for cells that were
run when saved. A stripped cell has ``execution_count: null``, and nbval skips
the comparison for such "unrun reference" cells (``nbval/plugin.py``:
``unrun = self.cell.execution_count is None``; ``if self.options['check'] and
not unrun: compare_outputs(...)``). So with stripped notebooks a tag would
check nothing while looking as if it did. Deterministic cells in the course
``assert`` their computed values instead; nbval runs every cell
(``--nbval-lax``) and fails on any exception, so those asserts are checked.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

COURSE = Path(__file__).resolve().parent.parent / "course"
NOTEBOOKS = sorted(p for p in COURSE.glob("**/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def test_course_has_notebooks():
    assert NOTEBOOKS, f"no notebooks found under {COURSE}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(COURSE)))
def test_notebook_is_valid_and_stripped(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # raises nbformat.ValidationError with the offending field
    dirty = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            dirty.append(f"cell {i}: has {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            dirty.append(f"cell {i}: execution_count={cell.execution_count}")
        if "nbval-check-output" in cell.metadata.get("tags", ()):
            dirty.append(f"cell {i}: tagged nbval-check-output (use an assert instead)")
    assert "widgets" not in nb.metadata, (
        f"{path.name} stores widget state in its metadata: delete metadata['widgets'] "
        "(and turn off Settings > Save Widget State Automatically in JupyterLab)"
    )
    assert not dirty, (
        f"{path.name} is not stripped: " + "; ".join(dirty) + ". Clear it with "
        "`jupyter nbconvert --clear-output --inplace " + str(path.relative_to(COURSE.parent)) + "`"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(COURSE)))
def test_notebook_opens_with_the_one_import(path):
    """Like d2l: the first code cell imports the library as ``bl``; no path hacks anywhere."""
    nb = nbformat.read(path, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    assert "import brrrlib as bl" in code[0].splitlines(), (
        f"{path.name}: the first code cell must contain the line `import brrrlib as bl`"
    )
    hacks = [i for i, src in enumerate(code) if "sys.path" in src]
    assert not hacks, f"{path.name}: code cells {hacks} edit sys.path; install the package instead"


_DRAWS = re.compile(r"\.plot\(|\bfigures\.|plt\.show\(|_explorer\(|plot_reports\(")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(COURSE)))
def test_every_figure_cell_carries_an_alt_text(path):
    # the static site shows each figure with the cell's ``mystnb.image.alt``: a sentence
    # saying what the figure shows, for readers who cannot see it
    nb = nbformat.read(path, as_version=4)
    missing = [
        cell.get("id", i)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        and _DRAWS.search(cell.source)
        and len(cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "").split()) < 8
    ]
    assert not missing, f"figure cells without an alt text: {missing}"
