"""bl.count charges bytes touched, not bytes owned: each rule against a hand count.

Float32 tensors are 4 bytes an element, int64 indices 8, bools 1.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from brrrlib.counting import count

ROWS, COLS = 50, 8  # x is (50, 8) fp32: 1600 bytes, every test reads a small part of it
IDX = torch.tensor([1, 2, 0, 5])  # four int64 indices: 32 bytes


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(ROWS, COLS)


def _bytes_of(fn, *ops: str) -> int:
    """Bytes of the rows of ``ops`` (any of them: torch versions lower some ops differently)."""
    c = count(fn)
    rows = [r for r in c.rows if r.op in ops]
    assert rows, f"{ops} did not run: {[r.op for r in c.rows]}"
    return sum(r.bytes_moved for r in rows)


# ------------------------------------------------------------------ gathers


def test_embedding_reads_the_rows_it_looks_up_not_its_table():
    table = torch.randn(100, COLS)  # 3200 bytes
    looked_up = 4 * COLS * 4  # four rows of eight floats
    expected = 32 + looked_up + looked_up  # indices, rows read, output written
    assert _bytes_of(lambda: F.embedding(IDX, table), "aten::embedding") == expected == 288
    # padding_idx changes the gradient, not the lookup: the padding row is read like any other
    assert _bytes_of(lambda: F.embedding(IDX, table, padding_idx=0), "aten::embedding") == 288
    module = nn.Embedding(100, COLS, padding_idx=0)
    assert _bytes_of(lambda: module(IDX), "aten::embedding") == 288


def test_embedding_bag_reads_one_row_per_index():
    table = torch.randn(100, COLS)
    offsets = torch.tensor([0, 2])  # two bags of two
    op = "aten::_embedding_bag_forward_only"
    with torch.no_grad():
        outputs = torch.ops.aten._embedding_bag_forward_only(table, IDX, offsets)
    written = sum(t.numel() * t.element_size() for t in outputs)  # sums plus its bookkeeping
    assert outputs[0].shape == (2, COLS)
    expected = 32 + 16 + 4 * COLS * 4 + written  # indices, offsets, four rows; outputs
    with torch.no_grad():
        bags = _bytes_of(lambda: F.embedding_bag(IDX, table, offsets, mode="sum"), op)
        assert bags == expected < table.numel() * 4


def test_index_select_gather_take_and_advanced_indexing(x):
    four_rows = 4 * COLS * 4
    assert _bytes_of(lambda: torch.index_select(x, 0, IDX), "aten::index_select") == (
        32 + four_rows + four_rows
    )
    index = torch.zeros(ROWS, 2, dtype=torch.long)  # 800 bytes, picks 100 elements
    assert _bytes_of(lambda: torch.gather(x, 1, index), "aten::gather") == 800 + 400 + 400
    assert _bytes_of(lambda: torch.take(x, IDX), "aten::take") == 32 + 16 + 16
    assert _bytes_of(lambda: x[IDX], "aten::index") == 32 + four_rows + four_rows
    mask = x > 0
    k = int(mask.sum())  # the True elements: what the mask selects
    assert _bytes_of(lambda: x[mask], "aten::index") == ROWS * COLS + 4 * k + 4 * k


def test_masked_select_reads_everything_and_writes_the_selection(x):
    mask = x > 0
    k = int(mask.sum())
    # every element and its mask bit are examined; only the selected ones are written
    assert _bytes_of(lambda: torch.masked_select(x, mask), "aten::masked_select") == (
        4 * ROWS * COLS + ROWS * COLS + 4 * k
    )


# ------------------------------------------------------------------ scatters


def test_index_put_writes_the_addressed_rows(x):
    values = torch.ones(4, COLS)  # 128 bytes
    assert _bytes_of(lambda: x.index_put_((IDX,), values), "aten::index_put_") == 32 + 128 + 128
    # accumulate reads what it adds to
    accumulate = _bytes_of(
        lambda: x.index_put_((IDX,), values, accumulate=True), "aten::index_put_"
    )
    assert accumulate == 32 + 128 + 128 + 128

    def assign_scalar():
        x[IDX] = 1.0  # one 4-byte value broadcast into four rows

    # index_put_ with a 4-byte value tensor, or (torch >= 2.15) index_fill_ with a scalar
    assert _bytes_of(assign_scalar, "aten::index_put_", "aten::index_fill_") in (
        32 + 4 + 128,
        32 + 128,
    )
    mask = x > 0
    k = int(mask.sum())

    def assign_masked():
        x[mask] = 0.0

    # index_put_: the mask, the value, the k elements written; or (torch >= 2.15) masked_fill_,
    # whose kernel reads the mask and reads and writes all of x
    masked = _bytes_of(assign_masked, "aten::index_put_", "aten::masked_fill_")
    assert masked in (ROWS * COLS + 4 + 4 * k, ROWS * COLS + 8 * ROWS * COLS)
    assert _bytes_of(lambda: x.masked_fill_(mask, 0.0), "aten::masked_fill_") == 9 * ROWS * COLS


def test_index_add_reads_and_writes_the_rows_it_adds_to(x):
    source = torch.ones(4, COLS)
    # index, source, the four rows of x read and written back
    assert (
        _bytes_of(lambda: x.index_add_(0, IDX, source), "aten::index_add_") == 32 + 128 + 128 + 128
    )


def test_scatter_in_place_and_out_of_place(x):
    index = torch.zeros(ROWS, 2, dtype=torch.long)  # 800 bytes, 100 positions
    src = torch.ones(ROWS, 2)  # 400 bytes
    assert _bytes_of(lambda: x.scatter_(1, index, src), "aten::scatter_") == 800 + 400 + 400
    assert _bytes_of(lambda: x.scatter_add_(1, index, src), "aten::scatter_add_") == (
        800 + 400 + 400 + 400  # and reads the 100 positions it adds to
    )
    # out of place: a copy of x with the positions replaced, read and written in full
    assert _bytes_of(lambda: x.scatter(1, index, src), "aten::scatter") == 1600 + 800 + 400 + 1600


# ------------------------------------------------------------------ copies, views, in place


def test_slicing_that_copies_reads_the_slice(x):
    # every other row, two columns: 25 x 2 floats = 200 bytes read, 200 written
    assert _bytes_of(lambda: x[::2, 1:3].contiguous(), "aten::clone") == 400
    assert _bytes_of(lambda: x.narrow_copy(0, 0, 5), "aten::narrow_copy") == 2 * 5 * COLS * 4
    c = count(lambda: x[::2, 1:3])
    assert c.bytes_moved == 0 and c.ops == 2  # two slices: views


def test_views_move_nothing(x):
    c = count(lambda: x.view(COLS, ROWS).t().unsqueeze(0).expand(3, ROWS, COLS).select(0, 1))
    assert c.bytes_moved == 0 and c.flops == 0 and c.ops == 5


def test_in_place_ops_read_and_write_once(x):
    assert _bytes_of(lambda: x.mul_(2), "aten::mul_") == 2 * 4 * ROWS * COLS
    y = torch.randn(ROWS, COLS)
    assert _bytes_of(lambda: x.add_(y), "aten::add_") == 3 * 4 * ROWS * COLS


def test_broadcast_inputs_count_their_storage(x):
    bias = torch.randn(COLS)  # 32 bytes, broadcast over 50 rows
    assert _bytes_of(lambda: x + bias, "aten::add") == 4 * ROWS * COLS + 32 + 4 * ROWS * COLS
    column = torch.randn(ROWS, 1)
    assert _bytes_of(lambda: x * column, "aten::mul") == 1600 + 200 + 1600


def test_cat_and_stack_read_their_inputs_and_write_the_output(x):
    y = torch.randn(10, COLS)  # 320 bytes
    assert _bytes_of(lambda: torch.cat([x, y]), "aten::cat") == 1600 + 320 + 1920
    assert _bytes_of(lambda: torch.stack([x, x]), "aten::stack") == 1600 + 1600 + 3200


# ------------------------------------------------------------------ a real model


def test_a_small_encoder_does_not_count_its_embedding_table():
    # 2 layers, hidden 64, a 30k-token vocabulary, batch 1, 8 tokens: the table is 7.7 MB,
    # the lookup reads 8 rows (2 KB); counting the table made the model look memory-bound
    vocab, hidden, tokens = 30_000, 64, 8
    embedding = nn.Embedding(vocab, hidden)
    layer = nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    ids = torch.randint(vocab, (1, tokens))
    with torch.no_grad():
        c = count(lambda: encoder(embedding(ids)))
    lookup = [r for r in c.rows if r.op == "aten::embedding"][0]
    assert lookup.bytes_moved == 8 * tokens + 2 * tokens * hidden * 4
    table_bytes = vocab * hidden * 4
    assert c.bytes_moved < table_bytes / 10
    assert c.by_category()["other"]["bytes_fraction"] < 0.5


def test_shaped_factories_write_without_reading_their_source():
    x = torch.randn(10, 16)  # 640 bytes
    for factory in (torch.zeros_like, torch.ones_like, torch.rand_like, torch.randn_like):
        assert count(factory, x).bytes_moved == 640, factory.__name__
    assert count(lambda t: torch.full_like(t, 3.0), x).bytes_moved == 640
    assert count(lambda t: t.new_zeros(4, 4), x).bytes_moved == 64
