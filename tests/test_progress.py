"""Progress of a measurement through tqdm: one line per step, a bar in a notebook.

In a terminal or a log each step is one line on stderr. JupyterLab paints
stderr pink, like an error, so in a kernel the lines go to stdout and the bar
is a widget. One test runs a real kernel and reads its messages.
"""

from __future__ import annotations

import re

import pytest

from brrrlib import _fmt

# What the steps below say: a line before, two steps, a note after.
SAID = ("measuring two things", "first: 1 FLOP/s", "second: 2 B/s", "NOISY: a note after")


def _steps(progress: _fmt.Progress) -> None:
    before, first, second, after = SAID
    progress.say(before)
    progress(first)
    progress(second)
    progress.say(after)


def _step(line: str) -> tuple[int, int]:
    """``t [1/2] ...``: the step a progress line counts, and of how many."""
    found = re.match(r"t \[(\d+)/(\d+)\] ", line)
    assert found, line
    return int(found[1]), int(found[2])


def test_outside_a_kernel_each_step_is_one_line_on_stderr(capsys):
    _steps(_fmt.Progress(True, total=2, prefix="t"))
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 4  # stderr is no terminal here: lines, no bar
    before, first, second, after = SAID
    assert lines[0] == f"t: {before}" and lines[3] == f"t: {after}"  # said, not counted
    assert _step(lines[1]) == (1, 2) and lines[1].endswith(first)
    assert _step(lines[2]) == (2, 2) and lines[2].endswith(second)


def test_disabled_progress_is_silent(capsys):
    _steps(_fmt.Progress(False, total=2))
    assert capsys.readouterr() == ("", "")


def test_a_real_kernel_shows_a_bar_and_the_lines_and_no_stderr():
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        msgs = []
        code = (
            "import warnings; warnings.simplefilter('always')\n"  # any library warning shows
            "from brrrlib import _fmt\n"
            "p = _fmt.Progress(True, total=2, prefix='t')\n"
            "p('first'); p('second'); p.say('after')"
        )
        reply = kc.execute_interactive(code, timeout=120, output_hook=msgs.append)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    kinds = [(m["msg_type"], m["content"].get("name")) for m in msgs]
    assert ("stream", "stderr") not in kinds  # nothing pink, no warning
    shown = [m for m in msgs if m["msg_type"] == "display_data"]
    assert "application/vnd.jupyter.widget-view+json" in shown[0]["content"]["data"]
    # once done, the bar's output is emptied: a saved notebook keeps no bar stuck at 0%
    bar_id = shown[0]["content"]["transient"]["display_id"]
    (update,) = [m["content"] for m in msgs if m["msg_type"] == "update_display_data"]
    assert update["transient"]["display_id"] == bar_id and update["data"]["text/plain"] == ""
    stdout = [m["content"]["text"] for m in msgs if m["msg_type"] == "stream"]  # none is stderr
    out = "".join(stdout).splitlines()
    assert _step(out[0]) == (1, 2) and out[1].endswith("second") and out[2] == "t: after"
