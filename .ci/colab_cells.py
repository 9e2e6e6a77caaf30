"""Write the Colab badges and set-up cells from pyproject.toml, the repository URL's one home.

Usage (from the repository root)::

    python .ci/colab_cells.py            # rewrite what disagrees with pyproject.toml
    python .ci/colab_cells.py --check    # only say what disagrees; exit 1 if anything does

What it writes, all from ``[project.urls] Source`` and ``dependencies``:

* every chapter ``course/NN_*.ipynb``: its first cell, the Colab badge (id
  ``colab-badge``), and its second, the set-up cell (id ``colab-setup``),
  which in Colab checks torch against the floor (``torch>=X``), installs
  the library and what Colab lacks (ipywidgets only where Colab's is older
  than pyproject's floor), and turns on the widget manager. Only
  those two cells are touched (inserted at the top if a new chapter lacks
  them); every other cell stays byte for byte as it was;
* README.md's chapter table: each row's badge, and a row for a chapter that
  has none (its title as the description, to be edited by hand);
* the nbgitpuller link in course/INSTRUCTORS.md, and CITATION.cff's
  ``repository-code``.

Running it twice changes nothing the second time. tests/test_colab.py runs
``--check``: a badge, set-up cell or link that disagrees with pyproject.toml
fails the tests. After changing the URL or the torch floor, run it and commit
what it wrote.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.parse
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "course"
BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"
# What a Colab runtime already has, of pyproject's runtime dependencies (jupyterlab: Colab is
# the interface). The set-up cell installs the rest; ipywidgets only where Colab's is older.
COLAB_HAS = {"torch", "numpy", "matplotlib", "jupyterlab", "ipywidgets"}
# (ipywidgets: Colab ships 7, which draws progress bars but not the explorers, whose
# display needs ipywidgets 8's Widget._repr_mimebundle_; the cell upgrades an older one.)


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def source_url() -> str:
    """pyproject's ``[project.urls] Source``: https://github.com/OWNER/NAME."""
    url = project()["urls"]["Source"].rstrip("/")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        sys.exit(f"pyproject.toml's Source {url!r} is not https://github.com/OWNER/NAME")
    return url


def _requirement(name: str) -> str:
    """pyproject's runtime requirement for ``name`` (``ipywidgets>=8``)."""
    return next(d for d in project()["dependencies"] if re.match(rf"{name}\b", d))


def chapters() -> list[Path]:
    """Every chapter: ``course/NN_*.ipynb``."""
    return sorted(p for p in COURSE.glob("*.ipynb") if re.match(r"\d\d_", p.name))


def colab_url(notebook: str) -> str:
    """The address that opens ``course/<notebook>`` of the main branch in Colab."""
    repo = urllib.parse.urlsplit(source_url()).path.strip("/")
    return f"https://colab.research.google.com/github/{repo}/blob/main/course/{notebook}"


def badge_markdown(notebook: str) -> str:
    return f"[![Open In Colab]({BADGE_SVG})]({colab_url(notebook)})"


def badge_cell_source(notebook: str) -> str:
    return (
        f"{badge_markdown(notebook)}\n\n"
        "In Colab, choose *Runtime > Change runtime type > T4 GPU* to run the GPU cells "
        "too; the first code cell below installs the course library there. On your own "
        "machine, follow the README instead."
    )


def setup_cell_source() -> str:
    """The set-up cell: in Colab, check torch, install the library, widgets; then import."""
    floor = re.search(r">=\s*([\d.]+)", _requirement("torch")).group(1)
    widgets = re.search(r">=\s*([\d.]+)", _requirement("ipywidgets")).group(1)
    rest = sorted(
        re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]
        for d in project()["dependencies"]
        if re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] not in COLAB_HAS
    )
    floor_tuple = ", ".join(floor.split("."))
    return f"""# Setup. In Google Colab this checks Colab's torch, installs the course library (once
# per session) and lets Colab draw the course's widgets. Anywhere else it only imports
# the library. (Written by .ci/colab_cells.py from pyproject.toml: edit it there.)
import sys

if "google.colab" in sys.modules:
    from importlib.metadata import version
    from importlib.util import find_spec

    import torch

    if tuple(map(int, torch.__version__.split("+")[0].split(".")[:2])) < ({floor_tuple}):
        raise RuntimeError(
            f"This Colab runtime has torch {{torch.__version__}}; the course needs torch {floor} "
            "or newer. Choose the latest runtime version (Runtime > Change runtime type), or "
            "run `%pip install -U torch` in a new cell and then Runtime > Restart session; "
            "then run this cell again."
        )
    if find_spec("brrrlib") is None:
        # Colab has torch, numpy and matplotlib; --no-deps keeps its own Jupyter
        %pip install -q {" ".join(rest)}
        %pip install -q --no-deps "brrrlib @ git+{source_url()}"
    # The course's sliders need ipywidgets {widgets}, drawn in Colab by its custom widget manager;
    # Colab's own ipywidgets is kept where it is new enough.
    if int(version("ipywidgets").split(".")[0]) < {widgets}:
        %pip install -q "ipywidgets>={widgets}"
        if "ipywidgets" in sys.modules:  # the old one is loaded: only a restart loads the new
            raise RuntimeError(
                "ipywidgets was upgraded for the course's sliders: choose Runtime > Restart "
                "session, then run this cell again."
            )
    from google.colab import output

    output.enable_custom_widget_manager()

import brrrlib as bl

print(f"brrrlib {{bl.__version__}}, Python {{sys.version.split()[0]}}")"""


def _lines(text: str) -> list[str]:
    """A cell's source as nbformat stores it: lines that keep their newlines."""
    return text.splitlines(keepends=True)


def render_notebook(path: Path) -> str:
    """The notebook with the badge and the set-up cell as its first two cells, as text."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    wanted = [
        ("colab-badge", "markdown", badge_cell_source(path.name)),
        ("colab-setup", "code", setup_cell_source()),
    ]
    for index, (cell_id, kind, source) in enumerate(wanted):
        cell = next((c for c in cells if c.get("id") == cell_id), None)
        if cell is None:
            cell = {"cell_type": kind, "id": cell_id, "metadata": {}, "source": []}
            if kind == "code":
                cell.update(execution_count=None, outputs=[])
        else:
            cells.remove(cell)
        cell["source"] = _lines(source)
        cells.insert(index, cell)
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _title(path: Path) -> str:
    """A chapter's title without its number: the first ``# NN · Title`` heading."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        match = re.search(r"^# (?:\d\d\s*·\s*)?(.+)$", "".join(cell["source"]), re.M)
        if cell["cell_type"] == "markdown" and match:
            return match.group(1).strip()
    return path.stem


_ROW = re.compile(r"^\| `course/(\d\d_[\w-]+\.ipynb)` \|(.*)\|\s*$")


def render_readme(path: Path) -> str:
    """README with each chapter row's badge from pyproject, and a row for a chapter without one."""
    lines = path.read_text(encoding="utf-8").split("\n")
    rows = {m.group(1): i for i, line in enumerate(lines) if (m := _ROW.match(line))}
    if not rows:
        sys.exit(f"{path.name} has no chapter table (rows start with | `course/NN_...ipynb` |)")
    for name, i in rows.items():
        middle = _ROW.match(lines[i]).group(2).rsplit("|", 1)[0]  # the description
        lines[i] = f"| `course/{name}` |{middle}| {badge_markdown(name)} |"
    last = max(rows.values())
    for chapter in chapters():
        if chapter.name not in rows:
            last += 1
            row = (
                f"| `course/{chapter.name}` | {_title(chapter)} | {badge_markdown(chapter.name)} |"
            )
            lines.insert(last, row)
    return "\n".join(lines)


def render_hub_link(path: Path) -> str:
    """INSTRUCTORS.md with its nbgitpuller example link for this repository."""
    raw = path.read_text(encoding="utf-8")
    source = source_url()
    folder = source.rsplit("/", 1)[1]  # nbgitpuller clones into a folder named as the repository

    def link(match: re.Match) -> str:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(match.group(0)).query)
        notebook = query.get("urlpath", ["/course/00_the_factory.ipynb"])[0].split("/course/", 1)
        params = {
            "repo": source,
            "branch": "main",
            "urlpath": f"lab/tree/{folder}/course/{notebook[-1]}",
        }
        return f"{match.group(1)}/hub/user-redirect/git-pull?{urllib.parse.urlencode(params)}"

    return re.sub(r"(https://[^/\s]+)/hub/user-redirect/git-pull\?\S+", link, raw)


def render_citation(path: Path) -> str:
    """CITATION.cff with ``repository-code`` set to pyproject's Source."""
    raw = path.read_text(encoding="utf-8")
    return re.sub(r'^repository-code: ".*"$', f'repository-code: "{source_url()}"', raw, flags=re.M)


def stale_files() -> dict[Path, str]:
    """Every file this script writes whose text differs from what it would write: path -> text."""
    targets = [
        *((path, render_notebook) for path in chapters()),
        (ROOT / "README.md", render_readme),
        (COURSE / "INSTRUCTORS.md", render_hub_link),
        (ROOT / "CITATION.cff", render_citation),
    ]
    stale = {}
    for path, render in targets:
        text = render(path)
        if text != path.read_text(encoding="utf-8"):
            stale[path] = text
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 on a difference")
    opts = p.parse_args(argv)
    stale = stale_files()
    for path, text in stale.items():
        if not opts.check:
            path.write_text(text, encoding="utf-8")
        verb = "disagrees with pyproject.toml" if opts.check else "rewritten from pyproject.toml"
        print(f"{path.relative_to(ROOT).as_posix()}: {verb}")
    if opts.check and stale:
        print("run `python .ci/colab_cells.py` and commit what it writes", file=sys.stderr)
    return 1 if opts.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
