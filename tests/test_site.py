"""The course site: its link check works, and a built site opens in headless Chromium.

``docs/build.py`` builds the site (README's site command; CI runs it before
the tests). The browser test opens that build from disk, offline, in the
system's Chromium (never a downloaded browser), walks from the front page to
a chapter, the glossary and the instructors' guide, and saves a screenshot
to ``test-artifacts/site/``. Without a built site, Chromium or Playwright it
skips locally and fails in CI (``CI=true``), so a missing site never passes
as a pass. ``BRRR_SITE`` points it at a build elsewhere.

The link-check tests need neither: they feed ``docs/build.py`` a few pages.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BRRR_SITE", ROOT / "docs" / "_build" / "html"))
CHROMIUM = Path(os.environ.get("BRRR_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "test-artifacts" / "site"
CHAPTERS = tuple(sorted(p.stem for p in (ROOT / "course").glob("0*.ipynb")))
LABEL = re.compile(r"Reference run: .* on (cpu|cuda|mps): .+ · \d{4}-\d\d-\d\d · torch \d+\.\d+")


def _build_module():
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------ the link check ---


def _page(folder: Path, name: str, body: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"<html><body>{body}</body></html>")


def test_link_check_finds_missing_pages_and_anchors(tmp_path):
    _page(tmp_path, "index.html", '<a href="a.html#here">ok</a> <a href="sub/b.html">ok</a>')
    _page(tmp_path, "a.html", '<h1 id="here">A</h1><a href="index.html">ok</a>')
    _page(tmp_path, "sub/b.html", '<a href="../a.html#gone">x</a> <img src="../_images/p.png">')
    _page(tmp_path, "c.html", '<a href="https://example.org/none">out</a> <a href="#top">x</a>')
    broken = _build_module().broken_links(tmp_path)
    assert broken == [
        "c.html: #top (no such anchor)",
        "sub/b.html: ../a.html#gone (no such anchor)",
        "sub/b.html: ../_images/p.png (no such file)",
    ]


def test_link_check_refuses_links_out_of_the_site(tmp_path):
    site = tmp_path / "html"
    _page(site, "index.html", '<a href="../secret.html">x</a>')
    _page(tmp_path, "secret.html", "outside")
    assert _build_module().broken_links(site) == ["index.html: ../secret.html (no such file)"]


def test_staging_hides_only_the_colab_cell(tmp_path):
    _build_module().stage(tmp_path / "source")
    for chapter in CHAPTERS:
        nb = nbformat.read(tmp_path / "source" / f"{chapter}.ipynb", as_version=4)
        hidden = [c.id for c in nb.cells if "remove-cell" in c.metadata.get("tags", [])]
        assert hidden == ["colab-setup"], chapter
    assert (tmp_path / "source" / "GLOSSARY.md").is_file()
    assert (tmp_path / "source" / "INSTRUCTORS.md").is_file()


# --------------------------------------------------------- the built site ---


def _missing_prerequisite() -> str | None:
    if not (SITE / "index.html").is_file():
        return f"no built site at {SITE}: run `python docs/build.py` (README's site command)"
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set BRRR_CHROMIUM)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not importable: pip install -e '.[test]'"
    return None


@pytest.fixture
def browser_page():
    reason = _missing_prerequisite()
    if reason is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"site test cannot run in CI: {reason}", pytrace=False)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # Offline: the site's own files only (the Colab badge and widget scripts are not).
        page.route(
            "**/*",
            lambda route: (
                route.continue_() if route.request.url.startswith("file:") else route.abort()
            ),
        )
        yield page
        browser.close()


def test_every_page_carries_the_reference_run_label():
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}")
    pages = sorted(SITE.rglob("*.html"))
    unlabelled = [
        str(p.relative_to(SITE))
        for p in pages
        if not LABEL.search(" ".join(re.sub(r"<[^>]+>", "", p.read_text(encoding="utf-8")).split()))
    ]
    assert len(pages) >= 9 and not unlabelled, f"pages without the label: {unlabelled}"


def test_every_figure_on_the_site_says_what_it_shows():
    # an image's alt text is what a screen reader reads: a sentence, never a file name
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}")
    bad, figures = [], 0
    for page in sorted(SITE.rglob("*.html")):
        for tag in re.findall(r"<img\b[^>]*>", page.read_text(encoding="utf-8")):
            figures += 1
            alt = re.search(r"""\balt=(["'])(.*?)\1""", tag, re.S)
            text = alt.group(2) if alt else ""
            if len(text.split()) < 3 or re.search(r"\.(png|svg|jpe?g)$", text):
                bad.append(f"{page.relative_to(SITE)}: {text or '(no alt)'}")
    assert figures >= 20 and not bad, bad


def test_the_site_opens_and_leads_to_chapters_glossary_and_guide(browser_page):
    page = browser_page
    page.goto((SITE / "index.html").as_uri())
    assert "brrr" in page.title()
    assert LABEL.search(page.locator("p.reference-run").inner_text().replace("\n", " "))
    for chapter in CHAPTERS:  # the navigation lists every chapter
        assert page.locator(f'a[href="{chapter}.html"]').count() >= 1, chapter

    page.locator('a[href="02_memory_bandwidth.html"]').first.click()
    page.wait_for_load_state()
    assert page.url.endswith("02_memory_bandwidth.html")
    assert page.locator("div.body h1").first.inner_text().startswith("02")
    outputs = page.locator("div.cell_output")
    assert outputs.count() >= 5, "the chapter shows the reference run's outputs"
    assert page.locator("div.cell_output img").count() >= 1, "and its figures"
    assert page.locator(".output.traceback, .output.error").count() == 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "02_memory_bandwidth.png"))

    page.locator('a[href="GLOSSARY.html"]').first.click()
    page.wait_for_load_state()
    terms = page.locator("div.body h2").all_inner_texts()
    for term in ("Ridge point", "Arithmetic intensity", "FMA", "IQR", "Kernel", "Guard"):
        assert any(t.strip().startswith(term) for t in terms), term

    page.locator('a[href="INSTRUCTORS.html"]').first.click()
    page.wait_for_load_state()
    assert "instructors" in page.locator("div.body h1").first.inner_text().lower()
