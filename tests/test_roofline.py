"""The roofline arithmetic, the essay's numbers from the spec table, and the plot."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import matplotlib
import pytest
import torch

import brrrlib as bl
from brrrlib import roofline as rl

# A100 40GB SXM as plain numbers: the pure functions must not need the spec table.
A100_FP32_FLOPS_PER_S = 19.5e12
A100_BF16_FLOPS_PER_S = 312e12
A100_BYTES_PER_S = 1.555e12


@dataclass(frozen=True)
class _Spec:
    """Duck-typed stand-in for hardware.DeviceSpec."""

    name: str
    peak_flops_per_s: dict = field(default_factory=dict)
    mem_bandwidth_bytes_per_s: float = 0.0


@dataclass(frozen=True)
class _Ceilings:
    """Duck-typed stand-in for ceilings.Ceilings (measured on this machine)."""

    device_name: str
    matmul_flops_per_s: float
    vector_flops_per_s: float
    mem_bandwidth_bytes_per_s: float
    dtype: str = "fp32"


FAKE_A100 = _Spec(
    "A100",
    {"fp32": A100_FP32_FLOPS_PER_S, "tf32": 156e12, "bf16": A100_BF16_FLOPS_PER_S},
    A100_BYTES_PER_S,
)
FAKE_CPU = _Ceilings("test cpu", 1e11, 2e10, 1.5e10)


def _a100():
    return bl.spec("A100")


# ------------------------------------------------------------------ pure arithmetic


def test_intensity_ridge_and_attainable():
    assert rl.arithmetic_intensity(2 * 1024**3, 3 * 4 * 1024**2) == pytest.approx(1024 / 6)
    ridge = rl.ridge_point(A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S)
    assert ridge == pytest.approx(12.54, rel=1e-3)
    # below the ridge bandwidth caps the rate, above it the peak does
    assert (
        rl.attainable_flops_per_s(1.0, A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S) == A100_BYTES_PER_S
    )
    assert (
        rl.attainable_flops_per_s(100.0, A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S)
        == A100_FP32_FLOPS_PER_S
    )
    assert rl.attainable_flops_per_s(
        ridge, A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S
    ) == pytest.approx(A100_FP32_FLOPS_PER_S)


def test_lower_bound_is_the_slower_of_compute_and_memory():
    peak, bw = 1e12, 1e11
    assert rl.lower_bound_s(1e12, 1e9, peak, bw) == pytest.approx(1.0)  # compute: 1 s vs 0.01 s
    assert rl.lower_bound_s(1e9, 1e11, peak, bw) == pytest.approx(1.0)  # memory: 0.001 s vs 1 s
    assert rl.lower_bound_s(0, 0, peak, bw) == 0.0


def test_regime_flips_at_the_ridge():
    peak, bw = 1e12, 1e11  # ridge at 10 FLOP/byte
    assert rl.regime(9.9, peak, bw) == "memory"
    assert rl.regime(10.0, peak, bw) == "compute"
    assert rl.regime(10.1, peak, bw) == "compute"


def test_essay_arithmetic_on_plain_numbers():
    # a unary fp32 op reads 4 B and writes 4 B: ~100 FLOPs per element to reach the ridge
    flops_per_element = rl.ridge_point(A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S) * 8
    assert flops_per_element == pytest.approx(100, rel=0.01)
    assert rl.regime(95 / 8, A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S) == "memory"
    assert rl.regime(105 / 8, A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S) == "compute"


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: rl.arithmetic_intensity(1.0, 0), ValueError, "bytes_moved"),
        (lambda: rl.arithmetic_intensity(-1.0, 8), ValueError, "flops"),
        (lambda: rl.ridge_point(0, 1e9), ValueError, "peak_flops_per_s"),
        (lambda: rl.ridge_point(1e12, "fast"), TypeError, "mem_bandwidth_bytes_per_s"),
        (lambda: rl.lower_bound_s(1, 1, 1e12, -1), ValueError, "mem_bandwidth_bytes_per_s"),
        (lambda: rl.regime(float("nan"), 1e12, 1e9), ValueError, "intensity"),
        (lambda: rl.plot("A100"), TypeError, "device_or_spec"),
        (lambda: rl.plot(FAKE_A100, dtype="fp8"), ValueError, "dtype"),
        (lambda: rl.plot(FAKE_CPU, dtype="bf16"), ValueError, "dtype"),
        (lambda: rl.plot(FAKE_A100, dtype=torch.int8), ValueError, "dtype"),
        (lambda: rl.RooflinePoint("x", 1.0, 0.0, 1.0), ValueError, "bytes_moved"),
        (lambda: rl.RooflinePoint("x", 1.0, 1.0, 0.0), ValueError, "seconds"),
    ],
)
def test_bad_input_names_the_argument(agg, call, error, argument):
    with pytest.raises(error, match=argument):
        call()


# ------------------------------------------------------------------ devices


def _roofs(device, dtype="fp32"):
    """``{label: FLOP/s}`` of the roofs the plot draws for ``device``, and its bandwidth."""
    import matplotlib.pyplot as plt

    ax = rl.plot(device, dtype=dtype)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    ridge = next(t.xy for t in ax.texts if t.get_text().startswith("ridge"))  # (x, top roof)
    plt.close(ax.figure)
    return labels, ridge[1] / ridge[0]


def test_the_roof_of_specs_ceilings_and_pairs(agg):
    a100 = _a100()
    for device, dtype, peak, bandwidth in (
        (FAKE_A100, "fp32", A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S),
        (FAKE_A100, "bf16", A100_BF16_FLOPS_PER_S, A100_BYTES_PER_S),
        (FAKE_A100, torch.bfloat16, A100_BF16_FLOPS_PER_S, A100_BYTES_PER_S),
        (FAKE_CPU, "fp32", 1e11, 1.5e10),  # the matmul roof
        ((2e12, 1e11), "fp32", 2e12, 1e11),
        (a100, "bf16", a100.peak("bf16"), a100.mem_bandwidth_bytes_per_s),
    ):
        labels, drawn_bandwidth = _roofs(device, dtype)
        assert drawn_bandwidth == pytest.approx(bandwidth)
        value, prefix = re.search(r"([\d.]+) ([kMGT]?)FLOP/s", labels[0]).groups()  # the top roof
        assert float(value) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[
            prefix
        ] == pytest.approx(peak, rel=5e-3)
        assert rl.above_roof(("at", 1e6, 1.05 * peak), device, dtype) is False
        assert rl.above_roof(("over", 1e6, 1.2 * peak), device, dtype) is True


def test_the_roof_of_real_measured_ceilings(agg):
    ceilings = bl.Ceilings(
        device="cpu",
        device_name="test cpu",
        matmul_flops_per_s=1e11,
        vector_flops_per_s=2e10,
        mem_bandwidth_bytes_per_s=1.5e10,
        op_overhead_s=5e-6,
        matmul_flops_per_s_by_dtype={"bf16": 4e11},
    )
    for dtype, peak in (("fp32", 1e11), ("bf16", 4e11)):
        assert rl.above_roof(("over", 1e6, 1.2 * peak), ceilings, dtype)
        assert not rl.above_roof(("under", 1e6, 0.9 * peak), ceilings, dtype)
    ridge = next(t for t in rl.plot(ceilings).texts if t.get_text().startswith("ridge"))
    assert ridge.xy[0] == pytest.approx(ceilings.ridge_point_flops_per_byte())


def test_essay_arithmetic_from_the_spec_table():
    a100 = _a100()
    fp32_peak, bandwidth = a100.peak("fp32"), a100.mem_bandwidth_bytes_per_s
    assert a100.peak("bf16") / fp32_peak == pytest.approx(16.0)
    assert rl.ridge_point(fp32_peak, bandwidth) * 8 == pytest.approx(100, rel=0.01)
    assert a100.peak("bf16") / 32e6 == pytest.approx(9.75e6)
    assert a100.ridge_point_flops_per_byte("fp32") == pytest.approx(
        rl.ridge_point(fp32_peak, bandwidth)
    )


# ------------------------------------------------------------------ points


def test_point_from_counts_and_timing():
    n = 4096
    x = torch.randn(n)
    counts = bl.count(lambda: x.cos().cos())

    class FakeTiming:
        median_s = 1e-6
        label = "cos.cos"

    point = rl.RooflinePoint.from_counts(counts, FakeTiming())
    assert point.label == "cos.cos"
    assert point.intensity_flops_per_byte == pytest.approx(1 / 8)
    assert point.achieved_flops_per_s == pytest.approx(2 * n / 1e-6)
    assert point.achieved_bytes_per_s == pytest.approx(16 * n / 1e-6)
    assert rl.RooflinePoint.from_counts(counts, 2e-6, label="x").seconds == 2e-6
    assert "FLOP/byte" in repr(point)
    with pytest.raises(TypeError, match="timing"):
        rl.RooflinePoint.from_counts(counts, "fast")


def test_above_roof():
    peak, bw = 1e12, 1e11  # (peak, bandwidth) pair
    assert not rl.above_roof(("ok", 1.0, 0.9e11), (peak, bw))
    assert not rl.above_roof(("noise", 1.0, 1.05e11), (peak, bw))  # within tolerance
    assert rl.above_roof(("bad", 1.0, 2e11), (peak, bw))  # twice the memory roof
    assert rl.above_roof(("bad", 1000.0, 2e12), (peak, bw))  # twice the compute roof


# ------------------------------------------------------------------ plot


@pytest.fixture
def agg():
    import matplotlib.pyplot as plt

    previous = matplotlib.get_backend()
    plt.switch_backend("Agg")
    yield plt
    plt.close("all")
    plt.switch_backend(previous)


def _texts(ax) -> str:
    return "\n".join(t.get_text() for t in ax.texts)


def _roof_of(ax) -> str:
    """The precision of a plot's top roof, its first legend entry: "gpu bf16 matmul: ..." -> "bf16"."""
    first = ax.get_legend().get_texts()[0].get_text()
    found = re.search(r"\b(fp32|tf32|bf16|fp16)\b", first)
    assert found, first
    return found[1]


def test_plot_labels_units_ridge_and_points(agg):
    good = rl.RooflinePoint("matmul", 2 * 512**3, 3 * 4 * 512**2, 0.01)
    ax = rl.plot(FAKE_CPU, [good, ("cos", 0.125, 1e9)], extra=[FAKE_A100])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "FLOP/byte" in ax.get_xlabel()
    assert "FLOP/s" in ax.get_ylabel()
    texts = _texts(ax)
    assert "ridge" in texts and "matmul" in texts and "cos" in texts
    assert "above" not in texts
    legend = [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()]  # what each is
    for kind in ("matmul", "vector"):  # measured ceilings: two roofs, fp32 here
        assert any(t.startswith(FAKE_CPU.device_name) and "fp32" in t and kind in t for t in legend)
    assert _roof_of(ax) == "fp32"
    assert any(t.startswith("A100") for t in legend)  # overlaid spec-sheet device
    lo, hi = ax.get_xlim()
    assert lo < 0.125 < hi and lo < rl.ridge_point(A100_FP32_FLOPS_PER_S, A100_BYTES_PER_S) < hi


def test_a_point_is_judged_against_the_roof_of_its_precision(agg):
    ceilings = bl.Ceilings("cuda", "test gpu", 50e12, 28e12, 3e12, 7e-6,
                           matmul_flops_per_s_by_dtype={"bf16": 700e12})  # fmt: skip
    # an 8192^3 bf16 matmul at 600 TFLOP/s: 12x the fp32 roof, 86% of the bf16 one
    n = 8192
    bf16 = rl.RooflinePoint("mm bf16", 2 * n**3, 3 * 2 * n**2, 2 * n**3 / 600e12, "bf16")
    assert not rl.above_roof(bf16, ceilings)
    assert rl.above_roof(bf16, ceilings, dtype="fp32")  # the wrong roof would call it an error
    ax = rl.plot(ceilings, [bf16])
    assert "above" not in _texts(ax) and _roof_of(ax) == "bf16"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("bf16" in t and "matmul" in t for t in legend)


def test_plot_flags_a_point_above_the_roof(agg):
    ax = rl.plot((1e12, 1e11), [("impossible", 1.0, 5e11)])
    assert "above" in _texts(ax) and "error" in _texts(ax)  # flagged as an error, not a result


def test_plot_tensor_core_dtype_draws_the_fp32_roof_below(agg):
    fig, ax = agg.subplots()
    assert rl.plot([FAKE_A100], dtype="bf16", ax=ax) is ax
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("bf16" in t for t in legend) and any("fp32" in t and "tensor" in t for t in legend)
    with pytest.raises(TypeError, match="points"):
        rl.plot(FAKE_A100, [object()], ax=ax)
    with pytest.raises(ValueError, match="copy"):
        rl.plot(FAKE_A100, [rl.RooflinePoint("copy", 0, 8e6, 1e-3)], ax=ax)


def test_plot_of_real_spec_sheets(agg):
    a100 = _a100()
    others = [s for s in bl.hardware.all_specs() if s is not a100][:2]
    ax = rl.plot([a100, *others], dtype="fp32")
    assert len(ax.get_legend().get_texts()) >= 1 + len(others)
    assert math.isfinite(ax.get_ylim()[1])
