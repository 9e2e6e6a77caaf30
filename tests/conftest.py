"""Shared fixtures: measure this machine's ceilings at most once per test session.

benchmarks/ goes on sys.path: the zoo's workloads that only the benchmarks and the tests
use (benchmarks/zoo_more) are imported from there.
"""

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "benchmarks"))


@pytest.fixture(scope="session", autouse=True)
def ceilings_cache_dir(tmp_path_factory):
    """A session-wide BRRR_CACHE_DIR in a temporary folder: tests never touch the user's cache."""
    path = tmp_path_factory.mktemp("brrr-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BRRR_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="session")
def measured_ceilings(ceilings_cache_dir):
    """bl.measure_ceilings() run once (~10 s), cached in ceilings_cache_dir."""
    import brrrlib as bl

    return bl.measure_ceilings(progress=False)


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every pyplot figure a test opened (the chapters' figure functions use pyplot)."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


def pytest_terminal_summary(terminalreporter):
    """How many live verdict tests ran here: a verdict test that skips checks nothing."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome in counts:
        for report in terminalreporter.stats.get(outcome, ()):
            if "verdict" in getattr(report, "keywords", {}) and report.when in ("call", "setup"):
                counts[outcome] += 1
    if any(counts.values()):
        ran = counts["passed"] + counts["failed"]
        terminalreporter.write_line(
            f"verdict tests: {ran} ran ({counts['passed']} passed, {counts['failed']} failed), "
            f"{counts['skipped']} skipped"
        )
