"""bl.count against hand-computed FLOPs and bytes, and against torch's FlopCounterMode."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import brrrlib as bl
from brrrlib.counting import (
    CATEGORIES,
    CategoryTimes,
    Counts,
    OpCount,
    breakdown,
    categorize,
    count,
)

E, HEADS, FFN = 32, 4, 64  # a small transformer layer: embed, heads, feed-forward width


def _layer_flops(lengths: list[int], e: int = E, f: int = FFN) -> int:
    """Forward matmul FLOPs of one encoder layer, summed over sequences of these lengths.

    Per sequence of L tokens: QKV projection 2*L*E*3E, QK^T 2*L*L*E, AV 2*L*L*E,
    output projection 2*L*E*E, feed-forward 2*L*E*F + 2*L*F*E.
    """
    return sum(
        2 * n * e * 3 * e + 2 * n * n * e + 2 * n * n * e + 2 * n * e * e + 4 * n * e * f
        for n in lengths
    )


def _matmul_flops(c: Counts) -> int:
    return c.by_category()["matmul"]["flops"]


def _torch_flops(fn) -> int:
    with FlopCounterMode(display=False) as mode:
        fn()
    return mode.get_total_flops()


# ------------------------------------------------------------------ hand counts


def test_cos_cos_is_two_ops_two_flops_and_sixteen_bytes_per_element():
    n = 10_000
    x = torch.randn(n)
    c = count(lambda: x.cos().cos())
    assert c.ops == 2
    assert c.flops == 2 * n  # one FLOP per output element per op
    assert c.bytes_moved == 16 * n  # each op reads 4 B and writes 4 B per element
    assert [r.op for r in c.rows] == ["aten::cos"]
    assert c.rows[0].category == "pointwise"
    assert c.intensity_flops_per_byte == pytest.approx(1 / 8)


def test_matmul_flops_and_bytes():
    m, k, n = 30, 40, 50
    a, b = torch.randn(m, k), torch.randn(k, n)
    c = count(torch.matmul, a, b)
    assert c.flops == 2 * m * k * n
    assert c.bytes_moved == 4 * (m * k + k * n + m * n)
    assert {r.category for r in c.rows if r.flops} == {"matmul"}


def test_bf16_moves_half_the_bytes_of_fp32():
    x = torch.randn(4096)
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    for fn in (lambda t: t.cos().cos(), lambda t: t.exp() + 1):
        fp32 = count(fn, x)
        bf16 = count(fn, x.bfloat16())
        assert bf16.bytes_moved * 2 == fp32.bytes_moved
        assert bf16.flops == fp32.flops
    assert (
        count(torch.mm, a.bfloat16(), b.bfloat16()).bytes_moved * 2
        == count(torch.mm, a, b).bytes_moved
    )


def test_non_matmul_flops_follow_the_written_convention():
    from brrrlib.counting import FLOPS_PER_ELEMENT

    rows, cols = 16, 64
    x = torch.randn(rows, cols)
    assert count(torch.sum, x).flops == FLOPS_PER_ELEMENT["reduction"] * rows * cols
    assert count(torch.softmax, x, -1).flops == FLOPS_PER_ELEMENT["softmax"] * rows * cols
    ln = count(F.layer_norm, x, (cols,))
    assert ln.flops == FLOPS_PER_ELEMENT["norm"] * rows * cols
    assert {r.category for r in ln.rows} == {"normalization"}
    assert count(F.gelu, x).flops == count(F.relu, x).flops == rows * cols  # one per element


def test_views_move_no_bytes_but_are_op_calls():
    x = torch.randn(8, 16)
    c = count(lambda: x.view(16, 8).t().unsqueeze(0).expand(3, 8, 16))
    assert c.bytes_moved == 0
    assert c.flops == 0
    assert c.ops == 4
    assert {r.category for r in c.rows} == {"other"}


def test_in_place_reads_and_writes_self_a_fill_only_writes():
    n = 1000
    x, y = torch.randn(n), torch.randn(n)
    assert count(lambda: x.add_(y)).bytes_moved == 3 * 4 * n  # read x, read y, write x
    assert count(lambda: x.fill_(1.0)).bytes_moved == 4 * n  # write x
    assert (
        count(lambda: torch.add(x, y, out=x)).bytes_moved == 3 * 4 * n
    )  # out= is written, not read
    assert count(lambda: torch.empty(n)).bytes_moved == 0  # allocation touches nothing


def test_a_broadcast_input_counts_each_distinct_element_once():
    rows, cols = 64, 128
    x = torch.randn(rows, cols)
    bias = torch.randn(cols)
    expanded = bias.expand(rows, cols)  # stride 0 along rows: one row in memory
    c = count(torch.add, x, expanded)
    assert c.bytes_moved == 4 * (rows * cols + cols + rows * cols)


def test_a_copy_moves_bytes_and_does_no_arithmetic():
    x = torch.randn(100, 10)
    c = count(lambda: x.t().contiguous())
    assert c.flops == 0
    assert c.bytes_moved == 2 * 4 * 1000
    c = count(lambda: x.to(torch.float16))
    assert c.bytes_moved == 4 * 1000 + 2 * 1000


# ------------------------------------------------------------------ torch's counter


def test_matmul_flops_agree_with_flop_counter_mode():
    a = torch.randn(16, 32, requires_grad=True)
    b = torch.randn(32, 8, requires_grad=True)
    linear = nn.Linear(32, 24)
    conv = nn.Conv2d(3, 8, 3, padding=1)
    image = torch.randn(2, 3, 16, 16, requires_grad=True)
    cases = {
        "mm + backward": lambda: (a @ b).sum().backward(),
        "bmm": lambda: torch.bmm(torch.randn(4, 5, 6), torch.randn(4, 6, 7)),
        "baddbmm": lambda: torch.baddbmm(
            torch.randn(4, 5, 7), torch.randn(4, 5, 6), torch.randn(4, 6, 7)
        ),
        "addmm (nn.Linear)": lambda: linear(a),
        "conv2d + backward": lambda: conv(image).sum().backward(),
    }
    for name, fn in cases.items():
        expected = _torch_flops(fn)
        assert expected > 0, name
        assert _matmul_flops(count(fn)) == expected, name


def test_sdpa_counts_the_attention_torch_misses_on_cpu():
    b, h, length, d = 2, 4, 16, 8
    q = torch.randn(b, h, length, d, requires_grad=True)
    forward = 2 * (2 * b * h * length * length * d)  # QK^T and PV
    c = count(F.scaled_dot_product_attention, q, q, q)
    assert _matmul_flops(c) == forward
    c = count(lambda: F.scaled_dot_product_attention(q, q, q).sum().backward())
    # backward: recompute QK^T plus four matmuls for dV, dP, dQ, dK
    assert _matmul_flops(c) == forward + 5 * (2 * b * h * length * length * d)


# ------------------------------------------------------------------ transformer layer


@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_layer_training_counts_forward_and_backward_matmuls(batch_first):
    batch, seq = 3, 5
    layer = nn.TransformerEncoderLayer(E, HEADS, FFN, dropout=0.1, batch_first=batch_first).train()
    shape = (batch, seq, E) if batch_first else (seq, batch, E)
    x = torch.randn(*shape, requires_grad=True)
    c = count(lambda: layer(x).sum().backward())
    # backward of each matmul is two matmuls of the same size: 3x the forward
    assert _matmul_flops(c) == 3 * _layer_flops([seq] * batch)
    by = c.by_category()
    assert by["normalization"]["calls"] >= 4  # two layer norms, softmax, their backward
    assert by["pointwise"]["flops"] > 0
    assert by["matmul"]["flops_fraction"] > 0.9


@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_layer_inference_counts_the_fast_path(batch_first):
    batch, seq = 3, 5
    layer = nn.TransformerEncoderLayer(E, HEADS, FFN, batch_first=batch_first).eval()
    shape = (batch, seq, E) if batch_first else (seq, batch, E)
    x = torch.randn(*shape)
    expected = _layer_flops([seq] * batch)
    with torch.no_grad():
        no_grad = count(layer, x)
    with torch.inference_mode():
        inference = count(layer, x)
    with_grad = count(layer, x)  # eval with autograd on: the unfused path
    assert _matmul_flops(no_grad) == expected
    assert _matmul_flops(inference) == expected
    assert _matmul_flops(with_grad) == expected


def test_transformer_fast_path_is_one_fused_op_and_torch_sees_no_flops_in_it():
    layer = nn.TransformerEncoderLayer(E, HEADS, FFN, batch_first=True).eval()
    x = torch.randn(2, 7, E)
    with torch.no_grad():
        c = count(layer, x)
        torch_flops = _torch_flops(lambda: layer(x))
    fused = [r for r in c.rows if r.op == "aten::_transformer_encoder_layer_fwd"]
    if not fused:
        pytest.skip("this torch does not take the encoder fast path here")
    assert fused[0].category == "matmul"
    assert fused[0].flops == _layer_flops([7, 7])
    assert torch_flops < fused[0].flops  # the gap this counter exists to close


def test_nested_fast_path_counts_only_real_tokens():
    layer = nn.TransformerEncoderLayer(E, HEADS, FFN, batch_first=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x = torch.randn(3, 6, E)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] * 2 + [True] * 4])
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "nested tensors are a prototype"
        c = count(lambda: encoder(x, src_key_padding_mask=padding))
    assert _matmul_flops(c) == 2 * _layer_flops([6, 4, 2])


def test_native_multi_head_attention():
    mha = nn.MultiheadAttention(E, HEADS, batch_first=True).eval()
    x = torch.randn(3, 6, E)
    tokens = 3 * 6
    expected = 2 * tokens * E * 3 * E + 2 * tokens * E * E + 4 * 3 * 6 * 6 * E
    with torch.no_grad():
        assert _matmul_flops(count(lambda: mha(x, x, x))) == expected
    assert _matmul_flops(count(lambda: mha(x, x, x))) == expected


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_fused_rnn_layers_count_their_matmuls(cell):
    batch, steps, inputs, hidden = 2, 5, 16, 32
    rnn = cell(inputs, hidden, batch_first=True)
    gates = 4 if cell is nn.LSTM else 3
    # each time step of each sequence: x @ W_ih.T (gates*H x I) and h @ W_hh.T (gates*H x H)
    forward = 2 * batch * steps * gates * hidden * (inputs + hidden)
    x = torch.randn(batch, steps, inputs, requires_grad=True)
    with torch.no_grad():
        assert _matmul_flops(count(rnn, x)) == forward
    # backward: gradients for inputs and for weights, each a forward's worth (with
    # h0 requiring grad, else the unfused GRU path skips one step's hidden gradient)
    h0 = torch.zeros(1, batch, hidden, requires_grad=True)
    state = (h0, torch.zeros(1, batch, hidden)) if cell is nn.LSTM else h0
    assert _matmul_flops(count(lambda: rnn(x, state)[0].sum().backward())) == 3 * forward


def test_meta_tensors_count_without_running():
    linear = nn.Linear(1024, 512, device="meta")
    x = torch.empty(64, 1024, device="meta")
    c = count(linear, x)
    assert c.flops == 2 * 64 * 1024 * 512
    assert c.bytes_moved == 4 * (64 * 1024 + 1024 * 512 + 512 + 64 * 512)


# ------------------------------------------------------------------ categories


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("aten::mm", "matmul"),
        ("aten.addmm", "matmul"),
        ("aten.bmm.default", "matmul"),
        ("aten::convolution_backward", "matmul"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "matmul"),
        ("aten::_transformer_encoder_layer_fwd", "matmul"),
        ("aten::linear", "matmul"),
        ("aten::conv2d", "matmul"),
        ("aten::layer_norm", "normalization"),
        ("aten::softmax", "normalization"),
        ("aten::native_layer_norm", "normalization"),
        ("aten::native_layer_norm_backward", "normalization"),
        ("aten::native_batch_norm", "normalization"),
        ("aten::_softmax", "normalization"),
        ("aten::_log_softmax_backward_data", "normalization"),
        ("aten::cos", "pointwise"),
        ("aten::add_", "pointwise"),
        ("aten::mul", "pointwise"),  # as the profiler prints it: no overload
        ("aten::add", "pointwise"),
        ("aten::max", "reduction"),
        ("aten.max.other", "pointwise"),
        ("aten::masked_fill_", "pointwise"),
        ("aten::fill_", "other"),
        ("aten::gelu_backward", "pointwise"),
        ("aten::_foreach_add_", "pointwise"),
        ("aten::sum", "reduction"),
        ("aten::amax", "reduction"),
        ("aten::cumsum", "reduction"),
        ("aten::view", "other"),
        ("aten::clone", "other"),
        ("aten::copy_", "other"),
        ("aten::empty", "other"),
        ("autograd::engine::evaluate_function: MmBackward0", "other"),
        ("mm", "matmul"),
    ],
)
def test_categorize(name, category):
    assert categorize(name) == category


def test_categorize_takes_ops_and_rejects_junk():
    assert categorize(torch.ops.aten.mm.default) == "matmul"
    assert categorize(torch.ops.aten.relu) == "pointwise"
    with pytest.raises(TypeError, match="categorize"):
        categorize(42)


# ------------------------------------------------------------------ Counts


def _small_counts() -> Counts:
    x = torch.randn(64, 32, requires_grad=True)
    layer = nn.Sequential(nn.Linear(32, 32), nn.LayerNorm(32), nn.GELU())
    return count(lambda: layer(x).softmax(-1).sum().backward())


def test_totals_and_categories_add_up():
    c = _small_counts()
    by = c.by_category()
    assert list(by) == list(CATEGORIES)
    assert sum(e["flops"] for e in by.values()) == c.flops
    assert sum(e["bytes_moved"] for e in by.values()) == c.bytes_moved
    assert sum(e["calls"] for e in by.values()) == c.ops
    assert sum(e["flops_fraction"] for e in by.values()) == pytest.approx(1.0)
    assert all(isinstance(r, OpCount) for r in c.rows)
    assert by["normalization"]["flops"] > 0  # layer norm and softmax
    assert by["reduction"]["flops"] > 0  # the sum


def test_table_and_reprs():
    c = _small_counts()
    text = c.table()
    for word in (*CATEGORIES, "% FLOPs", "% bytes", "FLOP/byte"):
        assert word in text
    assert "% time" not in text
    assert "aten::addmm" in c.table(by="op")
    html = c._repr_html_()
    assert "<table>" in html and "matmul" in html and "% FLOPs" in html
    assert repr(c).startswith("Counts:")
    with pytest.raises(ValueError, match="by"):
        c.table(by="module")


def test_times_give_percent_of_runtime():
    c = _small_counts()
    timed = c.with_times({"matmul": 3e-3, "pointwise": 1e-3})
    by = timed.by_category()
    assert by["matmul"]["time_fraction"] == pytest.approx(0.75)
    assert by["other"]["time_s"] == 0.0
    assert "% time" in timed.table()
    assert "75.0%" in timed.table()
    assert c.times is None  # with_times returns a copy

    class FakeTiming:
        median_s = 1e-3

    assert "FLOP/s" in c.table(FakeTiming()).splitlines()[-1]
    with pytest.raises(ValueError, match="unknown categories"):
        c.with_times({"attention": 1.0})


def test_breakdown_profiles_every_category():
    layer = nn.TransformerEncoderLayer(E, HEADS, FFN, dropout=0.0, batch_first=True)
    x = torch.randn(2, 8, E, requires_grad=True)
    result = breakdown(lambda: layer(x).sum().backward(), runs=2)
    assert isinstance(result.times, CategoryTimes)
    times = result.times.as_dict()
    assert set(times) == set(CATEGORIES)
    assert times["matmul"] > 0
    assert result.times.total_s > 0
    assert result.times.runs == 2
    assert "% time" in result.table()
    # without dropout the CPU flash-attention kernel runs; its backward recomputes
    # QK^T, one attention matmul more than 3x the forward
    assert _matmul_flops(result) == 3 * _layer_flops([8, 8]) + 2 * 2 * 8 * 8 * E


def test_profiler_rows_are_summed_once_per_kernel():
    """A recorded CUDA profile, reduced to key_averages() rows: each kernel is listed
    on its own (device rows) and inside the aten op that launched it."""
    from types import SimpleNamespace

    from brrrlib.counting import _category_seconds

    cpu_row, cuda_row = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA

    def row(key, device_type, self_cpu_us, self_device_us):
        return SimpleNamespace(
            key=key,
            device_type=device_type,
            self_cpu_time_total=self_cpu_us,
            self_device_time_total=self_device_us,
        )

    events = [
        row("aten::addmm", cpu_row, 20.0, 300.0),
        row("aten::linear", cpu_row, 5.0, 0.0),  # its kernels belong to its child addmm
        row("ampere_sgemm_128x64_tn", cuda_row, 0.0, 300.0),  # the same kernel again
        row("aten::native_layer_norm", cpu_row, 15.0, 40.0),
        row("void at::native::vectorized_elementwise_kernel<...>", cuda_row, 0.0, 25.0),
        row("aten::gelu", cpu_row, 10.0, 25.0),
        row("cudaLaunchKernel", cpu_row, 12.0, 0.0),
        row("autograd::engine::evaluate_function: AddmmBackward0", cpu_row, 8.0, 0.0),
    ]
    cpu, device = _category_seconds(events, use_device=True)
    assert device["matmul"] == pytest.approx(300e-6)
    assert device["normalization"] == pytest.approx(40e-6)
    assert device["pointwise"] == pytest.approx(25e-6)
    assert sum(device.values()) == pytest.approx(365e-6)
    assert cpu["other"] == pytest.approx(20e-6)  # launch and autograd bookkeeping
    assert cpu["matmul"] == pytest.approx(25e-6)
    _, no_device = _category_seconds(events, use_device=False)
    assert sum(no_device.values()) == 0


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_breakdown_on_cuda_uses_kernel_time():
    layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, device="cuda")
    x = torch.randn(8, 128, 256, device="cuda", requires_grad=True)
    result = breakdown(lambda: layer(x).sum().backward(), runs=3)
    assert result.times.source == "device self time"
    assert result.times.as_dict()["matmul"] > 0
    assert result.by_category()["matmul"]["flops_fraction"] > 0.95


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="fn must be callable"):
        count(torch.randn(3))
    with pytest.raises(ValueError, match="runs"):
        bl.counting.time_by_category(lambda: None, runs=0)
