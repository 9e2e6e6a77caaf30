"""Workshop results: write, merge, validate, load, tabulate and plot reports.

Nothing here measures: a hand-made Ceilings stands in for bl.measure_ceilings().
"""

import json
import os
import re
import sys
from pathlib import Path

import matplotlib
import pytest
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib.ceilings import Ceilings
from brrrlib.classroom import (
    RECORDINGS,
    Report,
    attainable_table,
    chapters_table,
    from_ceilings,
    load_reports,
    plot_reports,
    recorded_reports,
    reports_table,
    write_predictions,
)

matplotlib.use("Agg")

EXAMPLES = Path(__file__).resolve().parents[1] / "course" / "instructor" / "example_results"


def _ceilings(**overrides) -> Ceilings:
    values = dict(
        device_name="Test CPU 9000",
        mem_bandwidth_bytes_per_s=10e9,
        op_overhead_s=2e-6,
        torch_version="2.13.0",
        host="test-host",
        library_version="0.1.0",
        num_threads=2,
        matmul_flops_per_s_by_dtype={"bf16": 300e9},
    )
    return fake_ceilings(**{**values, **overrides})


@pytest.fixture(autouse=True)
def _outside_a_hub(monkeypatch):
    """The tests run as on a laptop, even from a terminal on a workshop hub."""
    monkeypatch.delenv("BRRR_RESULTS_DIR", raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)


def _file(stem: str, device: str = "cpu") -> re.Pattern:
    """A report file name: the safe name, the device, an 8-hex-digit fingerprint."""
    return re.compile(rf"{re.escape(stem)}-{device}-[0-9a-f]{{8}}\.json")


def test_report_writes_a_valid_file_and_load_reads_it_back(tmp_path):
    path = bl.report(tmp_path, name="ada", ceilings=_ceilings())
    assert path.parent == tmp_path and _file("ada").fullmatch(path.name)
    data = json.loads(path.read_text())
    assert data["schema"] == "brrr-report" and data["schema_version"] == 2
    assert data["kind"] == "measurement"
    assert data["ridge_point_flops_per_byte"] == pytest.approx(20.0)  # 200e9 / 10e9
    assert data["ceilings"] == _ceilings().to_dict()  # every field, as Ceilings writes it
    (rep,) = load_reports(tmp_path)
    assert rep.name == "ada" and rep.device_name == _ceilings().device_name and rep.path == path
    assert rep.machine == _ceilings() and rep.op_overhead_s == pytest.approx(2e-6)
    assert rep.ridge_point_flops_per_byte() == pytest.approx(20.0)
    assert rep.ridge_point_flops_per_byte("bf16") == pytest.approx(30.0)
    assert (rep.matmul_peak(), rep.machine.host, rep.machine.num_threads) == (
        200e9,
        "test-host",
        2,
    )
    assert rep.machine == from_ceilings(_ceilings(), name="ada").machine
    assert Report.from_dict(json.loads(rep.to_json())) == rep


def test_default_path_is_brrr_results_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = bl.report(ceilings=_ceilings())  # name defaults to the host recorded in the ceilings
    assert path.parent == Path("brrr-results") and _file("test-host").fullmatch(path.name)
    assert (tmp_path / path).is_file()


def test_on_a_hub_the_report_goes_to_the_class_folder_under_the_hub_user(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BRRR_RESULTS_DIR", str(tmp_path / "class"))
    monkeypatch.setenv("JUPYTERHUB_USER", "ada")
    path = bl.report(ceilings=_ceilings())  # every learner on the hub shares its host name
    assert path.parent == tmp_path / "class" and _file("ada").fullmatch(path.name)
    monkeypatch.setenv("JUPYTERHUB_USER", "bob")
    other = bl.report(ceilings=_ceilings())
    assert other != path and _file("bob").fullmatch(other.name)
    assert sorted(r.name for r in load_reports(tmp_path / "class")) == ["ada", "bob"]
    assert bl.report(name="Ada L.", ceilings=_ceilings()).parent == tmp_path / "class"
    assert not (tmp_path / "brrr-results").exists()


_REPORT_FOREVER = """
import sys
sys.path.insert(0, sys.argv[2])
from _fakes import fake_ceilings
import brrrlib as bl
print("writing", flush=True)
i = 0
while True:
    bl.report(sys.argv[1], name="ada", chapter=0, extra={"i": i}, ceilings=fake_ceilings())
    i += 1
"""


def test_a_kernel_killed_while_reporting_leaves_a_whole_report(tmp_path):
    """SIGKILL at any moment of a write: the file is the last whole report, never a part."""
    import signal
    import subprocess
    import time

    target = tmp_path / "ada.json"
    code, tests = _REPORT_FOREVER, str(Path(__file__).parent)
    for _ in range(3):  # three kills, at three moments of the loop
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(target), tests], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "writing"
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        (rep,) = load_reports(tmp_path)  # one whole report; a .tmp left behind is not read
        assert rep.name == "ada" and rep.chapters["00"]["i"] >= 0
        assert [p.name for p in tmp_path.glob("*.json")] == ["ada.json"]


def test_reporting_chapters_again_merges_and_keeps_earlier_chapters(tmp_path):
    target = tmp_path / "me.json"
    bl.report(target, chapter=2, extra={"knee_repeat": 16}, ceilings=_ceilings())
    bl.report(target, chapter="03", extra={"flat_until_batch": 64}, ceilings=_ceilings())
    bl.report(target, chapter=2, extra={"fused_speedup": 3.5}, ceilings=_ceilings())
    (rep,) = load_reports(tmp_path)
    assert dict(rep.chapters["02"]) == {"knee_repeat": 16, "fused_speedup": 3.5}
    assert dict(rep.chapters["03"]) == {"flat_until_batch": 64}
    assert [p.name for p in tmp_path.iterdir()] == ["me.json"]  # no temporary file left


def test_report_without_a_name_continues_this_machines_earlier_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = bl.report(name="ada", ceilings=_ceilings())
    again = bl.report(chapter=2, extra={"knee_repeat": 16}, ceilings=_ceilings())
    assert again == first and first.parent == Path("brrr-results")
    (rep,) = load_reports(tmp_path / "brrr-results")
    assert rep.name == "ada" and dict(rep.chapters["02"]) == {"knee_repeat": 16}
    # Another machine's report in the folder is left alone.
    other = bl.report(ceilings=_ceilings(host="other-host"))
    assert _file("other-host").fullmatch(other.name) and other != first


def test_report_refuses_to_overwrite_another_machines_file(tmp_path):
    target = tmp_path / "shared.json"
    bl.report(target, ceilings=_ceilings())
    with pytest.raises(ValueError, match="another machine"):
        bl.report(target, ceilings=_ceilings(device_name="Other CPU"))


NAMES = ["名前", "李", "..", ".", "../../etc/passwd", "a/b", "con", "ada", "Ada", " ada lovelace "]


def test_names_give_distinct_safe_file_names(tmp_path):
    """Non-ASCII names, dots and slashes never collapse into one file or leave the folder."""
    paths = [bl.report(tmp_path, name=n, ceilings=_ceilings()) for n in NAMES]
    assert len(set(paths)) == len(NAMES)  # nobody overwrites anybody
    for path in paths:
        assert path.parent == tmp_path
        assert re.fullmatch(r"[A-Za-z0-9_-]+-cpu-[0-9a-f]{8}\.json", path.name), path.name
        assert not path.name.startswith(("-", "."))
    assert sorted(r.name for r in load_reports(tmp_path)) == sorted(n.strip() for n in NAMES)
    # the same learner on another machine, or two learners called "ada": two files
    other_machine = bl.report(tmp_path, name="ada", ceilings=_ceilings(host="laptop-2"))
    assert other_machine not in paths and len(list(tmp_path.glob("*.json"))) == len(NAMES) + 1
    # and the same learner again: the same file
    assert bl.report(tmp_path, name="ada", ceilings=_ceilings()) == paths[NAMES.index("ada")]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"extra": {"x": 1}}, ValueError, "extra needs chapter"),
        ({"chapter": 2, "extra": [1, 2]}, TypeError, "extra must be an object"),
        ({"chapter": 2, "extra": {"t": object()}}, TypeError, r"extra\['t'\]"),
        ({"chapter": 2, "extra": {"t": float("nan")}}, TypeError, r"extra\['t'\]"),
        ({"chapter": True}, TypeError, "chapter"),
        ({"chapter": "../x"}, ValueError, "chapter"),
        ({"path": "results.txt"}, ValueError, "ending in .json"),
        ({"path": 3}, TypeError, "path must be"),
        ({"name": "  "}, ValueError, "name"),
        ({"ceilings": "fake"}, TypeError, "ceilings"),
    ],
)
def test_report_bad_input_names_the_argument(tmp_path, monkeypatch, kwargs, error, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        bl.report(**{"ceilings": _ceilings(), **kwargs})


def test_report_into_an_unwritable_place_says_where(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="could not write the report"):
        bl.report(blocker / "sub" / "me.json", ceilings=_ceilings())


def _write(folder: Path, name: str, data) -> Path:
    path = folder / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _good(tmp_path) -> dict:
    return json.loads(bl.report(tmp_path / "good.json", ceilings=_ceilings()).read_text())


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(schema="something-else"), "schema"),
        (lambda d: d.update(schema_version=99), "schema_version"),
        (lambda d: d.pop("ceilings"), "missing field 'ceilings'"),
        (lambda d: d["ceilings"].pop("mem_bandwidth_bytes_per_s"), "mem_bandwidth_bytes_per_s"),
        (lambda d: d["ceilings"].update(matmul_flops_per_s="fast"), "matmul_flops_per_s"),
        (lambda d: d["ceilings"].update(matmul_flops_per_s=-1.0), "matmul_flops_per_s"),
        (lambda d: d["ceilings"].update(op_overhead_s=None), "op_overhead_s"),
        (lambda d: d["ceilings"].update(num_threads=2.5), "num_threads"),
        (lambda d: d["ceilings"].update(spread={"matmul": "x"}), "spread"),
        (lambda d: d["ceilings"].update(clock_ghz=3.0), "unknown field"),
        (lambda d: d.update(kind="guess"), "kind"),
        (lambda d: d.update(ridge_point_flops_per_byte=1.0), "edited by hand"),
        (lambda d: d.update(ridge_point_flops_per_byte="20"), "ridge_point_flops_per_byte"),
        (lambda d: d["chapters"].update({"02": {"x": [1]}}), r"chapters\['02'\]"),
        (lambda d: d.update(notes="not a list"), "notes"),
    ],
)
def test_load_reports_names_the_file_and_the_field(tmp_path, mutate, match):
    data = _good(tmp_path)
    (tmp_path / "good.json").unlink()
    mutate(data)
    bad = _write(tmp_path, "bad.json", data)
    with pytest.raises(ValueError, match=match) as info:
        load_reports(tmp_path)
    assert str(bad) in str(info.value)


def _hostile_files(tmp_path: Path, outside: Path) -> dict[str, str]:
    """Write one file per fault a class folder may hold; returns {file name: expected words}."""
    good = _good(tmp_path)
    ridge_text = {**good, "ridge_point_flops_per_byte": "20.0"}
    big = json.dumps(good).replace('"op_overhead_s": 2e-06', '"op_overhead_s": 1' + "0" * 399)
    deep = '{"schema": "brrr-report", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    _write(tmp_path, "ridge-string.json", ridge_text)
    _write(tmp_path, "huge-int.json", big)
    _write(tmp_path, "deep.json", deep)
    _write(
        tmp_path,
        "latin1.json",
        json.dumps(good).replace("test-host", "t\u00e9st").encode("latin-1"),
    )
    _write(tmp_path, "oversized.json", " " * 2**20 + json.dumps(good))  # a report is ~2 KB
    _write(
        tmp_path,
        "nan.json",
        json.dumps(good).replace('"op_overhead_s": 2e-06', '"op_overhead_s": NaN'),
    )
    spec = json.loads(next(EXAMPLES.glob("prediction-T4-cuda.json")).read_text())
    spec["spec"]["mem_bandwidth_bytes_per_s"] = 0.0
    _write(tmp_path, "zero-bandwidth.json", spec)
    _write(outside, "secret.json", good)
    os.symlink(outside / "secret.json", tmp_path / "escape.json")
    return {
        "ridge-string.json": "ridge_point_flops_per_byte",
        "huge-int.json": "op_overhead_s",
        "deep.json": "recursion",
        "latin1.json": "utf-8",
        "oversized.json": "limit",
        "nan.json": "op_overhead_s",
        "escape.json": "outside the class folder",
        "zero-bandwidth.json": "mem_bandwidth_bytes_per_s",
    }  # fmt: skip


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_load_reports_skips_or_names_every_hostile_file(tmp_path):
    """Each file reproduces a fault that once crashed load_reports(strict=False)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "class"
    folder.mkdir()
    expected = _hostile_files(folder, outside)
    (folder / "good.json").rename(folder / "zz-good.json")
    for name, words in expected.items():  # strict: a clear error naming the file
        lone = tmp_path / f"lone-{name}"
        lone.mkdir()
        if name == "escape.json":
            (lone / name).symlink_to(outside / "secret.json")
        else:
            (lone / name).write_bytes((folder / name).read_bytes())
        with pytest.raises(ValueError, match=words) as info:
            load_reports(lone, strict=True)
        assert name in str(info.value)
    with pytest.warns(UserWarning, match=f"skipped {len(expected)}") as caught:
        reports = load_reports(folder, strict=False)
    assert [r.path.name for r in reports] == ["zz-good.json"]
    note = str(caught[0].message)
    assert all(name in note for name in expected), note


def test_load_reports_does_not_enter_linked_folders(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    bl.report(outside / "other.json", ceilings=_ceilings(host="elsewhere"))
    folder = tmp_path / "class"
    folder.mkdir()
    bl.report(folder / "mine.json", ceilings=_ceilings())
    (folder / "linked").symlink_to(outside, target_is_directory=True)
    assert [r.path.name for r in load_reports(folder)] == ["mine.json"]


def test_load_reports_strict_false_skips_bad_files_with_a_warning(tmp_path):
    bl.report(tmp_path / "good.json", ceilings=_ceilings())
    _write(tmp_path, "broken.json", "{not json")
    with pytest.raises(ValueError, match="JSONDecodeError"):
        load_reports(tmp_path)
    with pytest.warns(UserWarning, match="skipped 1") as caught:
        reports = load_reports(tmp_path, strict=False)
    assert [r.path.name for r in reports] == ["good.json"]
    assert "broken.json" in str(caught[0].message)


def test_load_reports_empty_or_missing_folder_says_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="no report among its 0"):
        load_reports(tmp_path)
    with pytest.raises(ValueError, match="not a folder"):
        load_reports(tmp_path / "nope")


def _example(device: str) -> Path:
    """A shipped spec-sheet prediction (course/instructor/example_results/)."""
    (path,) = EXAMPLES.glob(f"prediction-{device}-cuda.json")
    return path


def test_a_prediction_holds_the_spec_table_row_and_says_prediction():
    t4 = bl.spec("T4")
    rep = Report.from_dict(json.loads(_example("T4").read_text()))
    assert rep.kind == "prediction" and rep.is_prediction
    assert "prediction" in rep.label
    assert rep.matmul_peak() == t4.peak("fp32")
    assert rep.mem_bandwidth_bytes_per_s == t4.mem_bandwidth_bytes_per_s
    assert rep.ridge_point_flops_per_byte() == pytest.approx(t4.ridge_point_flops_per_byte())
    assert rep.op_overhead_s is None  # a spec sheet has no overhead figure
    assert rep.precisions == ("fp32", "fp16") and rep.matmul_peak("fp16") == t4.peak("fp16")
    assert rep.created_at is None  # nothing was measured, at no time
    again = json.loads(rep.to_json())  # schema 2 stores the spec-sheet row itself
    assert again["schema_version"] == 2 and again["spec"]["name"] == "T4"
    assert Report.from_dict(again) == rep
    with pytest.raises(TypeError, match="machine must be Ceilings or a DeviceSpec"):
        Report("T4 (prediction)", "T4")


def test_shipped_example_results_are_predictions_of_todays_spec_table(tmp_path):
    shipped = sorted(EXAMPLES.glob("*.json"))
    assert len(shipped) == 3, f"expected example results in {EXAMPLES}"
    assert all(json.loads(p.read_text())["schema_version"] == 2 for p in shipped)
    reports = load_reports(EXAMPLES)
    assert sorted(r.device_name for r in reports) == ["A100 40GB SXM", "H100 SXM", "T4"]
    for rep in reports:
        row = bl.spec(rep.device_name)
        assert rep.kind == "prediction" and rep.name == row.name
        assert rep.path.name == f"prediction-{row.name.replace(' ', '_')}-cuda.json"
        assert dict(rep.machine.peak_flops_per_s) == dict(row.peak_flops_per_s), (
            "course/instructor/example_results/ is out of date with the spec table"
        )
        assert rep.mem_bandwidth_bytes_per_s == row.mem_bandwidth_bytes_per_s
        assert rep.machine.source == row.source
    # write_predictions writes them again, byte for byte, under the same names
    fresh = {p.name: p.read_text() for p in write_predictions(tmp_path)}
    assert fresh == {p.name: p.read_text() for p in shipped}, (
        "course/instructor/example_results/ is out of date with the spec table"
    )
    (one,) = write_predictions(tmp_path / "one", names="T4")  # a name, not its letters
    assert one.name == "prediction-T4-cuda.json"


def test_recorded_reports_are_the_h100_and_h200_marked_as_recorded():
    h100, h200 = recorded_reports()
    assert "H100" in h100.device_name and "H200" in h200.device_name
    for rep in (h100, h200):
        assert rep.recorded and not rep.is_prediction and len(rep.notes) == 3  # noisy too
        assert "2026-11-22" in rep.label and "2.11.0+cu130" in rep.label  # when, with which torch
        assert rep.precisions == ("fp32", "tf32", "bf16", "fp16")
    # Their numbers are kept as recorded (the README's table).
    assert h100.matmul_peak("fp32") == pytest.approx(51.7e12, rel=0.01)
    assert h100.matmul_peak("bf16") == pytest.approx(740e12, rel=0.01)
    # one FLOP per operation, stored so: the recorded FMA-counted vector ceiling (56.2
    # TFLOP/s) halved, below the sheet's fp32 peak halved (67 TFLOP/s counts an FMA as two)
    assert h100.vector_flops_per_s == pytest.approx(56.19e12 / 2, rel=0.01)
    stored = json.loads((RECORDINGS / "reports" / "measured-h100-cuda.json").read_text())
    assert stored["ceilings"]["vector_flops_per_s"] == pytest.approx(56.19e12 / 2, rel=0.01)
    assert h100.vector_flops_per_s < bl.spec("H100").peak("fp32") / 2
    assert h100.mem_bandwidth_bytes_per_s == pytest.approx(2.99e12, rel=0.01)
    assert h200.mem_bandwidth_bytes_per_s == pytest.approx(4.22e12, rel=0.01)


def _class(tmp_path) -> list[Report]:
    bl.report(tmp_path / "ada.json", name="ada", ceilings=_ceilings())
    for device in ("T4", "A100_40GB_SXM"):
        (tmp_path / _example(device).name).write_bytes(_example(device).read_bytes())
    return load_reports(tmp_path)


def _kinds_counted(title: str) -> dict[str, int]:
    """``"1 measured, 2 predicted"`` in a plot's title, as ``{"measured": 1, "predicted": 2}``."""
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (measured|recorded|predicted)", title)}


def test_table_and_plot_show_every_machine_and_mark_predictions(tmp_path):
    reports = _class(tmp_path)
    assert [r.kind for r in reports] == ["measurement", "prediction", "prediction"]

    table = reports_table(reports)
    text, page = repr(table), table._repr_html_()
    assert len(text.splitlines()) == 2 + 3  # header, rule, one row per machine
    assert all(r.label in text for r in reports) and "n/a" in text
    assert table.muted == (False, True, True) and page.count("<tr") == 1 + 3

    ax = plot_reports(reports)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for rep in reports:
        assert any(rep.label in entry for entry in legend), (rep.label, legend)
    assert _kinds_counted(ax.get_title()) == {"measured": 1, "predicted": 2}
    # Ridge points differ by machine: CPU 20 FLOP/B, T4 8.1e12/320e9 = 25, A100 12.5.
    ridges = sorted(r.ridge_point_flops_per_byte() for r in reports)
    assert ridges == pytest.approx([12.54, 20.0, 25.31], rel=0.01)

    ax_bf16 = plot_reports(reports, dtype="bf16")  # the T4 has no bf16 peak: left out
    legend_bf16 = " ".join(t.get_text() for t in ax_bf16.get_legend().get_texts())
    assert "A100" in legend_bf16 and "T4" not in legend_bf16 and "ada" in legend_bf16
    with pytest.raises(ValueError, match="reports"):
        plot_reports([])


def test_plot_counts_recorded_machines_and_draws_predictions_apart(tmp_path):
    everyone = [*_class(tmp_path), *recorded_reports()]
    ax = plot_reports(everyone, dtype="bf16")
    assert _kinds_counted(ax.get_title()) == {"measured": 1, "recorded": 2, "predicted": 1}
    styles = {}
    for line in ax.get_lines():
        label = line.get_label()
        if not label.startswith("_"):
            styles.setdefault(label.split(" bf16")[0].split(" fp32")[0], set()).add(
                line.get_linestyle()
            )
    (a100,) = [r for r in everyone if r.is_prediction and "A100" in r.label]  # no bf16 on a T4
    assert styles[a100.label] == {":"}  # dotted: a prediction
    recorded = [k for k in styles if "2026-11-22" in k]
    assert len(recorded) == 2 and all(":" not in styles[k] for k in recorded)
    assert ":" not in styles["ada"]


def test_attainable_table_computes_how_far_apart_the_peaks_are(tmp_path):
    everyone = [*_class(tmp_path), *recorded_reports()]
    table = attainable_table(everyone, 0.125)
    peaks = [r.matmul_peak() for r in everyone]
    ratio = max(peaks) / min(peaks)  # 51.7 TFLOP/s (H100, recorded) / 200 GFLOP/s (ada)
    assert f"{round(ratio):,}x" in table.caption
    assert len(table.rows) == len(everyone)
    # at 0.125 FLOP/byte every machine is memory-bound: a few percent of its peak at most
    shares = [0.125 * r.mem_bandwidth_bytes_per_s / r.matmul_peak() for r in everyone]
    assert max(shares) < 0.05
    with pytest.raises(ValueError, match="intensity_flops_per_byte"):
        attainable_table(everyone, -1)


def test_chapters_table_lists_measurements_or_says_there_are_none(tmp_path):
    reports = _class(tmp_path)
    empty = chapters_table(reports)
    assert not empty.rows and repr(empty) == empty.caption and "bl.report(chapter=" in empty.caption
    bl.report(tmp_path / "ada.json", chapter=2, extra={"knee_repeat": 16}, ceilings=_ceilings())
    table = chapters_table(load_reports(tmp_path))
    assert table.rows == (("ada", "02", "knee_repeat", "16"),)


def test_a_schema_1_file_names_its_file_and_the_fix(tmp_path):
    old = Path(__file__).parent / "data" / "report-schema1-h200.json"
    (tmp_path / old.name).write_bytes(old.read_bytes())
    with pytest.raises(ValueError, match=r"schema_version.*re-run bl\.report\(\)") as info:
        load_reports(tmp_path)
    assert old.name in str(info.value)
    t4 = json.loads(_example("T4").read_text())
    with pytest.raises(ValueError, match=r"t4: schema, schema_version"):
        Report.from_dict(t4 | {"schema_version": 1}, where="t4")
    del t4["spec"]
    with pytest.raises(ValueError, match="t4: missing field 'spec'"):
        Report.from_dict(t4, where="t4")


def test_report_record_refuses_what_it_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="machine must be Ceilings"):
        Report("ada", {"matmul_flops_per_s": 1e12})
    with pytest.raises(ValueError, match=r"chapters\['02'\]\['x'\]"):
        Report("ada", _ceilings(), chapters={"02": {"x": float("inf")}})
    with pytest.raises(ValueError, match="name"):
        Report(" ", _ceilings())
    rep = Report("ada", _ceilings(), chapters={"02": {"knee_repeat": 16}})
    with pytest.raises(TypeError):
        rep.chapters["02"]["knee_repeat"] = 1  # frozen all the way down
    assert rep._repr_html_().count("<tr") == 2 and repr(rep) == repr(reports_table([rep]))


def test_attainable_table_takes_any_real_number():
    np = pytest.importorskip("numpy")
    reports = recorded_reports()
    assert (
        attainable_table(reports, np.float32(0.125)).rows == attainable_table(reports, 0.125).rows
    )
    for bad in (0, float("nan"), float("inf"), True, "0.125"):
        with pytest.raises((TypeError, ValueError), match="intensity_flops_per_byte"):
            attainable_table(reports, bad)
