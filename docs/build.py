"""Build the course site: stage the sources, execute the chapters, run Sphinx, check links.

Usage (after ``pip install -e ".[docs]"``)::

    python docs/build.py                          # -> docs/_build/html/index.html
    python docs/build.py --out DIR                # somewhere else
    python docs/build.py --hub https://hub.example.edu   # with a JupyterHub launch button

1. Stage: the front page of ``docs/``, the chapters, the glossary and the
   instructors' guide of ``course/`` (with ``instructor/``) are copied into
   one source tree, ``<out>/../source``, so the links between chapters work
   as they do in JupyterLab. The Colab badge and set-up cells are hidden (each
   page has launch buttons of its own).
   Each recorded GPU run (``brrrlib/recordings/*/notebooks``, labelled by its
   ``run.json``) goes to ``recordings/<run>/``, as recorded: never executed.
2. Execute: every course notebook runs top to bottom in a fresh kernel
   (nbclient), on this machine, with an empty ceilings cache so that every
   number is measured now: the site's reference run, labelled on every page.
   The kernels talk to the build over IPC sockets in a private folder (TCP
   on Windows), not over loopback TCP, so no kernel warns about plain-text
   TCP; a cell that raises stops the build with its traceback.
3. Build: Sphinx with ``docs/conf.py`` (the notebooks already hold their
   outputs; Sphinx does not execute them); every warning is an error. Each
   chapter's download button then gets the chapter as the repository has it,
   without outputs, ready to run.
4. Check: every link, image, stylesheet and script a page points to inside
   the site exists, and so does the ``#anchor`` of a link to a page. Links
   out of the site (https://...) are not followed: the build works offline.

``--hub URL`` (or ``BRRR_HUB_URL``) adds a JupyterHub launch button to each
chapter, an nbgitpuller link as in ``course/INSTRUCTORS.md``. Prints the
build time; exits 1 if a notebook, Sphinx or the link check fails.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
COURSE = ROOT / "course"
RECORDINGS = ROOT / "brrrlib" / "recordings"
_PAGES = ("index.md",)  # the glossary is course/GLOSSARY.md, which the chapters link
CELL_TIMEOUT_S = 600  # per cell; the slowest measure for about a minute


def stage(source: Path) -> None:
    """One source tree: docs' own pages beside a copy of the course."""
    if source.exists():
        shutil.rmtree(source)
    shutil.copytree(
        COURSE,
        source,
        ignore=shutil.ignore_patterns(".*", "__pycache__", "*.py"),
    )
    for page in _PAGES:
        shutil.copy2(DOCS / page, source / page)
    for notebook in source.glob("*.ipynb"):
        _hide_colab_cells(notebook)
    for run in recorded_runs():
        _stage_recording(run, source / "recordings" / run.parent.name)


def recorded_runs() -> list[Path]:
    """The ``notebooks/`` folders of the recorded GPU runs that carry a ``run.json`` label."""
    return sorted(p.parent for p in RECORDINGS.glob("*/notebooks/run.json"))


def _stage_recording(run: Path, dest: Path) -> None:
    """A recorded run's notebooks as they ran, an index page, and alt text for its figures.

    Every figure's alt text says it was recorded, and on which device: a recording's own
    alt text, else (older recordings predate them) that of the cell still in today's
    chapter (same cell id, or the same code), else where the figure comes from. Outputs
    are never touched.
    """
    label = json.loads((run / "run.json").read_text(encoding="utf-8"))
    dest.mkdir(parents=True)
    names = []
    held = {p.name for p in run.glob("*.ipynb")}
    for notebook in sorted(run.glob("*.ipynb")):
        nb = json.loads(notebook.read_text(encoding="utf-8"))
        alts = _alt_texts(notebook.stem)
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                cell["source"] = _to_course(cell["source"], held)
            shows_image = any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
            mystnb = cell.setdefault("metadata", {}).setdefault("mystnb", {})
            if shows_image:
                code = "".join(cell["source"]).strip()
                alt = mystnb.get("image", {}).get("alt") or alts.get(cell.get("id"))
                alt = (
                    alt
                    or alts.get(code)
                    or (
                        f"a figure drawn when {notebook.stem} was recorded; the code above it says "
                        "what it plots"
                    )
                )
                device = label["device_short"]
                mystnb.setdefault("image", {})["alt"] = f"Recorded on the {device}: {alt}"
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        (dest / notebook.name).write_text(text, encoding="utf-8")
        names.append(notebook.stem)
    readme = (run / "README.md").read_text(encoding="utf-8")
    toc = "\n".join(["", "```{toctree}", ":maxdepth: 1", "", *names, "```", ""])
    (dest / "index.md").write_text(readme + toc, encoding="utf-8")


#: A markdown link to a page of the course: ``](04_diagnose.ipynb)``, ``](GLOSSARY.md#kv-cache)``.
_COURSE_LINK = re.compile(r"\]\((?P<page>[\w-]+\.(?:ipynb|md))(?P<anchor>#[^)\s]*)?\)")


def _to_course(source: str | list[str], held: set[str]) -> str:
    """A recorded chapter's links to pages the recording does not hold lead to the course's."""
    text = "".join(source)
    return _COURSE_LINK.sub(
        lambda m: m[0] if m["page"] in held else f"](../../{m['page']}{m['anchor'] or ''})", text
    )


def _alt_texts(stem: str) -> dict[str, str]:
    """Cell id, and cell code, -> alt text in today's chapter (or instructor notebook) ``stem``."""
    found = [*COURSE.glob(f"{stem}.ipynb"), *COURSE.glob(f"*/{stem}.ipynb")]
    if not found:
        return {}
    nb = json.loads(found[0].read_text(encoding="utf-8"))
    alts = {}
    for cell in nb["cells"]:
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
        if alt:
            alts[cell.get("id", "")] = alts["".join(cell["source"]).strip()] = alt
    return alts


def _hide_colab_cells(notebook: Path) -> None:
    """Tag the Colab badge and set-up cells ``remove-cell``: the set-up runs (a no-op here).

    On the site the set-up cell would only print the library's version, which
    the reference-run label already gives, and the page's own launch button
    opens the chapter in Colab, as the badge would.
    """
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("id") in ("colab-badge", "colab-setup"):
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags.append("remove-cell")
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def course_notebooks(source: Path) -> list[Path]:
    """The staged course notebooks the build executes (not the recordings)."""
    return sorted(
        p for p in source.rglob("*.ipynb") if "recordings" not in p.relative_to(source).parts
    )


def kernel_config(sockets: str):
    """Jupyter config for one local kernel: IPC sockets in the folder ``sockets`` where it can.

    IPC (Unix domain sockets) reaches only the users who can open that folder;
    ipykernel warns about plain TCP, which every local process can reach. The socket
    paths must be absolute (kernel and build run in different folders) and short (104
    bytes on macOS), hence a fresh folder in /tmp. Windows has no IPC transport: TCP
    there, encrypted where jupyter_client can provision the keys.
    """
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    config = Config()
    if os.name == "posix":
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = os.path.join(sockets, "kernel")
    elif "transport_encryption" in KernelManager.class_trait_names():
        config.KernelManager.transport_encryption = "auto"
    return config


def execute_notebook(path: Path, *, allow_errors: bool = False):
    """Run one notebook top to bottom in a fresh kernel, in place; (notebook, cells that raised).

    With ``allow_errors`` every cell runs and each one that raised is listed as
    ``"<index>: <error name>: <message>"`` (index among the code cells); without, the
    first one raises ``CellExecutionError`` and nothing is written.
    """
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    short = "/tmp" if os.path.isdir("/tmp") else None
    with tempfile.TemporaryDirectory(prefix="brrr-kernel-", dir=short) as sockets:
        client = NotebookClient(
            nb,
            timeout=CELL_TIMEOUT_S,
            allow_errors=allow_errors,
            resources={"metadata": {"path": str(path.parent)}},
            config=kernel_config(sockets),
        )
        client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [
        f"{i}: {o.get('ename')}: {str(o.get('evalue'))[:300]}"
        for i, c in enumerate(code)
        for o in c.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    nbformat.write(nb, path)
    return nb, errors


def execute(source: Path) -> list[str]:
    """Run every course notebook in ``source`` top to bottom, in place; the failures, as lines."""
    from nbclient.exceptions import CellExecutionError

    failures = []
    for path in course_notebooks(source):
        start = time.perf_counter()
        try:
            execute_notebook(path)
        except CellExecutionError as err:
            failures.append(f"{path.relative_to(source)}: {err}")
            continue
        took_s = time.perf_counter() - start
        print(f"docs/build.py: executed {path.relative_to(source)} in {took_s:.0f} s", flush=True)
    return failures


def build(source: Path, out: Path) -> int:
    """Sphinx's html builder, warnings as errors; its exit status."""
    from sphinx.cmd.build import build_main

    doctrees = out.parent / "doctrees"
    args = ["-b", "html", "-c", str(DOCS), "-d", str(doctrees), "-W", "--keep-going", "-q"]
    return build_main([*args, str(source), str(out)])


def clean_downloads(source: Path, out: Path) -> None:
    """Each course notebook's download (``_sources/``) is the repository's, without outputs."""
    for path in course_notebooks(source):
        rel = path.relative_to(source)
        target = out / "_sources" / rel
        if (COURSE / rel).is_file() and target.is_file():
            shutil.copy2(COURSE / rel, target)


class _Refs(html.parser.HTMLParser):
    """The ids a page defines and the local references it makes."""

    _ATTRS = {"a": "href", "link": "href", "img": "src", "script": "src"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        ref = attrs.get(self._ATTRS.get(tag, ""))
        if ref and not urllib.parse.urlsplit(ref).scheme and not ref.startswith("//"):
            self.refs.append(ref)


def _parse(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def site_pages(out: Path) -> list[Path]:
    """The site's pages: its HTML files but the theme's template fragments in ``_static/``."""
    return sorted(p for p in out.rglob("*.html") if "_static" not in p.relative_to(out).parts)


def broken_links(out: Path) -> list[str]:
    """``page: ref`` for each local reference whose file or ``#anchor`` is missing."""
    pages = {p: _parse(p) for p in site_pages(out)}
    broken = []
    for page, parsed in sorted(pages.items()):
        for ref in parsed.refs:
            parts = urllib.parse.urlsplit(ref)
            target = page if not parts.path else (page.parent / urllib.parse.unquote(parts.path))
            target = target.resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file() or not target.is_relative_to(out.resolve()):
                broken.append(f"{page.relative_to(out)}: {ref} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else _parse(target).ids
                if urllib.parse.unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(out)}: {ref} (no such anchor)")
    return broken


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Build the course site and check its links.")
    p.add_argument("--out", type=Path, default=DOCS / "_build" / "html", help="output folder")
    p.add_argument(
        "--hub",
        default=os.environ.get("BRRR_HUB_URL", ""),
        metavar="URL",
        help="a JupyterHub with nbgitpuller (e.g. https://hub.example.edu): adds a launch "
        "button for it to each chapter (default: $BRRR_HUB_URL, else none)",
    )
    opts = p.parse_args(argv)
    out = opts.out.resolve()
    start = time.perf_counter()
    # A fresh ceilings cache: every number on the site is measured by this run.
    cache = out.parent / "ceilings-cache"
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["BRRR_CACHE_DIR"] = str(cache)
    source = out.parent / "source"
    stage(source)
    failures = execute(source)
    for line in failures:
        print(f"docs/build.py: a notebook failed: {line}", file=sys.stderr)
    if failures:
        return 1
    os.environ["BRRR_HUB_URL"] = opts.hub.rstrip("/")  # docs/conf.py reads it
    status = build(source, out)
    built_s = time.perf_counter() - start
    if status != 0:
        print(
            f"docs/build.py: Sphinx failed (exit {status}) after {built_s:.0f} s", file=sys.stderr
        )
        return 1
    clean_downloads(source, out)
    broken = broken_links(out)
    for line in broken:
        print(f"docs/build.py: broken link: {line}", file=sys.stderr)
    pages = len(site_pages(out))
    print(
        f"docs/build.py: {pages} pages in {out} in {built_s:.0f} s "
        f"(notebooks executed); {len(broken)} broken internal link(s)"
    )
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
