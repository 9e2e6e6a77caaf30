"""The course site: staging, execution and the link check work; a built site opens in Chromium.

``docs/build.py`` builds the site (README's site command; CI runs it before
the tests). The browser test opens that build from disk, offline, in the
system's Chromium (never a downloaded browser), once with the system in light
mode and once in dark mode: it walks from the front page to a chapter (its
launch, download and copy buttons, its figures readable on a light ground),
the chapter's recorded GPU run, the glossary and the instructors' guide, and
saves screenshots to ``test-artifacts/site/``. Without a built site, Chromium
or Playwright it skips locally and fails in CI (``CI=true``), so a missing
site never passes as a pass. ``BRRR_SITE`` points it at a build elsewhere.

The staging, kernel and link-check tests need neither.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import urllib.parse
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("BRRR_SITE", ROOT / "docs" / "_build" / "html"))
CHROMIUM = Path(os.environ.get("BRRR_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = ROOT / "test-artifacts" / "site"
CHAPTERS = tuple(sorted(p.stem for p in (ROOT / "course").glob("0*.ipynb")))
HEADING = "article.bd-article h1"  # a page's title, in the theme's markup
WHITE, TRANSPARENT = "rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"
LABEL = re.compile(r"Reference run: .* on (cpu|cuda|mps): .+ · \d{4}-\d\d-\d\d · torch \d+\.\d+")


def _recordings() -> list[tuple[str, Path, dict]]:
    """The GPU recordings the site shows, newest first: (folder, its notebooks/, its run.json)."""
    labels = (ROOT / "brrrlib" / "recordings").glob("*/notebooks/run.json")
    found = [(p.parent.parent.name, p.parent, json.loads(p.read_text())) for p in labels]
    return sorted(found, key=lambda r: r[2]["date"], reverse=True)


def _recorded_label(run: dict) -> re.Pattern:
    """The label a page of the recording ``run`` (its run.json) carries."""
    return re.compile(
        rf"Recorded run: recorded on an {re.escape(run['device_short'])} .*, {run['date']}, "
        rf"commit {run['commit']} .*not executed by this build"
    )


RECORDINGS = _recordings()
# The recording the browser opens: the newest that holds chapter 02
RUN_DIR, RECORDING, RUN = next(
    r for r in RECORDINGS if (r[1] / "02_memory_bandwidth.ipynb").is_file()
)
GPU = RUN["device_short"].split()[-1]  # e.g. H100
RECORDED = _recorded_label(RUN)


def _build_module():
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------ the link check ---


def _page(folder: Path, name: str, body: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(f"<html><body>{body}</body></html>")


def _broken(lines: list[str]) -> list[tuple[str, str, str]]:
    """The link check's lines, ``page: link (no such anchor)``, as (page, link, anchor or file)."""
    found = [re.fullmatch(r"(\S+): (\S+) \(no such (anchor|file)\)", line) for line in lines]
    assert all(found), lines
    return [m.groups() for m in found]


def test_link_check_finds_missing_pages_and_anchors(tmp_path):
    _page(tmp_path, "index.html", '<a href="a.html#here">ok</a> <a href="sub/b.html">ok</a>')
    _page(tmp_path, "a.html", '<h1 id="here">A</h1><a href="index.html">ok</a>')
    _page(tmp_path, "sub/b.html", '<a href="../a.html#gone">x</a> <img src="../_images/p.png">')
    _page(tmp_path, "c.html", '<a href="https://example.org/none">out</a> <a href="#top">x</a>')
    assert _broken(_build_module().broken_links(tmp_path)) == [
        ("c.html", "#top", "anchor"),
        ("sub/b.html", "../a.html#gone", "anchor"),
        ("sub/b.html", "../_images/p.png", "file"),
    ]


def test_link_check_refuses_links_out_of_the_site(tmp_path):
    site = tmp_path / "html"
    _page(site, "index.html", '<a href="../secret.html">x</a>')
    _page(tmp_path, "secret.html", "outside")
    assert _broken(_build_module().broken_links(site)) == [("index.html", "../secret.html", "file")]


def test_staging_hides_the_colab_cells_and_stages_the_recordings_as_they_ran(tmp_path):
    build = _build_module()
    source = tmp_path / "source"
    build.stage(source)
    for chapter in CHAPTERS:
        nb = nbformat.read(source / f"{chapter}.ipynb", as_version=4)
        hidden = [c.id for c in nb.cells if "remove-cell" in c.metadata.get("tags", [])]
        assert hidden == ["colab-badge", "colab-setup"], chapter
    assert (source / "GLOSSARY.md").is_file()
    assert (source / "INSTRUCTORS.md").is_file()
    for run_dir, notebooks, run in RECORDINGS:
        staged = source / "recordings" / run_dir
        assert (staged / "index.md").is_file()
        for recorded in notebooks.glob("*.ipynb"):
            ran = nbformat.read(recorded, as_version=4)
            shown = nbformat.read(staged / recorded.name, as_version=4)
            assert [c.get("outputs") for c in shown.cells] == [c.get("outputs") for c in ran.cells]
            for cell in shown.cells:  # every recorded figure gets words for a screen reader
                if any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
                    alt = cell.metadata.mystnb.image.alt
                    assert alt.startswith("Recorded") and run["device_short"] in alt
    executed = [p.relative_to(source).as_posix() for p in build.course_notebooks(source)]
    assert not any(p.startswith("recordings/") for p in executed)  # never executed
    assert {f"{c}.ipynb" for c in CHAPTERS} <= set(executed)


def test_the_build_runs_kernels_over_ipc_without_a_transport_warning(tmp_path, capfd):
    if os.name != "posix":
        pytest.skip("IPC sockets are POSIX; Windows kernels use TCP")
    build = _build_module()
    config = build.kernel_config(str(tmp_path))
    assert config.KernelManager.transport == "ipc"
    assert Path(config.KernelManager.ip).is_absolute()  # kernel and build run in other folders
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata.kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "00_tiny.ipynb")
    assert build.execute(tmp_path) == []
    ran = nbformat.read(tmp_path / "00_tiny.ipynb", as_version=4)
    assert ran.cells[0].outputs[0].text == "42\n"
    assert "encryption" not in capfd.readouterr().err  # the TCP transport's warning


# --------------------------------------------------------- the built site ---


def _missing_prerequisite() -> str | None:
    if not (SITE / "index.html").is_file():
        return f"no built site at {SITE}: run `python docs/build.py` (README's site command)"
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium, or set BRRR_CHROMIUM)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not importable: pip install -e '.[test]'"
    return None


@pytest.fixture(scope="module")
def browser():
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
        yield browser
        browser.close()


def _text(page: Path) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")).split())


def test_every_page_carries_the_label_of_the_run_it_shows():
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}")
    pages = _build_module().site_pages(SITE)
    recorded = {
        f"recordings/{run_dir}/{p.stem}.html": _recorded_label(run)
        for run_dir, notebooks, run in RECORDINGS
        for p in notebooks.glob("*.ipynb")
    }
    unlabelled = []
    for page in pages:
        name = page.relative_to(SITE).as_posix()
        label = recorded.get(name, LABEL)
        if not label.search(_text(page)):
            unlabelled.append(name)
    assert len(pages) >= 15 and set(recorded) <= {p.relative_to(SITE).as_posix() for p in pages}
    assert not unlabelled, f"pages without the label of their run: {unlabelled}"


def test_every_figure_on_the_site_says_what_it_shows():
    # an image's alt text is what a screen reader reads: a sentence, never a file name
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}")
    bad, figures = [], 0
    for page in _build_module().site_pages(SITE):
        for tag in re.findall(r"<img\b[^>]*>", page.read_text(encoding="utf-8")):
            if "_images/" not in tag:  # the theme's button icons, not figures
                continue
            figures += 1
            alt = re.search(r"""\balt=(["'])(.*?)\1""", tag, re.S)
            text = alt.group(2) if alt else ""
            if len(text.split()) < 3 or re.search(r"\.(png|svg|jpe?g)$", text):
                bad.append(f"{page.relative_to(SITE)}: {text or '(no alt)'}")
    assert figures >= 20 and not bad, bad


def test_each_chapter_downloads_as_the_repository_has_it_without_outputs():
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}")
    for chapter in CHAPTERS:
        page = (SITE / f"{chapter}.html").read_text(encoding="utf-8")
        assert f'href="_sources/{chapter}.ipynb"' in page, chapter
        download = SITE / "_sources" / f"{chapter}.ipynb"
        assert download.read_bytes() == (ROOT / "course" / f"{chapter}.ipynb").read_bytes()


def _colab_url(chapter: str) -> str:
    spec = importlib.util.spec_from_file_location("colab_cells", ROOT / ".ci" / "colab_cells.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.colab_url(f"{chapter}.ipynb")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_site_opens_and_leads_to_chapters_recordings_glossary_and_guide(browser, scheme):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    # Offline: the site's own files only (the Colab badge and widget scripts are not).
    page.route(
        "**/*",
        lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort(),
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.goto((SITE / "index.html").as_uri())
    assert "brrr" in page.title()
    assert page.evaluate("document.documentElement.dataset.theme") == scheme  # the system's mode
    assert LABEL.search(page.locator("p.reference-run").inner_text().replace("\n", " "))
    for chapter in CHAPTERS:  # the navigation lists every chapter
        assert page.locator(f'a[href="{chapter}.html"]').count() >= 1, chapter

    page.locator('a[href="02_memory_bandwidth.html"]').first.click()
    page.wait_for_load_state()
    assert page.url.endswith("02_memory_bandwidth.html")
    assert page.locator(HEADING).first.inner_text().startswith("02")
    label = page.locator("p.reference-run")
    assert LABEL.search(label.inner_text().replace("\n", " "))
    outputs = page.locator("div.cell_output")
    assert outputs.count() >= 5, "the chapter shows the reference run's outputs"
    figures = page.locator("div.cell_output img")
    assert figures.count() >= 1, "and its figures"
    errors = page.locator(".output.traceback, .output.error")
    assert errors.count() == 0
    # a figure (black text on white) keeps a white ground and its full brightness
    ground, dimmed = figures.first.evaluate(
        "e => [getComputedStyle(e).backgroundColor, getComputedStyle(e).filter]"
    )
    assert ground in (WHITE, TRANSPARENT) and dimmed == "none"
    if scheme == "dark":
        assert ground == WHITE
    # the label reads: its text and its ground differ in lightness
    text, back = label.evaluate(
        "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
    )
    assert abs(_lightness(text) - _lightness(back)) > 0.5
    # launch (Colab), download (.ipynb) and copy buttons
    colab = page.locator('a[href^="https://colab.research.google.com/"]')
    assert colab.count() >= 1 and colab.first.get_attribute("href") == _colab_url(
        "02_memory_bandwidth"
    )
    assert page.locator('a[href="_sources/02_memory_bandwidth.ipynb"]').count() == 1
    code_cells = page.locator("div.cell_input").count()
    assert code_cells >= 5 and page.locator("button.copybtn").count() >= code_cells
    page.screenshot(path=str(ARTIFACTS / f"02_memory_bandwidth-{scheme}.png"))

    recorded_tab = page.locator("nav.brrr-runs a.brrr-run-recorded")
    assert GPU in recorded_tab.inner_text() and RUN["date"] in recorded_tab.inner_text()
    recorded_tab.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"recordings/{RUN_DIR}/02_memory_bandwidth.html")
    assert RECORDED.search(page.locator("p.recorded-run").inner_text().replace("\n", " "))
    assert page.locator("div.cell_output").count() >= 5, "the recording shows what it ran"
    assert page.locator('a[href^="https://colab.research.google.com/"]').count() == 0  # no launch
    page.screenshot(path=str(ARTIFACTS / f"02_memory_bandwidth-{RUN_DIR}-{scheme}.png"))
    page.locator("nav.brrr-runs a.brrr-run-reference").click()
    page.wait_for_load_state()
    assert page.url.endswith("/02_memory_bandwidth.html") and "recordings" not in page.url

    page.locator('a[href="GLOSSARY.html"]').first.click()
    page.wait_for_load_state()
    terms = page.locator("article.bd-article h2").all_inner_texts()
    for term in ("Ridge point", "Arithmetic intensity", "FMA", "IQR", "Kernel", "Guard"):
        assert any(t.strip().startswith(term) for t in terms), term

    page.locator('a[href="INSTRUCTORS.html"]').first.click()
    page.wait_for_load_state()
    assert "instructors" in page.locator(HEADING).first.inner_text().lower()
    page.close()


def _lightness(css_color: str) -> float:
    """0 (black) to 1 (white): the mean of an ``rgb(...)``/``rgba(...)`` colour's channels."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css_color)[:3])
    return (r + g + b) / (3 * 255)


def test_the_hub_button_is_the_nbgitpuller_link_instructors_md_gives(tmp_path, monkeypatch):
    """A site built with --hub: each chapter's JupyterHub button is INSTRUCTORS.md's link."""
    pytest.importorskip("sphinx_book_theme")
    build = _build_module()
    source, out = tmp_path / "source", tmp_path / "html"
    source.mkdir()
    (source / "index.md").write_text("# Index\n\n```{toctree}\n00_the_factory\n```\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 00 · Stub")])
    nbformat.write(nb, source / "00_the_factory.ipynb")
    monkeypatch.setenv("BRRR_HUB_URL", "https://hub.example.edu")
    assert build.build(source, out) == 0
    page = (out / "00_the_factory.html").read_text(encoding="utf-8")
    hub = re.search(r'href="(https://hub\.example\.edu/hub/user-redirect/git-pull\?[^"]+)"', page)
    text = (ROOT / "course" / "INSTRUCTORS.md").read_text()
    given = re.search(r"https://\S+/hub/user-redirect/git-pull\?\S+", text).group(0)

    def query(link: str) -> dict:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(link.replace("&amp;", "&")).query)

    assert hub and query(hub.group(1)) == query(given)


def test_a_recordings_links_lead_to_its_own_pages_or_to_the_course():
    build = _build_module()
    held = {"06_one_model.ipynb"}
    text = (
        "[glossary](GLOSSARY.md#kv-cache), [04](04_diagnose.ipynb), [06](06_one_model.ipynb#knee), "
        "[essay](https://horace.io/brrr_intro.html)"
    )
    assert build._to_course([text], held) == (
        "[glossary](../../GLOSSARY.md#kv-cache), [04](../../04_diagnose.ipynb), "
        "[06](06_one_model.ipynb#knee), [essay](https://horace.io/brrr_intro.html)"
    )
