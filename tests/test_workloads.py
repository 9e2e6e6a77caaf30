"""Tests for brrrlib.workloads: the shapes, the equivalences and the op counts the chapters rely on."""

import pytest
import torch
from torch.nn import functional as F

import brrrlib as bl
from brrrlib import workloads


def _ops(fn, args):
    return bl.count(fn, *args).ops


def test_python_adds_counts_up():
    fn, args = workloads.python_adds(1000)
    assert fn(*args) == 1000


def test_small_matmuls_loop_and_bmm_agree_but_launch_differently():
    loop_fn, args = workloads.small_matmuls(n=8, size=4, device="cpu")
    bmm_fn, _ = workloads.small_matmuls(n=8, size=4, batched=True, device="cpu")
    torch.testing.assert_close(loop_fn(*args), bmm_fn(*args))
    # the loop pays one launch per matmul (plus indexing); bmm pays one in all
    assert _ops(loop_fn, args) >= 8
    assert _ops(bmm_fn, args) == 1


def test_pointwise_chain_is_two_ops_per_step():
    fn, args = workloads.pointwise_chain(numel=10, n_ops=5, device="cpu")
    assert _ops(fn, args) == 10
    torch.testing.assert_close(fn(*args), workloads.pointwise_chain(10, 5, "cpu")[0](args[0]))


def test_pointwise_chain_with_sync_reads_one_number_back_per_step():
    fn, args = workloads.pointwise_chain(numel=10, n_ops=5, device="cpu")
    synced, _ = workloads.pointwise_chain(numel=10, n_ops=5, device="cpu", sync=True)
    torch.testing.assert_close(synced(*args), fn(*args))  # the same result
    # each step adds a select (x[0]) and the .item() that copies it to the host
    assert _ops(synced, args) == 10 + 5 * 2


def test_mysteries_run_and_have_their_shapes():
    fn, args = workloads.mystery_a(device="cpu")
    y = fn(*args)
    assert y.shape == args[0].shape and 0.0 <= y.min() and y.max() <= 1.0
    fn, args = workloads.mystery_b(device="cpu")
    assert _ops(fn, args) == 2 * len(args[0])  # one mul_ and one add_ per parameter
    fn, (x,) = workloads.mystery_c(device="cpu")
    assert fn(x).shape == x.shape  # a square projection


def test_gelu_matches_torch_in_eight_pointwise_ops():
    """The chapters say "the GELU's eight pointwise ops": count them as the dispatcher does."""
    x = torch.linspace(-6, 6, 101)
    torch.testing.assert_close(workloads._gelu_tanh(x), F.gelu(x, approximate="tanh"))
    assert _ops(workloads._gelu_tanh, (x,)) == 8


def test_transformer_block_is_seeded_causal_and_shaped():
    block, (x,) = workloads.transformer_block(batch=2, seq=6, d_model=16, n_heads=2, device="cpu")
    again, _ = workloads.transformer_block(batch=2, seq=6, d_model=16, n_heads=2, device="cpu")
    y = block(x)
    assert y.shape == x.shape
    torch.testing.assert_close(again(x), y)  # same weights every call
    x2 = x.clone()
    x2[:, -1] += 1.0  # change only the last token: earlier outputs must not move (causal mask)
    torch.testing.assert_close(block(x2)[:, :-1], y[:, :-1])


def test_transformer_block_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    workloads.transformer_block(batch=1, seq=2, d_model=8, device="cpu")
    after = torch.random.get_rng_state()
    torch.random.set_rng_state(state)
    # building the block seeds its weights privately; only x is drawn from the global stream
    torch.randn(1, 2, 8)
    assert torch.equal(after, torch.random.get_rng_state())


def test_transformer_block_dtype():
    block, (x,) = workloads.transformer_block(
        batch=1, seq=4, d_model=8, n_heads=2, dtype=torch.bfloat16, device="cpu"
    )
    assert block(x).dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("factory", "kwargs", "word"),
    [
        (workloads.python_adds, {"n": 0}, "n"),
        (workloads.transformer_block, {"batch": -1, "device": "cpu"}, "batch"),
        (workloads.transformer_block, {"seq": 2.5, "device": "cpu"}, "seq"),
        (workloads.transformer_block, {"d_model": 10, "n_heads": 4, "device": "cpu"}, "divisible"),
    ],
)
def test_bad_sizes_name_the_argument(factory, kwargs, word):
    with pytest.raises(ValueError, match=word):
        factory(**kwargs)


def test_transformer_block_bad_dtype():
    with pytest.raises(TypeError, match="dtype"):
        workloads.transformer_block(dtype=torch.int32, device="cpu")


def test_large_chain_picks_its_size_by_device():
    _, (x,) = workloads.pointwise_chain(large=True, device="cpu")
    assert x.numel() == 2**22
    assert workloads.pointwise_chain(device="cpu")[1][0].numel() == 1024


def test_doubled_batch_runs_batch_and_twice_it_without_autograd():
    model = torch.nn.Sequential(torch.nn.Linear(8, 4))  # requires_grad on, as a learner's model
    seen = []
    model.register_forward_hook(
        lambda _m, args, out: seen.append((args[0].shape, out.requires_grad))
    )
    one, two = workloads.doubled_batch(model, batch=3)
    one()
    two()
    assert seen == [((3, 8), False), ((6, 8), False)]
    with pytest.raises(ValueError, match="nn.Linear"):
        workloads.doubled_batch(torch.nn.ReLU())


def test_cuda_graph_needs_cuda():
    fn, args = workloads.pointwise_chain(numel=8, device="cpu")
    with pytest.raises(ValueError, match="needs a CUDA device"):
        workloads.cuda_graph(fn, *args)


def test_mystery_b_foreach_does_mystery_bs_update_in_two_calls():
    torch.manual_seed(0)
    fn, (params, grads) = workloads.mystery_b(device="cpu")
    fast, _ = workloads.mystery_b_foreach(device="cpu")
    p1 = [p.clone() for p in params]
    p2 = [p.clone() for p in params]
    fn(p1, grads)
    fast(p2, grads)
    for a, b in zip(p1, p2, strict=True):
        torch.testing.assert_close(a, b)
    assert _ops(fast, ([p.clone() for p in params], grads)) == 2
    assert _ops(fn, ([p.clone() for p in params], grads)) == 2 * len(params)


def test_recorded_h100_times_hold_what_the_chapters_quote_in_their_order():
    rec = workloads.H100_RECORDED_S
    chain = ("eager", "torch.compile", "CUDA graph", 'compile "reduce-overhead"')  # chapter 03
    block = ("fp32, batch 1", "fp32, batch 16", "fp32 compiled, batch 16", "bf16, batch 16")
    assert set(rec) == {f"chain, {k}" for k in chain} | {f"block {k}" for k in block}
    eager, graph, compiled = (rec[f"chain, {k}"] for k in ("eager", "CUDA graph", "torch.compile"))
    assert graph < compiled < eager
    assert rec["block bf16, batch 16"] < rec["block fp32, batch 16"]  # chapter 04


# ------------------------------------------------------------------ chapter 02: fusion counted


def test_cos_cos_and_softmax_write_into_out_with_the_same_bytes():
    x = torch.randn(64, 256)
    out = torch.empty_like(x)
    assert torch.equal(workloads.cos_cos(x, out), x.cos().cos()) and out.data_ptr() != x.data_ptr()
    assert torch.allclose(workloads.softmax_by_hand(x), torch.softmax(x, -1), atol=1e-7)
    assert torch.allclose(workloads.softmax_by_hand(x, out), torch.softmax(x, -1), atol=1e-7)
    # fresh or into out, the full-size passes are the same: 4 x 4 bytes (cos_cos), 8 x 4 (softmax)
    assert (
        bl.count(workloads.cos_cos, x, out).bytes_moved
        == bl.count(workloads.cos_cos, x).bytes_moved
    )
    sm = bl.count(workloads.softmax_by_hand, x, out)
    assert sm.ops == 5 and sm.bytes_moved // x.numel() == 32
    assert sm.bytes_moved == bl.count(workloads.softmax_by_hand, x).bytes_moved


@pytest.mark.parametrize("heads, n, d", [(2, 128, 32), (4, 64, 16)])
def test_attention_by_hand_agrees_with_sdpa_and_moves_the_scores(heads, n, d):
    hand, args = workloads.attention(n, heads, d)
    fused, _ = workloads.attention(n, heads, d, fused=True)
    assert fused is F.scaled_dot_product_attention and args[0].shape == (1, heads, n, d)
    want = F.scaled_dot_product_attention(*args)
    assert torch.allclose(hand(*args), want, atol=1e-5)
    assert torch.allclose(workloads.attention_by_hand(*args), want, atol=1e-5)  # fresh scores
    extra = bl.count(hand, *args).bytes_moved - bl.count(fused, *args).bytes_moved
    # six passes over the (heads, n, n) fp32 scores; the fused kernel also writes one
    # log-sum-exp per row (heads x n fp32) for a backward pass
    assert extra == 6 * heads * n * n * 4 - heads * n * 4


def test_attention_bad_sizes_name_the_argument():
    with pytest.raises(ValueError, match="seq_len"):
        workloads.attention(0)
    with pytest.raises(ValueError, match="head_dim"):
        workloads.attention(16, head_dim=-1)


def test_square_matmul_is_one_mm_of_its_size():
    fn, (a, b) = workloads.square_matmul(n=32, device="cpu")
    assert a.shape == b.shape == (32, 32) and _ops(fn, (a, b)) == 1
    assert bl.count(fn, a, b).flops == 2 * 32**3
    assert workloads.square_matmul(device="cpu")[1][0].shape == (1024, 1024)


def _training_matmul_flops(batch, seq, d):
    """By hand: the forward's matmuls (24 N C^2 for the four linears, 4 B T^2 C for the two
    attention products), and twice that backward (each input's and each weight's gradient)."""
    tokens = batch * seq
    forward = 24 * tokens * d * d + 4 * batch * seq * seq * d
    return 3 * forward


@pytest.mark.parametrize("optimizer", ["for-loop", "foreach", "fused"])
def test_training_step_counts_against_the_hand_count(optimizer):
    batch, seq, d = 4, 8, 32
    step, (x,) = workloads.training_step(batch, seq, d, optimizer=optimizer, device="cpu")
    counts = bl.count(step, x)
    assert counts.flops_by_precision("matmul") == {"fp32": _training_matmul_flops(batch, seq, d)}
    params = sum(p.numel() for p in step.model.parameters())
    assert params == 12 * d * d + 13 * d  # qkv, proj, fc, fc_out and their biases; two norms
    # the weights' part is the usual 6 x parameters x tokens (2 forward, 4 backward)
    weights = 6 * (12 * d * d) * batch * seq
    assert _training_matmul_flops(batch, seq, d) - weights == 12 * batch * seq * seq * d


def test_training_step_optimizers_do_the_same_update_in_ever_fewer_ops():
    results, ops = {}, {}
    x = torch.randn(2, 4, 16)  # the same input for all three (the weights are seeded)
    for optimizer in workloads.OPTIMIZERS:
        step, _ = workloads.training_step(2, 4, 16, optimizer=optimizer, device="cpu")
        ops[optimizer] = bl.count(step, x).work_ops  # the count runs one step
        step(x)
        results[optimizer] = [p.detach().clone() for p in step.model.parameters()]
    for optimizer in ("foreach", "fused"):  # the same update, to a tenth of AdamW's step (lr)
        for a, b in zip(results["for-loop"], results[optimizer], strict=True):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-3)
    assert ops["fused"] < ops["foreach"] < ops["for-loop"]
    n_tensors = len(results["fused"])  # AdamW's for-loop pays per tensor what foreach pays once
    assert ops["for-loop"] - ops["foreach"] >= n_tensors


def test_training_step_autocast_runs_the_matmuls_in_16_bits_and_keeps_fp32_weights():
    step, (x,) = workloads.training_step(2, 4, 16, precision="bf16", device="cpu")
    counts = bl.count(step, x)
    assert set(counts.flops_by_precision("matmul")) == {"bf16"}
    assert all(p.dtype == torch.float32 for p in step.model.parameters())
    assert x.dtype == torch.float32 and step(x).dtype == torch.float32


def test_training_step_bad_arguments_name_the_choices():
    with pytest.raises(ValueError, match="optimizer must be one of for-loop.*'adam'"):
        workloads.training_step(optimizer="adam", device="cpu")
    with pytest.raises(ValueError, match="precision='tf32'.*set_float32_matmul_precision"):
        workloads.training_step(precision="tf32", device="cpu")
