"""Workshop results: write, merge, validate, load, tabulate and plot reports.

Nothing here measures: a hand-made Ceilings stands in for bl.measure_ceilings().
"""

import json
from pathlib import Path

import matplotlib
import pytest
from _fakes import fake_ceilings

import brrrlib as bl
from brrrlib.ceilings import Ceilings
from brrrlib.classroom import (
    SCHEMA_VERSION,
    Report,
    from_ceilings,
    load_reports,
    plot_reports,
    prediction_from_spec,
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
    )
    return fake_ceilings(**{**values, **overrides})


def test_report_writes_a_valid_file_and_load_reads_it_back(tmp_path):
    path = bl.report(tmp_path, name="ada", ceilings=_ceilings())
    assert path == tmp_path / "ada-cpu.json"
    data = json.loads(path.read_text())
    assert data["schema"] == "brrr-report" and data["schema_version"] == SCHEMA_VERSION
    assert data["kind"] == "measurement"
    assert data["ridge_point_flops_per_byte"] == pytest.approx(20.0)  # 200e9 / 10e9
    (rep,) = load_reports(tmp_path)
    assert rep.name == "ada" and rep.device_name == "Test CPU 9000" and rep.path == path
    assert rep.op_overhead_s == pytest.approx(2e-6)
    assert rep.ridge_point_flops_per_byte() == pytest.approx(20.0)
    fresh = from_ceilings(_ceilings(), name="ada")
    assert (rep.matmul_flops_per_s, rep.host, rep.num_threads) == (200e9, "test-host", 2)
    assert rep.to_dict()["ceilings"] == fresh.to_dict()["ceilings"]


def test_default_path_is_brrr_results_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = bl.report(ceilings=_ceilings())  # name defaults to the host recorded in the ceilings
    assert path == Path("brrr-results") / "test-host-cpu.json"
    assert (tmp_path / path).is_file()


def test_reporting_chapters_again_merges_and_keeps_earlier_chapters(tmp_path):
    target = tmp_path / "me.json"
    bl.report(target, chapter=2, extra={"knee_repeat": 16}, ceilings=_ceilings())
    bl.report(target, chapter="03", extra={"flat_until_batch": 64}, ceilings=_ceilings())
    bl.report(target, chapter=2, extra={"fused_speedup": 3.5}, ceilings=_ceilings())
    (rep,) = load_reports(tmp_path)
    assert dict(rep.chapters["02"]) == {"knee_repeat": 16, "fused_speedup": 3.5}
    assert dict(rep.chapters["03"]) == {"flat_until_batch": 64}


def test_report_without_a_name_continues_this_machines_earlier_report(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = bl.report(name="ada", ceilings=_ceilings())
    again = bl.report(chapter=2, extra={"knee_repeat": 16}, ceilings=_ceilings())
    assert again == first == Path("brrr-results") / "ada-cpu.json"
    (rep,) = load_reports(tmp_path / "brrr-results")
    assert rep.name == "ada" and dict(rep.chapters["02"]) == {"knee_repeat": 16}
    # Another machine's report in the folder is left alone.
    other = bl.report(ceilings=_ceilings(host="other-host"))
    assert other == Path("brrr-results") / "other-host-cpu.json"


def test_report_refuses_to_overwrite_another_machines_file(tmp_path):
    target = tmp_path / "shared.json"
    bl.report(target, ceilings=_ceilings())
    with pytest.raises(ValueError, match="another machine"):
        bl.report(target, ceilings=_ceilings(device_name="Other CPU"))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"extra": {"x": 1}}, ValueError, "extra needs chapter"),
        ({"chapter": 2, "extra": [1, 2]}, TypeError, "extra must be a dict"),
        ({"chapter": 2, "extra": {"t": object()}}, TypeError, r"extra\['t'\]"),
        ({"chapter": 2, "extra": {"t": float("nan")}}, TypeError, r"extra\['t'\]"),
        ({"chapter": True}, TypeError, "chapter"),
        ({"path": "results.txt"}, ValueError, "ending in .json"),
        ({"path": 3}, TypeError, "path must be"),
        ({"name": "  "}, ValueError, "name"),
    ],
)
def test_report_bad_input_names_the_argument(tmp_path, monkeypatch, kwargs, error, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        bl.report(ceilings=_ceilings(), **kwargs)


def _write(folder: Path, name: str, data) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _good(tmp_path) -> dict:
    return json.loads(bl.report(tmp_path / "good.json", ceilings=_ceilings()).read_text())


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.update(schema="something-else"), "not a brrr report"),
        (lambda d: d.update(schema_version=99), "newer than this brrrlib"),
        (lambda d: d.pop("machine"), "missing field 'machine'"),
        (lambda d: d["ceilings"].pop("mem_bandwidth_bytes_per_s"), "mem_bandwidth_bytes_per_s"),
        (lambda d: d["ceilings"].update(matmul_flops_per_s="fast"), "matmul_flops_per_s"),
        (lambda d: d["ceilings"].update(matmul_flops_per_s=-1.0), "matmul_flops_per_s"),
        (lambda d: d["ceilings"].update(op_overhead_s=None), "op_overhead_s"),
        (lambda d: d.update(kind="guess"), "kind"),
        (lambda d: d.update(ridge_point_flops_per_byte=1.0), "edited by hand"),
        (lambda d: d["chapters"].update({"02": {"x": [1]}}), r"chapters\['02'\]"),
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


def test_load_reports_strict_false_skips_bad_files_with_a_warning(tmp_path):
    bl.report(tmp_path / "good.json", ceilings=_ceilings())
    _write(tmp_path, "broken.json", "{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_reports(tmp_path)
    with pytest.warns(UserWarning, match="skipped 1"):
        reports = load_reports(tmp_path, strict=False)
    assert [r.path.name for r in reports] == ["good.json"]


def test_load_reports_empty_or_missing_folder_says_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="no \\*.json"):
        load_reports(tmp_path)
    with pytest.raises(ValueError, match="not a folder"):
        load_reports(tmp_path / "nope")


def test_prediction_from_spec_uses_the_spec_table_and_says_prediction():
    t4 = bl.spec("T4")
    rep = prediction_from_spec(t4)
    assert rep.kind == "prediction" and rep.is_prediction
    assert "prediction" in rep.name and "prediction" in rep.label
    assert rep.matmul_flops_per_s == t4.peak("fp32")
    assert rep.mem_bandwidth_bytes_per_s == t4.mem_bandwidth_bytes_per_s
    assert rep.ridge_point_flops_per_byte() == pytest.approx(t4.ridge_point_flops_per_byte())
    assert rep.op_overhead_s is None  # a spec sheet has no overhead figure
    assert dict(rep.matmul_flops_per_s_by_dtype) == {"fp16": t4.peak("fp16")}
    assert prediction_from_spec(t4) == rep  # deterministic: no timestamp
    assert Report.from_dict(json.loads(rep.to_json())) == rep


def test_shipped_example_results_are_up_to_date_predictions(tmp_path):
    shipped = sorted(EXAMPLES.glob("*.json"))
    assert len(shipped) >= 2, f"expected example results in {EXAMPLES}"
    fresh = {p.name: p.read_text() for p in write_predictions(tmp_path)}
    assert {p.name: p.read_text() for p in shipped} == fresh, (
        "course/instructor/example_results/ is out of date; regenerate with "
        '`python -c "from brrrlib.classroom import write_predictions as w; '
        "w('course/instructor/example_results')\"`"
    )
    reports = load_reports(EXAMPLES)
    assert all(r.kind == "prediction" and "prediction" in r.name for r in reports)


def test_table_and_plot_show_every_machine_and_mark_predictions(tmp_path):
    bl.report(tmp_path / "ada.json", name="ada", ceilings=_ceilings())
    write_predictions(tmp_path, names=("T4", "A100"))
    reports = load_reports(tmp_path)
    assert [r.kind for r in reports] == ["measurement", "prediction", "prediction"]

    table = reports_table(reports)
    text, page = repr(table), table._repr_html_()
    assert len(text.splitlines()) == 2 + 3  # header, rule, one row per machine
    assert "ada" in text and "T4 (prediction from spec sheet)" in text and "n/a" in text
    assert page.count("<tr") == 1 + 3 and "not measurements" in page

    ax = plot_reports(reports)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for name in ("ada", "T4 (prediction from spec sheet)", "A100 40GB SXM (prediction"):
        assert any(name in entry for entry in legend), (name, legend)
    assert "1 measured, 2 predicted" in ax.get_title()
    # Ridge points differ by machine: CPU 20 FLOP/B, T4 8.1e12/320e9 = 25, A100 12.5.
    ridges = sorted(r.ridge_point_flops_per_byte() for r in reports)
    assert ridges == pytest.approx([12.54, 20.0, 25.31], rel=0.01)

    ax_bf16 = plot_reports(reports, dtype="bf16")  # the T4 has no bf16 peak: left out
    legend_bf16 = " ".join(t.get_text() for t in ax_bf16.get_legend().get_texts())
    assert "A100" in legend_bf16 and "T4" not in legend_bf16 and "ada" not in legend_bf16
    with pytest.raises(ValueError, match="reports"):
        plot_reports([])
