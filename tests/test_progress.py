"""Progress of a measurement: lines on stderr in a terminal, a bar (then plain text) in a notebook.

JupyterLab paints stderr pink, like an error, so in a kernel the steps move an
ipywidgets bar and, once the last step is done, the bar gives way to the same
lines as a plain ``text/plain`` output. One test runs a real kernel and reads
its messages; the others fake the shell.
"""

from __future__ import annotations

import re
import types

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
    assert out == "" and len(lines) == 4
    before, first, second, after = SAID
    assert lines[0] == f"t: {before}" and lines[3] == f"t: {after}"  # said, not counted
    assert _step(lines[1]) == (1, 2) and lines[1].endswith(first)
    assert _step(lines[2]) == (2, 2) and lines[2].endswith(second)


def test_disabled_progress_is_silent(capsys):
    _steps(_fmt.Progress(False, total=2))
    assert capsys.readouterr() == ("", "")


class _Handle:
    def __init__(self, shown: list) -> None:
        self.shown = shown

    def update(self, obj, raw=False):
        assert raw
        self.shown.append(obj)


@pytest.fixture
def fake_kernel(monkeypatch):
    """A shell with a kernel, and IPython's display recorded: what was shown, in order."""
    import IPython.display
    import ipywidgets  # noqa: F401  (imported before the shell is faked)

    shown: list = []

    def display(obj, display_id=False):
        assert display_id is True
        shown.append(obj)
        return _Handle(shown)

    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace(kernel=object()))
    monkeypatch.setattr(IPython.display, "display", display)
    return shown


def test_in_a_kernel_a_bar_moves_then_gives_way_to_plain_lines(fake_kernel, capsys):
    progress = _fmt.Progress(True, total=2, prefix="t")
    box = fake_kernel[0]
    bar = box.children[1].children[0]
    assert type(bar).__name__ == "IntProgress" and (bar.value, bar.max) == (0, 2)
    before, first, second, after = SAID
    progress.say(before)
    progress(first)
    assert bar.value == 1 and before in box.children[0].value
    assert len(fake_kernel) == 1  # still the bar
    progress(second)
    progress.say(after)
    assert capsys.readouterr() == ("", "")  # nothing pink
    final = fake_kernel[-1]["text/plain"].splitlines()
    assert final[0] == f"t: {before}" and final[2].endswith(second)
    assert final[-1] == f"t: {after}"
    assert box.comm is None  # the widget was closed


def test_a_terminal_ipython_is_not_a_kernel(monkeypatch, capsys):
    import IPython

    # a TerminalInteractiveShell has no kernel
    monkeypatch.setattr(IPython, "get_ipython", lambda: types.SimpleNamespace())
    _fmt.Progress(True, total=1)("done")
    assert "[1/1]" in capsys.readouterr().err


def test_a_real_kernel_shows_no_stderr_and_keeps_the_lines():
    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        msgs = []
        code = (
            "from brrrlib import _fmt\n"
            "p = _fmt.Progress(True, total=2, prefix='t')\n"
            "p('first'); p('second')"
        )
        reply = kc.execute_interactive(code, timeout=120, output_hook=msgs.append)
        assert reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    kinds = [(m["msg_type"], m["content"].get("name")) for m in msgs]
    assert ("stream", "stderr") not in kinds
    shown = [m for m in msgs if m["msg_type"] == "display_data"]
    assert "application/vnd.jupyter.widget-view+json" in shown[0]["content"]["data"]
    final = [m for m in msgs if m["msg_type"] == "update_display_data"][-1]["content"]["data"]
    assert list(final) == ["text/plain"] and final["text/plain"].splitlines()[1].endswith("second")
