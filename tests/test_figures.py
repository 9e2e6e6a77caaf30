"""Tests for brrrlib.figures: each figure draws what it is given, labelled, without measuring."""

from __future__ import annotations

import itertools
import math
import re
from types import SimpleNamespace

import matplotlib
import pytest

matplotlib.use("Agg")  # no display in tests

from _fakes import fake_ceilings  # noqa: E402

from brrrlib import figures  # noqa: E402

CEILINGS = SimpleNamespace(
    device="cpu",
    device_name="fake cpu",
    matmul_flops_per_s=1.5e11,
    mem_bandwidth_bytes_per_s=1.2e10,
    op_overhead_s=4e-6,
)


def _quantities(text: str, unit: str) -> list[float]:
    """Every number written in ``unit`` in ``text``, its SI prefix applied: "150 GFLOP/s" -> 1.5e11."""
    scale = dict(
        zip("kMGTPmµn", (1e3, 1e6, 1e9, 1e12, 1e15, 1e-3, 1e-6, 1e-9), strict=True), **{"": 1}
    )
    found = re.findall(rf"([\d.]+) ([kMGTPmµn]?){re.escape(unit)}", text)
    return [pytest.approx(float(v) * scale[p], rel=5e-3) for v, p in found]


def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts) + " " + ax.get_title()


def test_factory_diagram_labels_the_three_numbers():
    ax = figures.factory_diagram(CEILINGS)
    text = _texts(ax)
    assert 1.5e11 in _quantities(text, "FLOP/s") and 1.2e10 in _quantities(text, "B/s")
    assert 4e-6 in _quantities(text, "s")  # the cost per op
    assert "Warehouse" in text and "Factory" in text and "Manager" in text
    assert CEILINGS.device_name in text


def test_factory_diagram_without_numbers_uses_words():
    text = _texts(figures.factory_diagram())
    assert "bandwidth" in text and "FLOP/s" in text


def test_sweep_plot_draws_series_and_references():
    ylabel = "% of peak"
    ax = figures.sweep_plot(
        [32, 64, 128],
        {"measured": [1, 2, 3]},
        models={"model": [1.5, 2.5, 3.5]},
        xlabel="n",
        ylabel=ylabel,
        hlines={"peak": 4},
    )
    assert len(ax.lines) == 3 and ax.get_xlabel() == "n" and ax.get_ylabel() == ylabel
    measured, model = ax.lines[:2]
    assert measured.get_color() == model.get_color() and model.get_linestyle() == "--"
    with pytest.raises(ValueError, match="series 'm'"):
        figures.sweep_plot([1, 2], {"a": [1, 2]}, models={"m": [1]}, xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="series 'bad'"):
        figures.sweep_plot([1, 2], {"bad": [1]}, xlabel="x", ylabel="y")
    with pytest.raises(ValueError, match="ys"):
        figures.sweep_plot([1, 2], {}, xlabel="x", ylabel="y")


def test_generations_plot_shows_ridge_growth():
    old = SimpleNamespace(
        name="old", peak_flops_per_s={"fp16": 100e12}, mem_bandwidth_bytes_per_s=1e12
    )
    new = SimpleNamespace(
        name="new", peak_flops_per_s={"fp16": 800e12}, mem_bandwidth_bytes_per_s=2e12
    )
    ax = figures.generations_plot([old, new])
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == [1.0, 1.0, 2.0, 8.0]  # relative to the first device
    ridges = re.findall(r"ridge (\d+) FLOP/byte", _texts(ax))
    assert ridges == ["100", "400"]  # fp16 peak / bandwidth of each
    with pytest.raises(ValueError, match="specs"):
        figures.generations_plot([old])


def test_decision_flow_names_every_step_and_each_regime():
    text = _texts(figures.decision_flow())
    for step in range(1, 7):
        assert f"{step} ·" in text
    for regime in ("compute-bound", "memory-bound", "overhead-bound"):
        assert regime in text
    assert "bl.benchmark" in text and "bl.count" in text


# --------------------------------------------------------------------------- chapter 00 to 02 additions


def _overlaps(ax):
    """Pairs of drawn texts (annotations, title, legend box) whose boxes overlap, in pixels."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text()]
    legend = ax.get_legend()
    if legend is not None:
        boxes.append(("legend", legend.get_window_extent(renderer)))
    return [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a.overlaps(box_b)
    ]


def _h100():
    from brrrlib import classroom

    return classroom.recorded_reports()[0].machine


def test_factory_diagram_shows_the_factorys_own_store_and_its_fastest_precision():
    from _fakes import fake_ceilings

    text = _texts(figures.factory_diagram(fake_ceilings()))
    assert "registers" in text and "SRAM" in text and "kernel" in text
    assert "bf16" not in text  # no faster precision measured: fp32 only
    fast = fake_ceilings(matmul_flops_per_s_by_dtype={"bf16": 800e9, "fp16": 2e9})
    text = _texts(figures.factory_diagram(fast))
    assert _quantities(text, "FLOP/s") == [200e9, 800e9] and "fp32" in text and "bf16" in text
    assert "fp16" not in text
    h100 = _h100()
    text = _texts(figures.factory_diagram(h100))
    fastest = h100.matmul_flops_per_s_by_dtype["fp16"]
    assert fastest in _quantities(text, "FLOP/s") and "fp16" in text and "H100" in text


@pytest.mark.parametrize("machine", ["cpu", "h100"])
def test_regimes_roofline_keys_points_in_a_legend_beside_the_axes_without_overlaps(machine):
    from _fakes import fake_ceilings

    from brrrlib import hardware, roofline

    epyc = dict(matmul_flops_per_s=338e9, mem_bandwidth_bytes_per_s=40e9, vector_flops_per_s=59.5e9)
    c = fake_ceilings(**epyc) if machine == "cpu" else _h100()
    bw, peak = c.mem_bandwidth_bytes_per_s, c.matmul_flops_per_s
    points = [
        roofline.RooflinePoint("x.add_(1), 10 elements", 10, 80, 2 * c.op_overhead_s),
        roofline.RooflinePoint("x.add_(1), 16 Mi elements", 2**24, 2**27, 1.1 * 2**27 / bw),
        roofline.RooflinePoint("matmul", 2 * 512**3, 12 * 512**2, 2 * 512**3 / (0.58 * peak)),
    ]
    ax = figures.regimes_roofline(c, points, beside=[hardware.spec("A100")])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for p in points:
        assert any(label.startswith(p.label + ":") for label in labels), labels
    assert any("A100" in label for label in labels)
    assert "intensity" in ax.get_xlabel() and "(FLOP/byte)" in ax.get_xlabel()
    assert "FLOP/s" in ax.get_ylabel() and any("fp32" in label for label in labels)
    assert _overlaps(ax) == []
    ax.figure.canvas.draw()
    for text in (t for t in ax.texts if t.get_text().startswith("ridge")):
        box = text.get_window_extent().padded(6)  # a marker's half width
        for p in points:
            x, y = ax.transData.transform((p.intensity_flops_per_byte, p.achieved_flops_per_s))
            assert not box.contains(x, y), (text.get_text(), p.label)
    legend_box = ax.get_legend().get_window_extent()
    assert legend_box.x0 >= ax.get_window_extent().x1  # beside the plot, covering nothing
    with pytest.raises(ValueError, match="points"):
        figures.regimes_roofline(c, [])


def test_recorded_sweeps_load_what_the_recording_holds():
    rec = figures.recorded_sweeps()
    assert "H100" in rec.device_name and rec.date == "2026-11-22" and rec.torch_version
    assert all(part in rec.label for part in (rec.device_name, rec.date, rec.torch_version))
    assert rec.precisions == ("fp32", "tf32", "bf16", "fp16")
    # the README's numbers: best fp32 52.6, tf32 381.5, bf16 728.6 TFLOP/s
    for precision, tflops in (("fp32", 52.6), ("tf32", 381.5), ("bf16", 728.6)):
        assert rec.best_flops_per_s(precision) == pytest.approx(tflops * 1e12, rel=0.01)
    n, flops = rec.matmul_line("fp32")[0]
    (_, _, seconds) = next(row for row in rec.matmul if row[:2] == ("fp32", n))
    assert flops == pytest.approx(2 * n**3 / seconds)
    eager = rec.repeat_line("fp32", "eager")
    assert max(r for r, _ in eager) == 64  # not recorded past 64: never a NaN
    assert all(math.isfinite(s) for _, s in eager + rec.repeat_line("bf16", "fused"))
    with pytest.raises(ValueError, match="precision"):
        rec.best_flops_per_s("fp8")


def test_recorded_figures_say_they_are_recorded_with_axes_in_units():
    rec = figures.recorded_sweeps()
    ladder = figures.recorded_matmul_ladder(rec)
    assert "Recorded" in ladder.get_title() and rec.label in ladder.get_title()
    assert "TFLOP/s" in ladder.get_ylabel() and "size" in ladder.get_xlabel()
    legend = [t.get_text() for t in ladder.get_legend().get_texts()]
    best = f"{rec.best_flops_per_s('fp32') / 1e12:.1f}"
    assert legend[0].startswith("fp32:") and best in legend[0] and len(legend) == 4
    sweep = figures.recorded_repeat_sweep(rec)
    assert rec.label in sweep.get_title() and f"{2**27 >> 20} Mi" in sweep.get_ylabel()
    assert "(ms)" in sweep.get_ylabel() and "repeat" in sweep.get_xlabel()
    legend = {tuple(t.get_text().split(", ")) for t in sweep.get_legend().get_texts()}
    assert legend == set(itertools.product(("eager", "fused"), ("fp32", "bf16")))
    assert _overlaps(ladder) == [] and _overlaps(sweep) == []


# ------------------------------------------------------------------ the host and the remedies


def test_flops_per_python_add_divides_each_peak_by_the_python_speed():
    from brrrlib.hardware import all_specs

    here = SimpleNamespace(device_name="fake cpu",
                           matmul_flops_per_s_by_dtype={"fp32": 2e11, "bf16": 4e11})  # fmt: skip
    ax = figures.flops_per_python_add(1e7, here)
    widths = [p.get_width() for p in ax.patches]
    assert widths[-1] == pytest.approx(4e11 / 1e7)  # this machine at its fastest precision
    with_bf16 = [s for s in all_specs() if "bf16" in s.peak_flops_per_s]
    assert widths[:-1] == pytest.approx([s.peak("bf16") / 1e7 for s in with_bf16])
    assert ax.get_xscale() == "log" and "Python" in ax.get_xlabel()


def test_timelines_draw_one_row_per_trace_and_name_where_it_ran():
    from brrrlib import trace

    recorded = [trace.recorded("add_1_element"), trace.recorded("short_chain_1k")]
    fig = figures.timelines(recorded)
    assert len(fig.axes) >= 2
    titles = [ax.get_title(loc="left") for ax in fig.axes[:2]]
    assert all(tr.device_name in t and "busy" in t for tr, t in zip(recorded, titles, strict=True))
    with pytest.raises(ValueError, match="traces"):
        figures.timelines([])


def _cmp(before_s, after_s, low, high):
    """A stand-in for bl.compare's Comparison: ratio = after / before, with its interval."""
    ratio = after_s / before_s
    return SimpleNamespace(a=SimpleNamespace(median_s=before_s), b=SimpleNamespace(median_s=after_s),
                           ratio=ratio, speedup=1 / ratio, low=low, high=high)  # fmt: skip


def test_remedy_bars_colour_each_interval_and_skip_what_was_not_measured():
    ax = figures.remedy_bars({
        "faster": _cmp(4e-3, 1e-3, 0.2, 0.3),
        "slower": _cmp(1e-3, 2e-3, 1.8, 2.2),
        "can't tell": _cmp(1e-3, 1e-3, 0.9, 1.1),
        "needs CUDA": None,
    })  # fmt: skip
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    named = [matplotlib.colors.to_hex(c) for c in ("tab:green", "tab:red", "tab:gray")]
    assert colours == named
    assert [p.get_width() for p in ax.patches] == pytest.approx([4.0, 0.5, 1.0])
    assert "measured" in ax.get_xlabel() and "CUDA" in ax.get_xlabel()
    with pytest.raises(ValueError, match="comparisons"):
        figures.remedy_bars({"needs CUDA": None})


def test_block_steps_put_each_step_under_its_own_roof():
    ceilings = fake_ceilings(mem_bandwidth_bytes_per_s=1e10, matmul_flops_per_s=1e11,
                             matmul_flops_per_s_by_dtype={"fp32": 1e11, "bf16": 4e11})  # fmt: skip
    steps = {
        "fp32, batch 1": (SimpleNamespace(flops=1e6, bytes_moved=1e6, precision="fp32"), 1e-3, 1),
        "bf16, batch 4": (SimpleNamespace(flops=4e6, bytes_moved=1e6, precision="bf16"), 1e-3, 4),
    }
    fig = figures.block_steps(ceilings, steps)
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.texts if "ridge" not in t.get_text()] == ["1", "2"]
    roofs = [line.get_label() for line in left.lines if "matmul" in line.get_label()]
    assert [r.split(" matmul")[0][-4:] for r in roofs] == ["fp32", "bf16"]  # one each, in order
    assert [p.get_width() for p in right.patches] == pytest.approx([1e-3, 0.25e-3])
    assert "sequence" in right.get_xlabel() and "intensity" in left.get_xlabel()
