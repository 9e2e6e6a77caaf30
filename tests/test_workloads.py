"""Tests for brrrlib.workloads: the shapes, the equivalences and the op counts the chapters rely on."""

import pytest
import torch
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from brrrlib import workloads


class _OpCounter(TorchDispatchMode):
    """Counts aten calls, the way the dispatcher sees them."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def _ops(fn, args):
    with _OpCounter() as counter:
        fn(*args)
    return counter.calls


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


def test_mlp_shapes_and_no_autograd():
    model, (x,) = workloads.mlp(batch=3, d_model=8, device="cpu")
    out = model(x)
    assert out.shape == (3, 8)
    assert not out.requires_grad


def test_mysteries_run_and_have_their_shapes():
    fn, args = workloads.mystery_a(device="cpu")
    y = fn(*args)
    assert y.shape == args[0].shape and 0.0 <= y.min() and y.max() <= 1.0
    fn, args = workloads.mystery_b(device="cpu")
    assert _ops(fn, args) == 2 * len(args[0])  # one mul_ and one add_ per parameter
    fn, (x,) = workloads.mystery_c(device="cpu")
    assert fn(x).shape == x.shape  # a square projection


def test_gelu_matches_torch():
    x = torch.linspace(-6, 6, 101)
    torch.testing.assert_close(workloads._gelu_tanh(x), F.gelu(x, approximate="tanh"))


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
        (workloads.mlp, {"batch": -1, "device": "cpu"}, "batch"),
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
