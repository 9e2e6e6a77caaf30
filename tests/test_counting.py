"""bl.count against hand-computed FLOPs and bytes, and against torch's FlopCounterMode."""

from __future__ import annotations

import dataclasses
import re
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from brrrlib.counting import (
    CATEGORIES,
    CategoryTimes,
    Counts,
    OpCount,
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


def test_the_written_bytes_and_the_pattern_a_floor_uses():
    n = 4096
    x, y, w = torch.randn(n), torch.randn(n), torch.randn(64, n)
    assert count(lambda: x.add_(y)).written_bytes == 4 * n
    assert count(lambda: x.fill_(1.0)).written_bytes == 4 * n
    assert count(lambda: torch.add(x, y)).pattern == "write"  # a third of its bytes written
    gemv = count(torch.mv, w, x)  # decode's shape: the weights read once, 64 outputs written
    assert gemv.written_bytes == 4 * 64
    assert gemv.pattern == "read"
    assert count(x.sum).pattern == "read"
    by_hand = Counts(rows=(OpCount("aten::mv", "matmul", 1, 10, 1000),))
    assert by_hand.written_bytes is None and by_hand.pattern == "write"  # unknown: the floor


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


def _columns(table: str) -> list[str]:
    """The column names of a counts table (its second line; columns two spaces apart)."""
    return re.split(r"\s{2,}", table.splitlines()[1].strip())


def test_table_and_reprs():
    c = _small_counts()
    text = repr(c)
    for word in (*CATEGORIES, "% FLOPs", "% bytes", "FLOP/byte"):
        assert word in text
    assert _columns(text)[-1] == "FLOP/byte"  # no time columns without times
    html = c._repr_html_()
    assert "<table>" in html and "matmul" in html and "FLOPs" in html
    total = text.splitlines()[-1].split()  # the last row: the whole run
    assert total[:2] == ["total", str(c.ops)] and total[-1] == f"{c.intensity_flops_per_byte:.3g}"


def test_times_give_percent_of_runtime():
    c = _small_counts()
    times = CategoryTimes((("matmul", 3e-3), ("pointwise", 1e-3)), "cpu", 5)
    timed = dataclasses.replace(c, times=times)
    by = timed.by_category()
    assert by["matmul"]["time_fraction"] == pytest.approx(0.75)
    assert by["other"]["time_s"] == 0.0
    columns = _columns(repr(timed))
    assert columns[:-2] == _columns(repr(c)) and columns[-2] == "time"  # time, then its share
    assert "75%" in repr(timed)  # 3 ms of 4 ms


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="fn must be callable"):
        count(torch.randn(3))

    with pytest.raises(TypeError, match="generator"):
        count(_generator, torch.ones(3))
    with pytest.raises(TypeError, match="generator"):
        count(lambda x: (y * 2 for y in x), torch.ones(3))  # returns one: nothing ran
    assert count(lambda: list(_generator(torch.ones(3)))).flops == 3  # iterated: it runs


def _generator(x):
    yield x * 2


# ------------------------------------------------------------------ precision per op


def test_each_op_carries_the_precision_it_computes_in():
    a = torch.randn(16, 32)
    b = torch.randn(32, 8)
    c = count(lambda: (a.bfloat16() @ b.bfloat16()).float() @ b.t() + 1)
    by_op = {(r.op, r.precision) for r in c.rows}
    assert ("aten::mm", "bf16") in by_op and ("aten::mm", "fp32") in by_op
    assert ("aten::add", "fp32") in by_op
    assert all(r.precision == "" for r in c.rows if not r.flops)  # copies, views: no FLOPs
    assert c.flops_by_precision("matmul") == {"bf16": 2 * 16 * 32 * 8, "fp32": 2 * 16 * 8 * 32}
    assert c.flops_by_precision() == {"bf16": 2 * 16 * 32 * 8, "fp32": 2 * 16 * 8 * 32 + 16 * 32}
    assert sum(c.flops_by_precision().values()) == c.flops
    assert count(torch.mm, a.double(), b.double()).flops_by_precision() == {"fp64": 2 * 16 * 32 * 8}
    assert count(torch.mm, a.half(), b.half()).rows[0].precision == "fp16"
    ints = torch.randint(-3, 3, (32, 32), dtype=torch.int8)
    assert count(torch._int_mm, ints, ints).rows[0].precision == "int"
    with pytest.raises(ValueError, match="category"):
        c.flops_by_precision("attention")


def test_fp8_is_its_own_precision():
    x = torch.randn(64).to(torch.float8_e4m3fn)
    c = count(lambda: x.float() * 2)  # the multiply is fp32: the cast does no arithmetic
    assert c.flops_by_precision() == {"fp32": 64}
    fake_fp8 = torch.empty(16, 16, device="meta", dtype=torch.float8_e4m3fn)
    assert count(torch.neg, fake_fp8).rows[0].precision == "fp8"


def test_an_fp32_matmul_on_cuda_is_tf32_where_tf32_is_allowed():
    # FakeTensorMode makes tensors that say they live on a GPU without one
    from torch._subclasses.fake_tensor import FakeTensorMode

    before, cudnn_before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        with FakeTensorMode():
            a = torch.empty(8, 8, device="cuda")
            torch.set_float32_matmul_precision("highest")
            assert count(torch.mm, a, a).rows[0].precision == "fp32"
            torch.set_float32_matmul_precision("high")  # what inductor advises
            assert count(torch.mm, a, a).rows[0].precision == "tf32"
            assert count(torch.add, a, a).rows[0].precision == "fp32"  # only matmuls use TF32
            assert count(torch.mm, a.half(), a.half()).rows[0].precision == "fp16"
            # convolutions follow cuDNN's switch, on by default
            image, kernel = (
                torch.empty(1, 3, 8, 8, device="cuda"),
                torch.empty(4, 3, 3, 3, device="cuda"),
            )
            assert count(F.conv2d, image, kernel).rows[0].precision == "tf32"
            torch.backends.cudnn.allow_tf32 = False
            assert count(F.conv2d, image, kernel).rows[0].precision == "fp32"
        cpu = torch.empty(8, 8)
        assert count(torch.mm, cpu, cpu).rows[0].precision == "fp32"  # no TF32 on a CPU
    finally:
        torch.set_float32_matmul_precision(before)
        torch.backends.cudnn.allow_tf32 = cudnn_before


# ------------------------------------------------------------------ work ops


def test_work_ops_leave_out_views_and_allocations():
    x = torch.randn(8, 16)
    c = count(lambda: (x.t() + 1).unsqueeze(0).sum() + torch.empty(3).numel())
    # t and unsqueeze are views, empty allocates: 3 calls that do no work on data
    assert c.ops == c.work_ops + 3
    assert c.work_ops == 3  # add, sum, add
    assert _counts_of(c, "aten::t") == _counts_of(c, "aten::unsqueeze") == 1


def _counts_of(c: Counts, op: str) -> int:
    return sum(r.calls for r in c.rows if r.op == op)


# ------------------------------------------------------------------ counting never aborts


def test_an_op_the_rule_cannot_price_is_a_note_not_an_abort(monkeypatch):
    # a private seam: every op prices today, so the matmul formula is made to fail
    import brrrlib._aten_ops as aten_ops

    def broken(name, *args, **kwargs):
        if name == "aten::mm":
            raise AssertionError("sdpa_flop_count: query/key/value shapes are incompatible")
        return real(name, *args, **kwargs)

    real = aten_ops.matmul_flops
    monkeypatch.setattr(aten_ops, "matmul_flops", broken)
    a = torch.randn(4, 4)
    c = count(lambda: (a @ a @ a).relu())
    (note,) = c.notes
    said = re.match(r"(\d+) ops uncounted: (\S+) \((\w+): ", note)
    assert said and said.groups() == ("2", "aten::mm", "AssertionError")
    assert "query/key/value" in note  # the error's own message, quoted
    assert [r.op for r in c.rows] == ["aten::relu"]  # the rest is counted
    assert "uncounted" in repr(c) and "uncounted" in c._repr_html_()


def _gqa(layout: str, b=2, hq=8, hkv=2, sq=16, sk=24, d=4, dv=6, dtype=torch.bfloat16):
    """q, k, v on meta in the layout a CUDA attention kernel takes them."""
    shape = (lambda h, s, e: (b, h, s, e)) if layout == "BHSD" else (lambda h, s, e: (b, s, h, e))
    m = {"device": "meta", "dtype": dtype}
    return (torch.empty(shape(hq, sq, d), **m), torch.empty(shape(hkv, sk, d), **m),
            torch.empty(shape(hkv, sk, dv), **m))  # fmt: skip


def test_cuda_attention_kernels_count_grouped_query_heads():
    # 8 query heads share 2 key/value heads (Llama, Mistral): every query head still does
    # QK^T (2*Sq*Sk*D) and PV (2*Sq*Sk*Dv)
    b, hq, sq, sk, d, dv = 2, 8, 16, 24, 4, 6
    forward = 2 * b * hq * sq * sk * (d + dv)
    backward = 2 * b * hq * sq * sk * (3 * d + 2 * dv)  # recompute QK^T, then dP, dV, dQ, dK
    q, k, v = _gqa("BHSD")
    aten = torch.ops.aten
    for op in (
        lambda: aten._scaled_dot_product_efficient_attention(q, k, v, None, False),
        lambda: aten._scaled_dot_product_flash_attention(q, k, v),
        lambda: aten._scaled_dot_product_cudnn_attention(q, k, v, None, False),
    ):
        c = count(op)  # the CUDA ops themselves, run on meta tensors
        assert _matmul_flops(c) == forward and c.flops_by_precision() == {"bf16": forward}
    # the CUDA kernels' backward ops cannot run here: their formulas are called directly
    from brrrlib._aten_ops import matmul_flops

    grad = torch.empty(b, hq, sq, dv, device="meta")
    for name in ("_scaled_dot_product_efficient_attention_backward",
                 "_scaled_dot_product_flash_attention_backward",
                 "_scaled_dot_product_cudnn_attention_backward"):  # fmt: skip
        assert matmul_flops(f"aten::{name}", (grad, q, k, v, None), {}, None) == backward
    qs, ks, vs = _gqa("BSHD")  # flash/efficient kernels proper: (batch, seq, heads, dim)
    args = (qs, ks, vs, None, None, sq, sk, 0.0, False, False)
    assert matmul_flops("aten::_flash_attention_forward", args, {}, None) == forward
    assert count(lambda: aten._flash_attention_forward(*args)).flops == forward
    eff = (qs, ks, vs, None, None, None, sq, sk, 0.0, 0, False)
    assert matmul_flops("aten::_efficient_attention_forward", eff, {}, None) == forward
    grad_s = torch.empty(b, sq, hq, dv, device="meta")
    bwd = (grad_s, qs, ks, vs, grad_s, None, None, None, sq, sk)
    assert matmul_flops("aten::_flash_attention_backward", bwd, {}, None) == backward


def test_varlen_attention_adds_up_its_sequences():
    # a seam: the packed (varlen) kernels run on CUDA only, so their formula is called directly
    from brrrlib._aten_ops import matmul_flops

    # two sequences of 3 and 5 tokens packed as (8 tokens, heads, dim)
    q = torch.empty(8, 4, 16)
    kv = torch.empty(8, 2, 16)
    offsets = torch.tensor([0, 3, 8])
    args = (q, kv, kv, offsets, offsets, 5, 5, 0.0, False, False)
    flops = matmul_flops("aten::_flash_attention_forward", args, {}, None)
    assert flops == 2 * 4 * (3 * 3 + 5 * 5) * (16 + 16)


def test_grouped_query_attention_on_cpu_counts_every_query_head():
    b, hq, hkv, s, d = 2, 8, 2, 16, 4
    q = torch.randn(b, hq, s, d, requires_grad=True)
    k = torch.randn(b, hkv, s, d)
    c = count(lambda: F.scaled_dot_product_attention(q, k, k, enable_gqa=True))
    assert _matmul_flops(c) == 2 * 2 * b * hq * s * s * d


# ------------------------------------------------------------------ sparse and complex


def test_sparse_matmuls_count_their_nonzeros():
    dense = torch.randn(20, 30).relu()  # about half the entries are zero
    nnz = int(dense.count_nonzero())
    other = torch.randn(30, 10)
    as_dense = 2 * 20 * 30 * 10
    coo = count(torch.sparse.mm, dense.to_sparse(), other)
    assert _matmul_flops(coo) == 2 * nnz * 10  # each stored value scales a row of `other`
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta"
        csr = dense.to_sparse_csr()
    c = count(torch.mm, csr, other)
    assert _matmul_flops(c) == 2 * nnz * 10 < as_dense
    # bytes: CSR's row offsets (21 x int64), column indices and values, not 20 x 30 floats
    assert c.bytes_moved == (21 * 8 + nnz * 8 + nnz * 4) + 4 * 30 * 10 + 4 * 20 * 10
    assert _matmul_flops(count(torch.mm, other.t(), dense.t().to_sparse())) == 2 * nnz * 10


def test_complex_matmul_counts_real_flops():
    a = torch.randn(4, 5, dtype=torch.cfloat)
    b = torch.randn(5, 6, dtype=torch.cfloat)
    # (a + bi)(c + di): 4 real multiplies and 2 adds, plus 2 adds to accumulate: 8 per term
    c = count(torch.mm, a, b)
    assert c.flops == 8 * 4 * 5 * 6 == 4 * count(torch.mm, a.real, b.real).flops
    assert c.rows[0].precision == "fp32"  # complex64 is fp32 arithmetic


# ------------------------------------------------------------------ torch.compile


def _chain(x):
    for _ in range(8):
        x = x * 1.01 + 0.5
    return x


def _ran_compiled(fn, x) -> bool:
    """Whether a profiled call of ``fn`` ran its compiled graph (not 16 eager aten ops)."""
    from brrrlib.trace import profile

    host = {i.name for i in profile(fn, x, runs=1).host}
    return any(n.startswith("Torch-Compiled Region") for n in host) and not any(
        n.startswith("aten::") for n in host
    )


def test_counting_a_compiled_function_leaves_it_compiled():
    # counting under a dispatch mode used to send dynamo back to eager for good: the
    # compiled chain ran 16 eager ops (~20x slower on 4 Mi floats) from then on
    x = torch.randn(4096)
    counted = torch.compile(_chain)
    counted(x)
    assert _ran_compiled(counted, x)
    c = count(counted, x)
    assert c.ops == 16 and c.bytes_moved == 16 * 2 * 4 * x.numel()  # each op reads, writes x
    assert any("torch.compile'd" in n and "graph" in n for n in c.notes)
    assert any("torch.compile'd" in n for n in count(lambda: counted(x)).notes)
    assert not count(_chain, x).notes
    assert _ran_compiled(counted, x)  # still the compiled graph, not eager ops


def test_meta_counts_say_nothing_ran():
    linear = nn.Linear(64, 32, device="meta")
    c = count(linear, torch.empty(8, 64, device="meta"))
    assert any("meta" in n and "ran" in n for n in c.notes)
    assert not count(torch.relu, torch.randn(4)).notes


def test_saved_bytes_are_what_autograd_keeps_for_backward():
    from brrrlib import workloads
    from brrrlib.counting import saved_bytes

    x = torch.randn(1000, requires_grad=True)  # 4,000 bytes
    # cos_cos keeps x (for the first cos's backward) and the temporary (for the second's)
    assert saved_bytes(workloads.cos_cos, x) == 8000
    assert saved_bytes(workloads.checkpointed(workloads.cos_cos), x) == 4000  # only its input
    with torch.no_grad():
        assert saved_bytes(workloads.cos_cos, x) == 0  # nothing kept without a backward to come


def test_special_functions_are_counted_once_per_element_and_per_attention_score():
    x = torch.randn(64, 128)
    assert count(lambda: torch.softmax(x, -1)).special_by_function() == {"exp": x.numel()}
    gelu = count(lambda: F.gelu(x, approximate="tanh").cos())
    assert gelu.special_by_function() == {"tanh": x.numel(), "cos": x.numel()}
    q, k, v = torch.randn(2, 4, 128, 64), torch.randn(2, 4, 96, 64), torch.randn(2, 4, 96, 64)
    sdpa = count(F.scaled_dot_product_attention, q, k, v)
    assert sdpa.special_by_function() == {"exp": 2 * 4 * 128 * 96}  # one exp per score
