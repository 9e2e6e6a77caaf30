"""Sphinx configuration for the course site (built by docs/build.py, not by sphinx-build directly).

The pages are the course itself: docs/build.py stages the chapters, the
instructors' guide and the pages in this folder into one source tree and
executes every chapter on the machine that builds. That execution is the
site's *reference run*; its label (device, date, torch version, ...) is
computed here and shown at the top of every page. The recorded GPU runs
(``brrrlib/recordings/*/notebooks``) are staged beside it as they ran, each
page labelled with its device, date and commit, and each chapter shows a tab
for every run recorded of it.

The theme is the Jupyter Book one (sphinx-book-theme): the launch buttons
(Colab; a JupyterHub through nbgitpuller when docs/build.py is given
``--hub``), a download button for each notebook, a light/dark switch, and
sphinx-copybutton's copy button on every code cell. The repository URL comes
from pyproject.toml's ``[project.urls] Source``, its one home.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import brrrlib

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
RECORDINGS = ROOT / "brrrlib" / "recordings"
SOURCE_URL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"]

project = "brrr: making deep learning go brrrr, measured"
author = "The brrr course authors"
copyright = f"{datetime.date.today().year}, {author} (MIT License)"
release = version = brrrlib.__version__

extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx_copybutton"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["site.css"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "jupyter_execute"]
suppress_warnings = ["mystnb.unknown_mime_type"]  # widget views: they need a live kernel

# --- notebooks: docs/build.py has executed them; Sphinx only renders --------------------
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# --- copy buttons: the code without prompts or outputs ----------------------------------
copybutton_exclude = ".linenos, .gp, .go"
copybutton_selector = "div.cell_input pre, div.highlight pre"

# --- theme ---------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "brrr"
html_show_sourcelink = False
html_theme_options = {
    "repository_url": SOURCE_URL,
    "repository_branch": "main",
    "path_to_docs": "course",  # where the chapters are in the repository: launch links
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "navbar_persistent": [],  # the search field is in the sidebar: no header bar above it
    "launch_buttons": {
        "colab_url": "https://colab.research.google.com",
        "notebook_interface": "jupyterlab",
        # docs/build.py --hub URL (or BRRR_HUB_URL): an nbgitpuller link per chapter
        "jupyterhub_url": os.environ.get("BRRR_HUB_URL", "").rstrip("/"),
    },
}


def _commit() -> str:
    """The checkout's commit; ``+changes`` when the working tree differs from it."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "describe", "--always", "--dirty=+changes"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def reference_run() -> str:
    """One line naming the run whose outputs the pages show: device, date, versions."""
    import torch

    from brrrlib import machine

    dev = machine.device()
    threads = f", {torch.get_num_threads()} threads" if dev.type == "cpu" else ""
    when = os.environ.get("BRRR_SITE_DATE") or datetime.date.today().isoformat()
    return (
        f"{dev.type}: {machine.device_name(dev)}{threads} · {when} · torch {torch.__version__} "
        f"· brrrlib {brrrlib.__version__} · Python {platform.python_version()} "
        f"· commit {_commit()}"
    )


def recorded_runs() -> dict[str, dict]:
    """Each recorded run's label (its ``run.json``) and pages, by folder name."""
    runs = {}
    for label_file in sorted(RECORDINGS.glob("*/notebooks/run.json")):
        run = label_file.parent.parent.name
        label = json.loads(label_file.read_text(encoding="utf-8"))
        stems = sorted(p.stem for p in label_file.parent.glob("*.ipynb"))
        runs[run] = {**label, "pages": {stem: f"recordings/{run}/{stem}" for stem in stems}}
        runs[run]["unchanged"] = [s for s in stems if _unchanged_since(label.get("commit"), s)]
    return runs


def _unchanged_since(commit: str | None, stem: str) -> bool:
    """Whether the course's notebook ``stem`` is as it was at ``commit`` (False if unknown)."""
    found = [*(ROOT / "course").glob(f"{stem}.ipynb"), *(ROOT / "course").glob(f"*/{stem}.ipynb")]
    if not commit or not found:
        return False
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "diff", "--quiet", commit, "--", str(found[0])],
            capture_output=True,
            timeout=10,
        )
    except OSError:
        return False
    return out.returncode == 0


def _tabs(runs: dict[str, dict]) -> dict[str, list[dict]]:
    """For every page with a recording (the chapter, and each recording of it): its tabs."""
    chapters = {p.stem: p.relative_to(ROOT / "course").with_suffix("").as_posix()
                for p in (ROOT / "course").rglob("*.ipynb")}  # fmt: skip
    tabs: dict[str, list[dict]] = {}
    for stem, chapter in chapters.items():
        recorded = [(run, r) for run, r in runs.items() if stem in r["pages"]]
        if not recorded:
            continue
        row = [{"page": chapter, "text": "Reference run (this site's build)", "kind": "reference"}]
        row += [
            {
                "page": r["pages"][stem],
                "text": f"Recorded on an {r['device_short']}, {r['date']}",
                "kind": "recorded",
            }
            for _run, r in recorded
        ]
        for tab in row:
            tabs[tab["page"]] = row
    return tabs


RUNS = recorded_runs()
html_context = {
    "reference_run": reference_run(),
    # page name -> the recorded run it shows (its run.json)
    "recording_of_page": {
        page: label for label in RUNS.values() for page in label["pages"].values()
    },
    "run_tabs": _tabs(RUNS),
}


def _recording_pages_launch_nothing(app, pagename, templatename, context, doctree):
    """A recorded run is a record of an older commit: no launch buttons (it would not run)."""
    if pagename in html_context["recording_of_page"]:
        buttons = context.get("header_buttons", [])
        buttons[:] = [b for b in buttons if b.get("label") != "launch-buttons"]


def setup(app):
    # after the theme has made its buttons (it adds the launch buttons at priority 501)
    app.connect("html-page-context", _recording_pages_launch_nothing, priority=900)
