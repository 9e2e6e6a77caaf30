"""Tests for brrrlib.widgets: the repeat (chapter 02) and batch (chapter 03) explorers.

Most tests inject a fake measure function and fixed ceilings, so they check
the explorers' logic (what they ask the library to measure, caching, memory
refusal, the readout and its CSS classes) without timing anything. Two smoke
tests measure for real on tiny tensors.
"""

from __future__ import annotations

import pytest
import torch
from _fakes import fake_ceilings
from torch import nn

import brrrlib as bl
from brrrlib import _batch_explorer, _explorer, _repeat_explorer, widgets

PNG_MAGIC = b"\x89PNG"


@pytest.fixture
def ceilings():
    """A plausible laptop: 40 GFLOP/s vector, 10 GB/s, 5 µs per op (knee at repeat 32)."""
    return fake_ceilings(
        device_name="test CPU",
        vector_flops_per_s=40e9,
        mem_bandwidth_bytes_per_s=10e9,
        op_overhead_s=5e-6,
    )


def _timing(seconds: float) -> bl.Timing:
    return bl.Timing(samples_s=(seconds,) * 5, device="cpu", label="fake")


class FakeRepeat:
    """Records every (size, repeat, mode) asked for; answers with a roofline-shaped time."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[tuple[int, int, str]] = []
        self.fail = fail

    def __call__(self, *, size, repeat, mode, device):
        self.calls.append((size, repeat, mode))
        if self.fail is not None:
            raise self.fail
        one_pass_s = 8 * size / 10e9
        t = repeat * one_pass_s if mode == "eager" else max(one_pass_s, repeat * size / 40e9)
        moved = (repeat if mode == "eager" else 1) * 8 * size
        return widgets.RepeatPoint(
            size=size,
            repeat=repeat,
            mode=mode,
            device=str(device),
            timing=_timing(t),
            flops=repeat * size,
            bytes_moved=moved,
        )


@pytest.fixture(autouse=True)
def fast_png(request, monkeypatch):
    """Skip rasterising (the slow part of a redraw) except in tests that ask for real_png.

    The figure is still built, so the drawing code runs; each "PNG" is
    distinct, so a test can still see that a move redrew the plot.
    """
    if "real_png" in request.fixturenames:
        return
    counter = iter(range(10**9))
    monkeypatch.setattr(_explorer, "_png", lambda fig: PNG_MAGIC + b"%d" % next(counter))


@pytest.fixture
def real_png():
    """Marker fixture: this test renders real PNG bytes (see fast_png)."""


@pytest.fixture
def plenty_of_memory(monkeypatch):
    monkeypatch.setattr(_explorer, "_available_memory_bytes", lambda device: 64 * 2**30)


def _repeat(ceilings, fake, **kwargs):
    return widgets.RepeatExplorer(device="cpu", ceilings=ceilings, measure=fake, **kwargs)


# ------------------------------------------------------------------ repeat explorer


def test_repeat_dom_contract(ceilings, plenty_of_memory, real_png):
    ex = _repeat(ceilings, FakeRepeat())
    assert "brrr-repeat-explorer" in ex.widget._dom_classes
    images = [w for w in _descendants(ex.widget) if "brrr-plot" in w._dom_classes]
    readouts = [w for w in _descendants(ex.widget) if "brrr-readout" in w._dom_classes]
    assert len(images) == 1 and bytes(images[0].value).startswith(PNG_MAGIC)
    assert len(readouts) == 1
    text = readouts[0].value
    assert "repeat 1 · eager" in text and "B/s" in text and "FLOP/s" in text
    assert "brrr-error" not in readouts[0]._dom_classes
    sliders = [w for w in _descendants(ex.widget) if getattr(w, "description", "") == "repeat"]
    assert sliders and sliders[0].continuous_update is False


def test_repeat_measures_initial_point_once_and_caches(ceilings, plenty_of_memory):
    fake = FakeRepeat()
    ex = _repeat(ceilings, fake)
    size = ex.size
    assert fake.calls == [(size, 1, "eager")]
    ex.set(repeat=8)
    ex.set(repeat=1)
    ex.set(repeat=8)
    assert fake.calls == [(size, 1, "eager"), (size, 8, "eager")]
    ex.set(mode="fused")
    ex.set(mode="eager")
    assert fake.calls[-1] == (size, 8, "fused") and len(fake.calls) == 3
    assert [(p.repeat, p.mode) for p in ex.points] == [(1, "eager"), (8, "eager"), (8, "fused")]
    assert ex.current.repeat == 8 and ex.current.mode == "eager"


def test_repeat_one_set_with_three_changes_measures_once(ceilings, plenty_of_memory):
    fake = FakeRepeat()
    ex = _repeat(ceilings, fake)
    other = next(s for s in ex.size_options if s != ex.size)
    ex.set(repeat=4, size=other, mode="fused")
    assert fake.calls[1:] == [(other, 4, "fused")]


def test_repeat_slider_move_measures(ceilings, plenty_of_memory):
    fake = FakeRepeat()
    ex = _repeat(ceilings, fake)
    before = ex._plot.value
    ex._repeat_w.value = 16  # what the browser does
    assert fake.calls[-1] == (ex.size, 16, "eager")
    assert "repeat 16" in ex._readout.value
    assert ex._plot.value != before


def test_repeat_knee_and_default_slider(ceilings, plenty_of_memory):
    # repeat* = vector FLOP/s x 8 bytes / bandwidth = 40e9 x 8 / 10e9 = 32
    assert widgets.predicted_knee_repeat(ceilings) == pytest.approx(32)
    ex = _repeat(ceilings, FakeRepeat())
    assert ex.predicted_knee_repeat == pytest.approx(32)
    assert max(ex.repeat_options) == 128  # the power of two >= 3 x knee
    assert ex.repeat_options[:6] == (1, 2, 3, 4, 6, 8)
    assert "32" in ex._readout.value  # the readout states the knee


def test_repeat_max_repeat_argument(ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(), max_repeat=20)
    assert max(ex.repeat_options) == 20 and 16 in ex.repeat_options


def test_repeat_bad_arguments(ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat())
    with pytest.raises(ValueError, match="repeat"):
        ex.set(repeat=5)
    with pytest.raises(ValueError, match="mode"):
        ex.set(mode="jit")
    with pytest.raises(ValueError, match="size"):
        ex.set(size=12345)
    with pytest.raises(ValueError, match="max_repeat"):
        _repeat(ceilings, FakeRepeat(), max_repeat=0)
    with pytest.raises(ValueError, match="device"):
        widgets.RepeatExplorer(device="not-a-device", ceilings=ceilings, measure=FakeRepeat())
    with pytest.raises(ValueError, match="mode"):
        widgets.measure_repeat(1024, 2, "lazy", "cpu")


def test_repeat_refuses_what_does_not_fit(ceilings, monkeypatch):
    monkeypatch.setattr(_explorer, "_available_memory_bytes", lambda device: 1000)
    fake = FakeRepeat()
    ex = _repeat(ceilings, fake)  # the kernel stays alive: no exception
    assert fake.calls == [] and ex.current is None
    assert "brrr-error" in ex._readout._dom_classes
    assert "free" in ex.error and "smaller" in ex.error
    assert bytes(ex._plot.value).startswith(PNG_MAGIC)  # still draws the predictions
    monkeypatch.setattr(_explorer, "_available_memory_bytes", lambda device: 64 * 2**30)
    assert ex.set(repeat=2) is not None
    assert ex.error is None and "brrr-error" not in ex._readout._dom_classes


@pytest.mark.parametrize(
    "exc",
    [
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 GB"),
    ],
)
def test_repeat_out_of_memory_is_reported(ceilings, plenty_of_memory, exc):
    fake = FakeRepeat(fail=exc)
    ex = _repeat(ceilings, fake)
    assert ex.current is None and "out of memory" in ex.error
    assert "brrr-error" in ex._readout._dom_classes
    fake.fail = None
    ex.set(repeat=2)
    assert ex.error is None and "brrr-error" not in ex._readout._dom_classes
    assert "repeat 2" in ex._readout.value


def test_repeat_other_errors_are_shown_not_raised(ceilings, plenty_of_memory):
    ex = _repeat(ceilings, FakeRepeat(fail=ValueError("boom")))
    assert "boom" in ex.error and "boom" in ex._readout.value
    assert isinstance(ex.exception, ValueError)  # kept for the learner to inspect
    assert ex.points == ()


def test_repeat_busy_message_says_compiling(ceilings, plenty_of_memory):
    seen = []

    class Spy(FakeRepeat):
        def __call__(self, **kw):
            seen.append((ex._readout.value, set(ex._readout._dom_classes)))
            return super().__call__(**kw)

    ex = None
    ex = _repeat(ceilings, Spy())
    ex.set(mode="fused")
    text, classes = seen[-1]
    assert "compiling" in text and "brrr-busy" in classes
    assert "brrr-busy" not in ex._readout._dom_classes


def test_repeat_skips_slow_eager_points_unless_forced(ceilings, plenty_of_memory, monkeypatch):
    fake = FakeRepeat()
    ex = _repeat(ceilings, fake)  # repeat 1 eager: one pass = 8 x size / 10 GB/s
    one_pass_s = ex.current.median_s
    monkeypatch.setattr(_repeat_explorer, "MAX_MEASURE_S", 7 * 10 * one_pass_s)  # 10 passes allowed
    ex.set(repeat=8)
    ex.set(repeat=12)  # 7 calls x 12 passes: over the limit
    assert [c[1] for c in fake.calls] == [1, 8]
    assert ex.current is None and ex.error is None
    assert "not measured" in ex._readout.value and "force=True" in ex._readout.value
    assert "repeat 12" in ex._readout.value
    ex.set(mode="fused")  # one pass: always measured
    ex.set(mode="eager", force=True)
    assert [c[1:] for c in fake.calls[2:]] == [(12, "fused"), (12, "eager")]


def test_repeat_point_derived_numbers():
    p = widgets.RepeatPoint(
        size=1000,
        repeat=4,
        mode="fused",
        device="cpu",
        timing=_timing(2e-6),
        flops=4000,
        bytes_moved=8000,
    )
    assert p.flops_per_s == pytest.approx(2e9)
    assert p.bytes_per_s == pytest.approx(4e9)
    assert p.intensity_flops_per_byte == pytest.approx(0.5)
    assert "GB/s" in repr(p)


# ------------------------------------------------------------------ batch explorer


class FakeBatch:
    """Records every batch asked for; time = fixed + per-sample x batch."""

    def __init__(self, fixed_s=1e-3, per_sample_s=1e-6, weight_bytes=1000, fail=None) -> None:
        self.calls: list[int] = []
        self.fixed_s, self.per_sample_s, self.weight_bytes = fixed_s, per_sample_s, weight_bytes
        self.fail = fail

    def __call__(self, *, batch, device):
        self.calls.append(batch)
        if self.fail is not None:
            raise self.fail
        return widgets.BatchPoint(
            batch=batch,
            device=str(device),
            timing=_timing(self.fixed_s + self.per_sample_s * batch),
            flops=2 * 64 * 64 * batch,
            bytes_moved=self.weight_bytes + 4 * 128 * batch,
            weight_bytes=self.weight_bytes,
            ops=3,
        )


def _tiny_model():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _batch(ceilings, fake, **kwargs):
    kwargs.setdefault("model", _tiny_model())
    return widgets.BatchExplorer(ceilings=ceilings, measure=fake, **kwargs)


def test_batch_dom_contract_and_initial_point(ceilings, plenty_of_memory, real_png):
    fake = FakeBatch()
    ex = _batch(ceilings, fake)
    assert fake.calls == [1]
    assert "brrr-batch-explorer" in ex.widget._dom_classes
    classes = [c for w in _descendants(ex.widget) for c in w._dom_classes]
    assert classes.count("brrr-plot") == 1 and classes.count("brrr-readout") == 1
    assert bytes(ex._plot.value).startswith(PNG_MAGIC)
    assert "batch 1 ·" in ex._readout.value and "per sample" in ex._readout.value


def test_batch_measures_point_and_half_once(ceilings, plenty_of_memory):
    fake = FakeBatch()
    ex = _batch(ceilings, fake, max_batch=64)
    assert ex.batch_options == (1, 2, 4, 8, 16, 32, 64)
    ex.set(batch=8)
    assert fake.calls == [1, 8, 4]  # the point, then half of it for the doubling ratio
    ex.set(batch=8)
    assert fake.calls == [1, 8, 4]
    ex.set(batch=16)
    assert fake.calls == [1, 8, 4, 16]
    ex.set(batch=4)  # its half (2) was never measured
    ex.set(batch=16)
    assert fake.calls == [1, 8, 4, 16, 2]
    assert [p.batch for p in ex.points] == [1, 2, 4, 8, 16]


def test_batch_readout_names_the_regime(ceilings, plenty_of_memory):
    # fixed 1 ms, 1 µs per sample: flat at small batch, linear past ~1000.
    ex = _batch(ceilings, FakeBatch(fixed_s=1e-3, per_sample_s=1e-6), max_batch=65536)
    ex.set(batch=8)
    assert "×1.00" in ex._readout.value and "overhead signature" in ex._readout.value
    ex.set(batch=65536)
    text = ex._readout.value
    assert "×1.9" in text and "past the knee" in text
    # 512 B per sample at 10 GB/s (51 ns) outweighs 8 kFLOP at 200 GFLOP/s (41 ns).
    assert "bandwidth-bound" in text and "compute-bound" not in text


def test_batch_growth_far_below_the_knee_is_questioned(ceilings, plenty_of_memory):
    fake = FakeBatch(fixed_s=1e-3, per_sample_s=1e-6)
    ex = _batch(ceilings, fake, max_batch=65536)
    fake.fixed_s = 3e-3  # the batch-2 call is 3x slower: not what the model predicts
    ex.set(batch=2)
    assert "past the knee" in ex._readout.value and "remeasure" in ex._readout.value


def test_batch_weights_bound_is_not_called_overhead(ceilings, plenty_of_memory):
    # 100 MB of weights at 10 GB/s: 10 ms to read them, the whole 10 ms call.
    ex = _batch(ceilings, FakeBatch(fixed_s=10e-3, weight_bytes=100_000_000), max_batch=8)
    ex.set(batch=4)
    text = ex._readout.value
    assert "bandwidth on the weights, not overhead" in text
    assert "overhead signature" not in text


def test_batch_noise_is_called_noise(ceilings, plenty_of_memory):
    fake = FakeBatch()
    ex = _batch(ceilings, fake, max_batch=8)
    fake.fixed_s = 1e-4  # the batch-2 call is 10x faster than the batch-1 call
    ex.set(batch=2)
    assert "noise" in ex._readout.value
    ex.remeasure()
    assert fake.calls == [1, 2, 2, 1]


def test_batch_refuses_what_does_not_fit(ceilings, monkeypatch):
    monkeypatch.setattr(_explorer, "_available_memory_bytes", lambda device: 64 * 2**30)
    fake = FakeBatch()
    ex = _batch(ceilings, fake, max_batch=1024)
    monkeypatch.setattr(_explorer, "_available_memory_bytes", lambda device: 1000)
    assert ex.set(batch=1024) is None
    assert fake.calls == [1] and "brrr-error" in ex._readout._dom_classes
    assert "batch 1024" in ex.error
    ex.set(batch=1)  # cached: no memory needed, error cleared
    assert ex.error is None and "brrr-error" not in ex._readout._dom_classes


def test_batch_out_of_memory_is_reported(ceilings, plenty_of_memory):
    fake = FakeBatch()
    ex = _batch(ceilings, fake, max_batch=8)
    fake.fail = torch.OutOfMemoryError("CUDA out of memory")
    assert ex.set(batch=8) is None and "out of memory" in ex.error


def test_batch_bad_arguments(ceilings, plenty_of_memory):
    with pytest.raises(TypeError, match="model"):
        _batch(ceilings, FakeBatch(), model="mlp")
    with pytest.raises(ValueError, match="make_input"):
        _batch(ceilings, FakeBatch(), model=nn.Sequential(nn.ReLU()))
    with pytest.raises(ValueError, match="max_batch"):
        _batch(ceilings, FakeBatch(), max_batch=-1)
    ex = _batch(ceilings, FakeBatch(), max_batch=8)
    with pytest.raises(ValueError, match="batch"):
        ex.set(batch=3)


def test_default_mlp_width_follows_the_ceilings(ceilings):
    small = _batch_explorer._default_mlp(ceilings, torch.device("cpu"))
    assert small[0].in_features == 128  # sqrt(5e-6 x 200e9 / 32) = 177 -> nearest power of two
    big = _batch_explorer._default_mlp(
        bl.Ceilings(
            device="cuda",
            device_name="big GPU",
            matmul_flops_per_s=50e12,
            vector_flops_per_s=50e12,
            mem_bandwidth_bytes_per_s=3e12,
            op_overhead_s=5e-6,
        ),
        torch.device("cpu"),
    )
    assert big[0].in_features > small[0].in_features
    a, b = (_batch_explorer._default_mlp(ceilings, torch.device("cpu")) for _ in range(2))
    assert torch.equal(a[0].weight, b[0].weight)  # seeded, reproducible


# ------------------------------------------------------------------ real measurements


def test_measure_repeat_real_tiny():
    p = widgets.measure_repeat(4096, 3, "eager", "cpu", budget_s=0.01)
    assert p.flops == 3 * 4096  # one FLOP per element per multiply (bl.count)
    assert p.bytes_moved == 3 * 2 * 4 * 4096  # each multiply reads and writes 4 bytes
    assert p.median_s > 0 and p.compile_s is None
    assert p.timing.device == "cpu"


def test_repeat_explorer_real_tiny(ceilings, plenty_of_memory):
    ex = widgets.RepeatExplorer(size=4096, device="cpu", ceilings=ceilings, max_repeat=8)
    ex.set(repeat=8)
    one, eight = (p for p in ex.points if p.mode == "eager")
    assert (one.repeat, eight.repeat) == (1, 8)
    assert eight.flops == 8 * one.flops and eight.bytes_moved == 8 * one.bytes_moved
    # Eight passes cost more than one; generous margin for a busy machine.
    assert eight.median_s > 1.2 * one.median_s
    assert ex.error is None


def test_batch_explorer_real_tiny(ceilings, plenty_of_memory):
    ex = widgets.BatchExplorer(model=_tiny_model(), device="cpu", ceilings=ceilings, max_batch=4)
    ex.set(batch=4)
    one, two, four = ex.points
    assert (one.batch, two.batch, four.batch) == (1, 2, 4)
    assert four.flops == 4 * one.flops > 0
    assert four.weight_bytes == (8 * 16 + 16 + 16 * 4 + 4) * 4
    assert four.bytes_moved > one.bytes_moved
    assert ex.error is None and "batch 4" in ex._readout.value


def test_explorer_displays_its_vbox(ceilings, plenty_of_memory, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    ex = _repeat(ceilings, FakeRepeat())
    ex._ipython_display_()  # what Jupyter calls for the last expression of a cell
    assert shown == [ex.widget]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_explorers_on_cuda(ceilings):
    free = _explorer._available_memory_bytes(torch.device("cuda"))
    assert free > 0
    p = widgets.measure_repeat(2**20, 4, "eager", "cuda", budget_s=0.02)
    assert p.device.startswith("cuda") and p.bytes_moved == 4 * 8 * 2**20
    f = widgets.measure_repeat(2**20, 4, "fused", "cuda", budget_s=0.02)
    assert f.bytes_moved == 8 * 2**20 and f.compile_s is not None
    model = _tiny_model().to("cuda")
    ex = widgets.BatchExplorer(model=model, device="cuda", ceilings=ceilings, max_batch=4)
    ex.set(batch=4)
    assert ex.error is None and [p.batch for p in ex.points] == [1, 2, 4]


def test_batch_model_on_other_device_is_refused(ceilings):
    with pytest.raises(ValueError, match="model.to"):
        widgets.BatchExplorer(model=_tiny_model().to("meta"), device="cpu", ceilings=ceilings)
    with pytest.raises(ValueError, match="device='meta' is not a device brrr knows"):
        widgets.BatchExplorer(model=_tiny_model(), device="meta", ceilings=ceilings)


# ------------------------------------------------------------------ helpers


def _descendants(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _descendants(child)
