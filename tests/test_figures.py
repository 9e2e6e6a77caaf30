"""Tests for brrrlib.figures: each figure draws what it is given, labelled, without measuring."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import pytest

matplotlib.use("Agg")  # no display in tests

from brrrlib import figures  # noqa: E402

CEILINGS = SimpleNamespace(
    device="cpu",
    device_name="fake cpu",
    matmul_flops_per_s=1.5e11,
    mem_bandwidth_bytes_per_s=1.2e10,
    op_overhead_s=4e-6,
)


def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts) + " " + ax.get_title()


def test_factory_diagram_labels_the_three_numbers():
    ax = figures.factory_diagram(CEILINGS)
    text = _texts(ax)
    assert "150 GFLOP/s" in text and "12 GB/s" in text and "4 µs per op" in text
    assert "Warehouse" in text and "Factory" in text and "Manager" in text
    assert "fake cpu" in text


def test_factory_diagram_without_numbers_uses_words():
    text = _texts(figures.factory_diagram())
    assert "bandwidth" in text and "FLOP/s" in text


def test_sweep_plot_draws_series_and_references():
    ax = figures.sweep_plot(
        [32, 64, 128],
        {"measured": [1, 2, 3]},
        models={"model": [1.5, 2.5, 3.5]},
        xlabel="n",
        ylabel="% of peak",
        hlines={"peak": 4},
    )
    assert len(ax.lines) == 3 and ax.get_xlabel() == "n" and ax.get_ylabel() == "% of peak"
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
    assert "ridge 100 FLOP/B" in _texts(ax) and "ridge 400 FLOP/B" in _texts(ax)
    with pytest.raises(ValueError, match="at least two"):
        figures.generations_plot([old])


def test_decision_flow_names_every_step_and_each_regime():
    text = _texts(figures.decision_flow())
    for step in range(1, 7):
        assert f"{step} ·" in text
    for regime in ("compute-bound", "memory-bound", "overhead-bound"):
        assert regime in text
    assert "bl.benchmark" in text and "bl.count" in text


def test_speedup_bars_colours_wins_and_losses():
    ax = figures.speedup_bars({"fused": (2e-3, 1e-3), "worse": (1e-6, 2e-6)}, title="remedies")
    widths = sorted(round(p.get_width(), 6) for p in ax.patches)
    assert widths == [0.5, 2.0]
    assert "2 ms -> 1 ms" in " ".join(t.get_text() for t in ax.get_yticklabels())
    assert "speed-up" in ax.get_xlabel()
    with pytest.raises(ValueError, match="before_s, after_s"):
        figures.speedup_bars({"bad": (1.0, 0.0)})
