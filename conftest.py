"""What every executed chapter cell may not print, checked as nbval runs the course.

nbval executes each notebook cell (``pytest course/``) and keeps what it
printed; this hook reads those outputs and fails the cell when they state
something the course's own rules forbid:

* **a share above 100%** of a roof, peak, ceiling or floor ("139% of the
  bandwidth ceiling"): a ceiling is what the machine can do and a floor is a
  lower bound, so a share above 100% means the reference was wrong. A line
  that names the measured mechanism (``_EXPLAINED``: a cache level, a stale
  ceiling a same-run probe beat, cheaper ops) or calls it unexplained is allowed.
* **"can't tell" for an interval that excludes x1**: a comparison whose whole
  interval lies on one side of x1 has decided the direction, and must say it.
* **"too noisy to tell"**, the old wording that hid decided comparisons.

The checks hold on any machine the course runs on, and in CI they run under
torch's AVX2 kernels too (``.ci/run``), where bf16 has no fast path.
"""

from __future__ import annotations

import re

import pytest

#: A share of something that must not exceed 100%: "139% of the bandwidth ceiling".
_SHARE = re.compile(
    r"(?P<pct>\d[\d,]*(?:\.\d+)?)\s?% of (?:the |its |this |that )?(?:[\w./-]+ ){0,4}?"
    r"(?P<what>roof|peak|ceiling|floor|bandwidth|roofline|matmul peak|time)\b",
    re.I,
)
#: A share above 100% is kept only on a line that names what was measured to cause it: a
#: cache level holding the data, a stale cached ceiling (a same-run probe beat it), ops
#: cheaper than the overhead ceiling's, a same-run reference that this kernel beat, or
#: that it is unexplained. Blaming the ceiling itself names no mechanism and fails.
_EXPLAINED = re.compile(
    r"\bcache\b|\bL[123]\b|stale_ceiling|cheaper_ops|same-run|unexplained|this kernel beat it",
    re.I,
)
_CANT_TELL = re.compile(r"can't tell: [^\n]*?interval x(?P<lo>[\d.,]+)-x(?P<hi>[\d.,]+)")


def output_problems(text: str) -> list[str]:
    """What an executed cell's text output states that the course's rules forbid."""
    problems = []
    for line in text.splitlines():
        for m in _SHARE.finditer(line):
            if float(m["pct"].replace(",", "")) > 100.5 and not _EXPLAINED.search(line):
                problems.append(f"a share above 100% printed as real: {line.strip()[:200]}")
        for m in _CANT_TELL.finditer(line):
            lo, hi = (float(m[k].replace(",", "")) for k in ("lo", "hi"))
            if not lo <= 1.0 <= hi:
                problems.append(f"'can't tell' for an interval that excludes x1: {line.strip()}")
        if "too noisy to tell" in line:
            problems.append(f"'too noisy to tell' (say the direction and the interval): {line}")
    return problems


def output_text(outputs) -> str:
    """The text a cell's outputs show (streams and plain-text reprs; a list is a notebook's)."""
    parts = []
    for out in outputs or ():
        text = (
            out.get("text")
            if out.get("output_type") == "stream"
            else ((out.get("data") or {}).get("text/plain"))
        )
        parts.append("".join(text) if isinstance(text, list) else str(text or ""))
    return "\n".join(parts)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    outputs = getattr(item, "test_outputs", None)  # set by nbval's cell items
    if call.when != "call" or report.failed or outputs is None:
        return
    problems = output_problems(output_text(outputs))
    if problems:
        report.outcome = "failed"
        report.longrepr = "This cell printed what the course's rules forbid:\n" + "\n".join(
            f"  - {p}" for p in problems
        )
