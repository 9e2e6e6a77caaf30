"""Build the course site: stage the sources, run Sphinx (myst-nb executes every notebook), check links.

Usage (after ``pip install -e ".[docs]"``)::

    python docs/build.py               # -> docs/_build/html/index.html
    python docs/build.py --out DIR     # somewhere else

1. Stage: the front page of ``docs/``, the chapters, the glossary and the
   instructors' guide of ``course/`` (with ``instructor/``) are copied into
   one source tree, ``<out>/../source``, so the links between chapters work
   as they do in JupyterLab. The Colab set-up cell is hidden on the site.
2. Build: Sphinx with ``docs/conf.py``; every warning is an error, and every
   notebook is executed on this machine, with an empty ceilings cache so that
   every number is measured now: the site's reference run, labelled on every
   page.
3. Check: every link, image, stylesheet and script a page points to inside
   the site exists, and so does the ``#anchor`` of a link to a page. Links
   out of the site (https://...) are not followed: the build works offline.

Prints the build time; exits 1 if Sphinx or the link check fails.
"""

from __future__ import annotations

import argparse
import html.parser
import json
import os
import shutil
import sys
import time
import urllib.parse
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
COURSE = ROOT / "course"
_PAGES = ("index.md",)  # the glossary is course/GLOSSARY.md, which the chapters link


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
        _drop_colab_setup(notebook)


def _drop_colab_setup(notebook: Path) -> None:
    """Tag the Colab set-up cell ``remove-cell``: it runs (a no-op here) but is not shown.

    On the site the cell would only print the library's version, which the
    reference-run label already gives; the Colab badge above it stays.
    """
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("id") == "colab-setup":
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            tags.append("remove-cell")
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def build(source: Path, out: Path) -> int:
    """Sphinx's html builder, warnings as errors; its exit status."""
    from sphinx.cmd.build import build_main

    doctrees = out.parent / "doctrees"
    args = ["-b", "html", "-c", str(DOCS), "-d", str(doctrees), "-W", "--keep-going", "-q"]
    return build_main([*args, str(source), str(out)])


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


def broken_links(out: Path) -> list[str]:
    """``page: ref`` for each local reference whose file or ``#anchor`` is missing."""
    pages = {p: _parse(p) for p in out.rglob("*.html")}
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
    opts = p.parse_args(argv)
    out = opts.out.resolve()
    start = time.perf_counter()
    # A fresh ceilings cache: every number on the site is measured by this run.
    cache = out.parent / "ceilings-cache"
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["BRRR_CACHE_DIR"] = str(cache)
    stage(out.parent / "source")
    status = build(out.parent / "source", out)
    built_s = time.perf_counter() - start
    if status != 0:
        print(
            f"docs/build.py: Sphinx failed (exit {status}) after {built_s:.0f} s", file=sys.stderr
        )
        return 1
    broken = broken_links(out)
    for line in broken:
        print(f"docs/build.py: broken link: {line}", file=sys.stderr)
    pages = sum(1 for _ in out.rglob("*.html"))
    print(
        f"docs/build.py: {pages} pages in {out} in {built_s:.0f} s "
        f"(notebooks executed); {len(broken)} broken internal link(s)"
    )
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
