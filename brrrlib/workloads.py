"""Workloads for chapters 03 (overhead) and 04 (diagnose your own code)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from brrrlib import _checks

__all__ = [
    "attention",
    "attention_by_hand",
    "backward_step",
    "checkpointed",
    "cos_cos",
    "cuda_graph",
    "doubled_batch",
    "mystery_a",
    "mystery_b",
    "mystery_b_foreach",
    "mystery_c",
    "pointwise_chain",
    "python_adds",
    "small_matmuls",
    "softmax_by_hand",
    "square_matmul",
    "training_step",
    "transformer_block",
]

#: Seconds per call (``bl.benchmark`` medians) chapters 03 and 04 measured on the NVIDIA H100
#: 80GB HBM3 of ``brrrlib/recordings/h100-2026-11-22`` (torch 2.11.0+cu130), at the sizes the
#: factories below pick on a GPU; several of their traces ship there (``bl.trace.recorded``).
H100_RECORDED_S = MappingProxyType(
    {
        "chain, eager": 474e-6,  # pointwise_chain(): 32 ops on 1,024 elements
        "chain, torch.compile": 63.8e-6,
        "chain, CUDA graph": 39.4e-6,
        'chain, compile "reduce-overhead"': 77.7e-6,
        "block fp32, batch 1": 774e-6,  # transformer_block(): d_model 1024, 256 tokens
        "block fp32, batch 16": 2.82e-3,
        "block fp32 compiled, batch 16": 2.34e-3,
        "block bf16, batch 16": 931e-6,
    }
)


def _device(device: torch.device | str | None) -> tuple[torch.device, bool]:
    """The device (the argument, else the course device) and whether it is cuda or mps."""
    if device is None:
        from brrrlib.machine import device as course_device

        device = course_device()
    dev = torch.device(device)
    return dev, dev.type in ("cuda", "mps")


# --------------------------------------------------------------------------- chapter 03


def _count_up(n: int) -> int:
    total = 0
    for _ in range(n):
        total += 1
    return total


def python_adds(n: int = 200_000):
    """A pure-Python loop doing ``n`` integer additions (chapter 03)."""
    return _count_up, (_checks.positive_int("n", n),)


def pointwise_chain(
    numel: int | None = None,
    n_ops: int = 16,
    device=None,
    *,
    large: bool = False,
    sync: bool = False,
):
    """A chain of ``n_ops`` multiply-adds on a small tensor (chapter 03)."""
    dev, big = _device(device)
    default = (2**26 if big else 2**22) if large else 1024
    numel = _checks.positive_int("numel", numel if numel is not None else default)
    n_ops = _checks.positive_int("n_ops", n_ops)
    x = torch.randn(numel, device=dev)

    def chain(x: torch.Tensor) -> torch.Tensor:
        for _ in range(n_ops):
            x = x * 1.01 + 0.01
            if sync:
                x[0].item()  # the host waits here for the device
        return x

    return chain, (x,)


def small_matmuls(n: int = 64, size: int | None = None, *, batched: bool = False, device=None):
    """``n`` independent ``size x size`` matmuls, in a loop or as one ``bmm`` (chapter 03)."""
    dev, big = _device(device)
    size = _checks.positive_int("size", size if size is not None else (64 if big else 16))
    n = _checks.positive_int("n", n)
    a, b = (torch.randn(n, size, size, device=dev) for _ in range(2))
    return (torch.bmm if batched else _matmul_loop), (a, b)


def _matmul_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack([a[i] @ b[i] for i in range(a.shape[0])])


def square_matmul(n: int | None = None, device=None):
    """One ``n x n`` fp32 matmul, ``torch.mm(a, b)``: a compute-bound call (chapter 03)."""
    dev, big = _device(device)
    n = _checks.positive_int("n", n if n is not None else (4096 if big else 1024))
    return torch.mm, (torch.randn(n, n, device=dev), torch.randn(n, n, device=dev))


def doubled_batch(model: nn.Module, batch: int = 1) -> tuple[Callable[[], None], ...]:
    """``model`` on ``batch`` samples and on ``2 * batch``: two calls for ``bl.compare`` (chapter 03)."""
    batch = _checks.positive_int("batch", batch)
    hint = "time bl.compare(lambda: model(x), lambda: model(x2)) with your own inputs"
    x = _linear_input(model, hint)(2 * batch)
    return tuple(functools.partial(torch.no_grad()(model), x[:n]) for n in (batch, 2 * batch))


def _linear_input(model: nn.Module, otherwise: str) -> Callable[[int], torch.Tensor]:
    """``make(batch)``: random inputs for ``model``'s first nn.Linear (its width, device, dtype)."""
    first = next((m for m in model.modules() if isinstance(m, nn.Linear)), None)
    if first is None:
        raise ValueError(f"model has no nn.Linear, so the input width is unknown; {otherwise}")
    w = first.weight
    return lambda batch: torch.randn(batch, first.in_features, device=w.device, dtype=w.dtype)


def cuda_graph(fn: Callable, *args) -> Callable[[], None]:
    """``fn(*args)`` captured in a CUDA graph: a zero-argument call that replays it (chapter 03)."""
    from brrrlib.timing import _capture_cuda_graph, _need_cuda

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    dev = tensors[0].device if tensors else _device(None)[0]
    _need_cuda(dev)
    return _capture_cuda_graph(functools.partial(fn, *args), dev)


# --------------------------------------------------------------------------- chapter 04


def mystery_a(device=None):
    """Mystery A: normalise a batch of images, then clip and rescale (chapter 04)."""
    dev, big = _device(device)
    n, side = (64, 1024) if big else (16, 512)
    x = torch.rand(n, 3, side, side, device=dev)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)

    def normalize_images(x: torch.Tensor) -> torch.Tensor:
        y = (x - mean) / std
        return (y.clamp(-3.0, 3.0) + 3.0) / 6.0

    return normalize_images, (x,)


def mystery_b(device=None):
    """Mystery B: an optimizer step written by hand, one parameter at a time (chapter 04)."""
    dev, _ = _device(device)
    shapes = [(64,), (32, 32), (16, 16), (128,), (8, 64)] * 24
    params = [torch.randn(s, device=dev) for s in shapes]
    grads = [torch.randn(s, device=dev) * 1e-3 for s in shapes]

    def sgd_step(params: list[torch.Tensor], grads: list[torch.Tensor], lr=1e-3, wd=1e-4):
        for p, g in zip(params, grads, strict=True):
            p.mul_(1.0 - wd).add_(g, alpha=-lr)
        return params

    return sgd_step, (params, grads)


def mystery_b_foreach(device=None):
    """Mystery B's optimizer step with ``torch._foreach_*``: every parameter in two calls (chapter 04)."""
    _, (params, grads) = mystery_b(device)

    def sgd_step_foreach(params: list[torch.Tensor], grads: list[torch.Tensor], lr=1e-3, wd=1e-4):
        torch._foreach_mul_(params, 1.0 - wd)
        torch._foreach_add_(params, grads, alpha=-lr)
        return params

    return sgd_step_foreach, (params, grads)


def mystery_c(device=None):
    """Mystery C: project a batch of token embeddings through a square weight (chapter 04)."""
    dev, big = _device(device)
    tokens, d = (16384, 4096) if big else (2048, 1024)
    x = torch.randn(tokens, d, device=dev)
    w = torch.randn(d, d, device=dev) / math.sqrt(d)
    b = torch.zeros(d, device=dev)

    def project(x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(b, x, w)

    return project, (x,)


class TinyBlock(nn.Module):
    """A small pre-norm transformer block, written out op by op (chapter 04)."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        _checks.divides("n_heads", n_heads, "d_model", d_model)
        self.n_heads, d = n_heads, d_model
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)  # seeded in this order
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One block: attention sub-layer, then MLP sub-layer, each with a residual."""
        B, T, C = x.shape
        hs = C // self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)  # 3 x (B, T, C), then 3 x (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_heads, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(_gelu_tanh(self.fc(self.ln2(x))))


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    # GELU, tanh approximation (Hendrycks & Gimpel 2016), as in GPT-2.
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def transformer_block(
    batch: int = 1,
    seq: int | None = None,
    d_model: int | None = None,
    n_heads: int = 4,
    *,
    dtype: torch.dtype = torch.float32,
    device=None,
):
    """A :class:`TinyBlock` and an input batch, ready to run (chapter 04)."""
    batch = _checks.positive_int("batch", batch)
    n_heads = _checks.positive_int("n_heads", n_heads)
    dev, big = _device(device)
    seq = _checks.positive_int("seq", seq if seq is not None else (256 if big else 16))
    d_model = _checks.positive_int("d_model", (1024 if big else 64) if d_model is None else d_model)
    with torch.random.fork_rng(devices=[]):  # seed the weights, leave the global stream alone
        torch.manual_seed(0)
        block = TinyBlock(d_model, n_heads)
    block = block.to(device=dev, dtype=dtype).eval().requires_grad_(False)
    x = torch.randn(batch, seq, d_model, device=dev, dtype=dtype)
    return block, (x,)


#: The optimizer implementations :func:`training_step` can use: torch.optim.AdamW's keywords.
OPTIMIZERS = MappingProxyType(
    {
        "for-loop": {"foreach": False},  # one op per tensor per line of the update
        "foreach": {"foreach": True},  # each line of the update over the whole list at once
        "fused": {"fused": True},  # the whole update in one kernel per group of tensors
    }
)


def training_step(
    batch: int = 16,
    seq: int | None = None,
    d_model: int | None = None,
    n_heads: int = 4,
    *,
    optimizer: str = "for-loop",
    precision: str = "fp32",
    device=None,
):
    """One training step of a :class:`TinyBlock`: forward, loss, backward, AdamW (chapter 04)."""
    batch = _checks.positive_int("batch", batch)
    _checks.one_of("optimizer", optimizer, OPTIMIZERS)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}
    if precision not in amp:  # TF32 is a global switch, not an autocast dtype
        tf32 = "torch.set_float32_matmul_precision('high')"
        raise ValueError(f"precision={precision!r} is not one of {', '.join(amp)}; TF32: {tf32}")
    model, (x,) = transformer_block(batch, seq, d_model, n_heads, device=device)
    model.train().requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **OPTIMIZERS[optimizer])
    dtype = amp[precision]

    def step(x: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
            loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    step.__name__ = step.__qualname__ = f"training_step_{optimizer}_{precision}"
    step.model, step.optimizer = model, opt  # type: ignore[attr-defined]
    return step, (x,)


def cos_cos(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x.cos().cos()``: the essay's example of two ops fusion turns into one pass (chapter 02)."""
    if out is None:
        return x.cos().cos()
    return torch.cos(torch.cos(x, out=out), out=out)


def checkpointed(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn`` under activation checkpointing: its forward saves only its inputs for backward."""
    from torch.utils.checkpoint import checkpoint

    run = functools.partial(checkpoint, fn, use_reentrant=False)
    run.__name__ = f"checkpointed({getattr(fn, '__name__', 'fn')})"
    return run


def backward_step(fn: Callable[..., torch.Tensor]) -> Callable[..., None]:
    """A training step of ``fn``: the forward, a scalar loss (the sum), the backward."""

    def step(*args: Any) -> None:
        fn(*args).sum().backward()

    step.__name__ = f"backward_step({getattr(fn, '__name__', 'fn')})"
    return step


def softmax_by_hand(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dimension, written op by op as a model might (chapter 02)."""
    peak = x.amax(dim=-1, keepdim=True)  # subtracting the row maximum keeps exp finite
    if out is None:
        e = (x - peak).exp()
        return e / e.sum(dim=-1, keepdim=True)
    torch.sub(x, peak, out=out).exp_()
    return torch.div(out, out.sum(dim=-1, keepdim=True), out=out)


def attention_by_hand(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scratch: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """``softmax(q @ kᵀ / √d) @ v`` as four eager ops (chapter 02)."""
    scale = math.sqrt(q.shape[-1])
    if scratch is None:
        scores = q @ k.transpose(-2, -1) / scale  # (B, H, N, N)
        return torch.softmax(scores, dim=-1) @ v  # (B, H, N, d)
    scores, probs = scratch
    torch.matmul(q, k.transpose(-2, -1), out=scores).div_(scale)  # write; read and write
    torch._softmax(scores, -1, False, out=probs)  # torch.softmax's kernel, with an out=
    return probs @ v


def attention(
    seq_len: int = 1024, heads: int = 8, head_dim: int = 64, *, fused: bool = False, device=None
):
    """Self-attention over ``seq_len`` tokens, by hand or fused (chapter 02)."""
    dev, _ = _device(device)
    n = _checks.positive_int("seq_len", seq_len)
    shape = (1, _checks.positive_int("heads", heads), n, _checks.positive_int("head_dim", head_dim))
    q, k, v = (torch.randn(shape, device=dev) for _ in range(3))
    if fused:
        return torch.nn.functional.scaled_dot_product_attention, (q, k, v)
    # two scratch tensors of N x N scores per head; zeros: their pages are touched now, not timed
    scratch = tuple(torch.zeros(shape[:3] + (n,), device=dev) for _ in range(2))
    return functools.partial(attention_by_hand, scratch=scratch), (q, k, v)
