"""Sphinx configuration for the course site (built by docs/build.py, not by sphinx-build directly).

The pages are the course itself: docs/build.py stages the chapters, the
instructors' guide and the pages in this folder into one source tree, and
myst-nb executes every notebook while building, on the machine that builds.
That execution is the site's *reference run*; its label (device, date, torch
version, ...) is computed here and shown at the top of every page.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

import brrrlib

ROOT = Path(__file__).resolve().parents[1]

project = "brrr: making deep learning go brrrr, measured"
author = "The brrr course authors"
copyright = f"{datetime.date.today().year}, {author} (MIT License)"
release = version = brrrlib.__version__

extensions = ["myst_nb", "sphinx.ext.mathjax"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["site.css"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "jupyter_execute"]
suppress_warnings = ["mystnb.unknown_mime_type"]  # widget views: they need a live kernel

# --- notebooks: executed at build time, every cell, errors fail the build --------------
nb_execution_mode = "force"
nb_execution_timeout = 600  # seconds per cell; the slowest measure for about a minute
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# --- theme -------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = "brrr"
html_theme_options = {
    "description": "Compute, memory bandwidth or overhead: measured on your own machine.",
    "page_width": "1180px",
    "sidebar_width": "240px",
    "fixed_sidebar": True,
    "show_relbars": True,
}
html_sidebars = {"**": ["about.html", "navigation.html", "relations.html", "searchbox.html"]}
html_show_sourcelink = False


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

    from brrrlib import devices

    dev = devices.device()
    threads = f", {torch.get_num_threads()} threads" if dev.type == "cpu" else ""
    when = os.environ.get("BRRR_SITE_DATE") or datetime.date.today().isoformat()
    return (
        f"{dev.type}: {devices.device_name(dev)}{threads} · {when} · torch {torch.__version__} "
        f"· brrrlib {brrrlib.__version__} · Python {platform.python_version()} "
        f"· commit {_commit()}"
    )


html_context = {"reference_run": reference_run()}
