"""Progress of a measurement: lines on stderr in a terminal, a bar (then plain text) in a notebook.

JupyterLab paints stderr pink, like an error, so in a kernel the steps move an
ipywidgets bar and, once the last step is done, the bar gives way to the same
lines as a plain ``text/plain`` output. One test runs a real kernel and reads
its messages; the others fake the shell.
"""

from __future__ import annotations

import types

import pytest

from brrrlib import _fmt


def _steps(progress: _fmt.Progress) -> None:
    progress.say("measuring two things")
    progress("first: 1 FLOP/s")
    progress("second: 2 B/s")
    progress.say("NOISY: a note after the last step")


def test_outside_a_kernel_each_step_is_one_line_on_stderr(capsys):
    _steps(_fmt.Progress(True, total=2, prefix="t"))
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 4
    assert lines[0] == "t: measuring two things"
    assert lines[1].startswith("t [1/2]") and lines[1].endswith("first: 1 FLOP/s")
    assert lines[2].startswith("t [2/2]") and lines[3].startswith("t: NOISY")


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
    progress.say("measuring two things")
    progress("first: 1 FLOP/s")
    assert bar.value == 1 and "measuring two things" in box.children[0].value
    assert len(fake_kernel) == 1  # still the bar
    progress("second: 2 B/s")
    progress.say("NOISY: a note after the last step")
    assert capsys.readouterr() == ("", "")  # nothing pink
    final = fake_kernel[-1]["text/plain"].splitlines()
    assert final[0] == "t: measuring two things" and final[2].endswith("second: 2 B/s")
    assert final[-1] == "t: NOISY: a note after the last step"
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
