"""Workloads for chapters 03 (overhead) and 04 (diagnose your own code).

Every public function here is a *workload factory*: a callable whose
arguments all have defaults, which builds its tensors on the course device and
returns ``(fn, args)``. Running the workload is always ``fn(*args)``, so one
factory serves the timer, the profiler and the diagnosis alike::

    from brrrlib import workloads

    fn, args = workloads.mystery_a()
    bl.diagnose(fn, *args)

and from a shell, with no notebook at all::

    brrr diagnose brrrlib.workloads:mystery_a

Use the same convention for your own project: write a zero-argument function
that returns ``(fn, args)`` (or ``(fn, args, kwargs)``) and point
``brrr diagnose`` at it (chapter 04).

Sizes adapt to the device. A GPU does in a microsecond what a laptop core does
in a millisecond, so each factory picks a CPU size that runs in milliseconds
and a GPU size large enough to sit well above its launch overhead; pass the
size keywords to override. Only ``mystery_*`` keep their regime a secret:
their docstrings describe the code, not the verdict.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "TinyBlock",
    "mlp",
    "mystery_a",
    "mystery_b",
    "mystery_c",
    "pointwise_chain",
    "python_adds",
    "small_matmuls",
    "transformer_block",
]


def _device(device: torch.device | str | None) -> torch.device:
    """The device to build on: the argument if given, else the course device."""
    if device is not None:
        return torch.device(device)
    from brrrlib.devices import device as course_device

    return course_device()


def _big(device: torch.device) -> bool:
    """True on an accelerator (cuda, mps), where sizes must be much larger."""
    return device.type in ("cuda", "mps")


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


# --------------------------------------------------------------------------- chapter 03


def _count_up(n: int) -> int:
    total = 0
    for _ in range(n):
        total += 1
    return total


def python_adds(n: int = 200_000):
    """A pure-Python loop doing ``n`` integer additions (chapter 03).

    Returns ``(fn, (n,))``. Time it with ``bl.benchmark(fn, *args)`` and divide:
    ``n / timing.median_s`` is how many additions per second the interpreter
    manages on this machine, the number the essay sets beside a GPU's FLOP/s
    (it quotes about 32 million per second). No tensors, no device: this is
    the speed of the manager who writes the factory's instructions.
    """
    return _count_up, (_positive_int("n", n),)


def pointwise_chain(numel: int = 1024, n_ops: int = 16, device=None):
    """A chain of ``n_ops`` multiply-adds on a small tensor (chapter 03).

    Returns ``(fn, (x,))`` with ``x`` of ``numel`` fp32 elements. Eager PyTorch
    launches ``2 * n_ops`` separate kernels, each reading and writing the whole
    tensor; when ``x`` is small every one of them costs about the same fixed
    overhead whatever its size. ``torch.compile(fn)`` fuses the chain into one
    kernel: the case where compiling removes overhead as well as memory
    traffic.
    """
    numel = _positive_int("numel", numel)
    n_ops = _positive_int("n_ops", n_ops)
    x = torch.randn(numel, device=_device(device))

    def chain(x: torch.Tensor) -> torch.Tensor:
        for _ in range(n_ops):
            x = x * 1.01 + 0.01
        return x

    return chain, (x,)


def small_matmuls(n: int = 64, size: int | None = None, *, batched: bool = False, device=None):
    """``n`` independent ``size x size`` matmuls, in a loop or as one ``bmm`` (chapter 03).

    Returns ``(fn, (a, b))`` with ``a`` and ``b`` of shape ``(n, size, size)``.
    With ``batched=False`` ``fn`` loops in Python, one ``a[i] @ b[i]`` per
    iteration (``n`` launches, ``n`` times the overhead, plus the indexing);
    with ``batched=True`` it makes a single ``torch.bmm(a, b)`` call. Both
    return the same ``(n, size, size)`` result: the same FLOPs, the same
    bytes, only the number of instructions differs.
    """
    n = _positive_int("n", n)
    dev = _device(device)
    size = _positive_int("size", size if size is not None else (64 if _big(dev) else 16))
    a = torch.randn(n, size, size, device=dev)
    b = torch.randn(n, size, size, device=dev)
    return (torch.bmm if batched else _matmul_loop), (a, b)


def _matmul_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack([a[i] @ b[i] for i in range(a.shape[0])])


def mlp(batch: int = 1, d_model: int | None = None, *, device=None):
    """A two-layer MLP (``Linear -> ReLU -> Linear``, hidden ``4 * d_model``) on a batch (chapter 03).

    Returns ``(fn, (x,))`` with ``x`` of shape ``(batch, d_model)``; no
    autograd. It is the batch-size experiment's model. Each call reads both
    weight matrices once (``8 * d_model**2`` fp32 numbers) whatever the batch,
    and does ``16 * d_model**2`` FLOPs per sample. With a small ``d_model`` the
    fixed cost is the launch overhead of a handful of ops; with a large one it
    is reading the weights from memory. Both make "double the batch, time
    barely moves": check the weight-read time before blaming overhead.
    """
    batch = _positive_int("batch", batch)
    dev = _device(device)
    d_model = _positive_int(
        "d_model", d_model if d_model is not None else (1024 if _big(dev) else 128)
    )
    model = nn.Sequential(
        nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model)
    ).to(dev)
    model.requires_grad_(False)
    return model, (torch.randn(batch, d_model, device=dev),)


# --------------------------------------------------------------------------- chapter 04


def mystery_a(device=None):
    """Mystery A: normalise a batch of images, then clip and rescale (chapter 04).

    ``(x - mean) / std`` per channel, clamped to ``[-3, 3]`` and mapped to
    ``[0, 1]``, for a batch of 3-channel images (16 images of 512 x 512 on a
    CPU, 64 of 1024 x 1024 on a GPU). Returns ``(fn, (x,))``; the channel
    statistics live inside ``fn``. Which regime is it in? Predict before you
    run ``bl.diagnose``.
    """
    dev = _device(device)
    n, side = (64, 1024) if _big(dev) else (16, 512)
    x = torch.rand(n, 3, side, side, device=dev)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1)

    def normalize_images(x: torch.Tensor) -> torch.Tensor:
        y = (x - mean) / std
        return (y.clamp(-3.0, 3.0) + 3.0) / 6.0

    return normalize_images, (x,)


def mystery_b(device=None):
    """Mystery B: an optimizer step written by hand, one parameter at a time (chapter 04).

    Weight decay then a gradient step, ``p.mul_(1 - wd).add_(g, alpha=-lr)``,
    for each of 120 parameter tensors of a small model (biases and small
    weights, 64 to 1024 numbers each). Returns ``(fn, (params, grads))``.
    Which regime is it in? Predict before you run ``bl.diagnose``.
    """
    dev = _device(device)
    shapes = [(64,), (32, 32), (16, 16), (128,), (8, 64)] * 24
    params = [torch.randn(s, device=dev) for s in shapes]
    grads = [torch.randn(s, device=dev) * 1e-3 for s in shapes]

    def sgd_step(params: list[torch.Tensor], grads: list[torch.Tensor], lr=1e-3, wd=1e-4):
        for p, g in zip(params, grads, strict=True):
            p.mul_(1.0 - wd).add_(g, alpha=-lr)
        return params

    return sgd_step, (params, grads)


def mystery_c(device=None):
    """Mystery C: project a batch of token embeddings through a square weight (chapter 04).

    ``x @ w + b`` with ``x`` of shape ``(tokens, d)`` and ``w`` of ``(d, d)``:
    2048 tokens and ``d = 1024`` on a CPU, 16384 tokens and ``d = 4096`` on a
    GPU. Returns ``(fn, (x,))``; the weight and bias live inside ``fn``.
    Which regime is it in? Predict before you run ``bl.diagnose``.
    """
    dev = _device(device)
    tokens, d = (16384, 4096) if _big(dev) else (2048, 1024)
    x = torch.randn(tokens, d, device=dev)
    w = torch.randn(d, d, device=dev) / math.sqrt(d)
    b = torch.zeros(d, device=dev)

    def project(x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(b, x, w)

    return project, (x,)


class TinyBlock(nn.Module):
    """A small pre-norm transformer block, written out op by op (chapter 04).

    ``x + attention(layer_norm(x))`` then ``h + mlp(layer_norm(h))``, the
    GPT-2 layout as in nanoGPT's ``Block``. Attention is causal and spelled
    out (``q @ k^T``, mask, softmax, ``@ v``) and the GELU is the tanh
    formula built from seven pointwise ops, so an eager run shows every
    memory-bound op that a compiler can fuse. Shapes in the comments:
    B batch, T sequence, C = ``d_model``, nh heads, hs = C // nh.
    """

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, 4 * d_model)
        self.fc_out = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One block: attention sub-layer, then MLP sub-layer, each with a residual."""
        x = x + self._attention(self.ln1(x))
        return x + self.fc_out(_gelu_tanh(self.fc(self.ln2(x))))

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        hs = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (
            t.view(B, T, self.n_heads, hs).transpose(1, 2) for t in (q, k, v)
        )  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        return self.proj(y)


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
    """A :class:`TinyBlock` and an input batch, ready to run (chapter 04).

    Returns ``(block, (x,))`` with ``x`` of shape ``(batch, seq, d_model)``.
    Defaults: ``seq=16, d_model=64`` on a CPU, ``seq=256, d_model=1024`` on
    a GPU. The weights are seeded (the same block every call), in ``dtype``,
    and have ``requires_grad`` off: this is inference, no autograd
    bookkeeping in the timings. Chapter 04 diagnoses it at ``batch=1`` and
    then improves it step by step (batching, ``torch.compile``, precision).
    """
    batch = _positive_int("batch", batch)
    n_heads = _positive_int("n_heads", n_heads)
    dev = _device(device)
    seq = _positive_int("seq", seq if seq is not None else (256 if _big(dev) else 16))
    d_model = _positive_int(
        "d_model", d_model if d_model is not None else (1024 if _big(dev) else 64)
    )
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"dtype must be a floating torch.dtype such as torch.bfloat16, got {dtype!r}"
        )
    with torch.random.fork_rng(devices=[]):  # seed the weights, leave the global stream alone
        torch.manual_seed(0)
        block = TinyBlock(d_model, n_heads)
    block = block.to(device=dev, dtype=dtype).eval().requires_grad_(False)
    x = torch.randn(batch, seq, d_model, device=dev, dtype=dtype)
    return block, (x,)
