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

#: Seconds per call that chapters 03 and 04 measured (``bl.benchmark`` medians) on the
#: NVIDIA H100 80GB HBM3 of ``brrrlib/recordings/h100-2026-11-22`` (torch 2.11.0+cu130):
#: the same workloads, at the sizes the factories below pick on a GPU. The traces of several
#: of them ship in that folder (``bl.trace.recorded``). A chapter prints them beside this
#: machine's numbers, labelled as recorded, so a learner without a GPU sees what one does.
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


def _device(device: torch.device | str | None) -> torch.device:
    """The device to build on: the argument if given, else the course device."""
    if device is not None:
        return torch.device(device)
    from brrrlib.machine import device as course_device

    return course_device()


def _big(device: torch.device) -> bool:
    """True on an accelerator (cuda, mps), where sizes must be much larger."""
    return device.type in ("cuda", "mps")


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
    return _count_up, (_checks.positive_int("n", n),)


def pointwise_chain(
    numel: int | None = None,
    n_ops: int = 16,
    device=None,
    *,
    large: bool = False,
    sync: bool = False,
):
    """A chain of ``n_ops`` multiply-adds on a small tensor (chapter 03).

    Returns ``(fn, (x,))`` with ``x`` of ``numel`` fp32 elements (default
    1,024; ``large=True``: 4 Mi on a CPU, 64 Mi on a GPU, where each op's own
    work dwarfs its overhead). Eager PyTorch launches ``2 * n_ops`` separate
    kernels, each reading and writing the whole tensor; when ``x`` is small
    every one of them costs about the same fixed overhead whatever its size.
    ``torch.compile(fn)`` fuses the chain into one kernel: the case where
    compiling removes overhead as well as memory traffic. ``sync=True`` reads one
    number back with ``.item()`` after every multiply-add: a sync point, where the
    host waits for the device to finish everything queued.
    """
    dev = _device(device)
    default = (2**26 if _big(dev) else 2**22) if large else 1024
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
    """``n`` independent ``size x size`` matmuls, in a loop or as one ``bmm`` (chapter 03).

    Returns ``(fn, (a, b))`` with ``a`` and ``b`` of shape ``(n, size, size)``.
    With ``batched=False`` ``fn`` loops in Python, one ``a[i] @ b[i]`` per
    iteration (``n`` launches, ``n`` times the overhead, plus the indexing);
    with ``batched=True`` it makes a single ``torch.bmm(a, b)`` call. Both
    return the same ``(n, size, size)`` result: the same FLOPs, the same
    bytes, only the number of instructions differs.
    """
    n = _checks.positive_int("n", n)
    dev = _device(device)
    size = _checks.positive_int("size", size if size is not None else (64 if _big(dev) else 16))
    a = torch.randn(n, size, size, device=dev)
    b = torch.randn(n, size, size, device=dev)
    return (torch.bmm if batched else _matmul_loop), (a, b)


def _matmul_loop(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack([a[i] @ b[i] for i in range(a.shape[0])])


def square_matmul(n: int | None = None, device=None):
    """One ``n x n`` fp32 matmul, ``torch.mm(a, b)``: a compute-bound call (chapter 03).

    Returns ``(torch.mm, (a, b))``: ``2 n^3`` FLOPs for ``12 n^2`` bytes, an
    intensity of ``n / 6`` FLOP/byte, far above any ridge point at the default
    ``n`` (1024 on a CPU, 4096 on a GPU). Chapter 03 compiles it beside an
    overhead-bound and a memory-bound workload: ``torch.compile`` hands a
    lone matmul to the same BLAS library eager PyTorch calls, so there is
    nothing for it to fuse or save.
    """
    dev = _device(device)
    n = _checks.positive_int("n", n if n is not None else (4096 if _big(dev) else 1024))
    return torch.mm, (torch.randn(n, n, device=dev), torch.randn(n, n, device=dev))


def doubled_batch(
    model: nn.Module, batch: int = 1
) -> tuple[Callable[[], None], Callable[[], None]]:
    """``model`` on ``batch`` samples and on ``2 * batch``: two calls for ``bl.compare`` (chapter 03).

    The inputs are random, shaped for the model's first ``nn.Linear``, on its
    device and in its dtype; both calls run without autograd. Use them as
    ``bl.compare(*workloads.doubled_batch(model))``: the time ratio of the
    doubled batch over the batch, measured in alternating rounds, is the
    essay's batch-size test.
    """
    batch = _checks.positive_int("batch", batch)
    make = _linear_input(
        model, "time bl.compare(lambda: model(x), lambda: model(x2)) with your own inputs"
    )
    x = make(2 * batch)
    return (
        functools.partial(_forward_no_grad, model, x[:batch]),
        functools.partial(_forward_no_grad, model, x),
    )


def _linear_input(model: nn.Module, otherwise: str) -> Callable[[int], torch.Tensor]:
    """``make(batch)``: random inputs for ``model``'s first nn.Linear (its width, device, dtype).

    Without an nn.Linear: a ValueError that ends with ``otherwise``, what to do instead.
    """
    first = next((m for m in model.modules() if isinstance(m, nn.Linear)), None)
    if first is None:
        raise ValueError(f"model has no nn.Linear, so the input width is unknown; {otherwise}")
    w = first.weight
    return lambda batch: torch.randn(batch, first.in_features, device=w.device, dtype=w.dtype)


def _forward_no_grad(model: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        model(x)


def cuda_graph(fn: Callable, *args) -> Callable[[], None]:
    """``fn(*args)`` captured in a CUDA graph: a zero-argument call that replays it (chapter 03).

    The capture follows the torch docs (warm-up on a side stream, then
    ``torch.cuda.graph``), as ``bl.benchmark(..., cuda_graph=True)`` does. One
    replay launches every captured kernel with one call: no Python, no
    dispatcher, one launch. The inputs must stay where they are (same tensors,
    same shapes). ``bl.compare(lambda: fn(*args), workloads.cuda_graph(fn, *args))``
    measures what that saves. CUDA only.
    """
    from brrrlib.timing import _capture_cuda_graph

    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    dev = tensors[0].device if tensors else _device(None)
    if dev.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA device; these arguments are on {dev.type!r}")
    return _capture_cuda_graph(functools.partial(fn, *args), dev)


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


def mystery_b_foreach(device=None):
    """Mystery B's optimizer step with ``torch._foreach_*``: every parameter in two calls (chapter 04).

    The same 120 parameters and the same update as :func:`mystery_b`, but
    ``torch._foreach_mul_(params, 1 - wd)`` then ``torch._foreach_add_(params,
    grads, alpha=-lr)``: two calls that each update the whole list (on a GPU,
    a few multi-tensor kernels), where ``mystery_b`` makes two per parameter.
    This is what ``torch.optim`` optimizers do with ``foreach=True``;
    ``fused=True`` (Adam, AdamW, SGD, ...) goes further and does the whole
    update in one kernel per group of tensors. Returns ``(fn, (params, grads))``.
    """
    _, (params, grads) = mystery_b(device)

    def sgd_step_foreach(params: list[torch.Tensor], grads: list[torch.Tensor], lr=1e-3, wd=1e-4):
        torch._foreach_mul_(params, 1.0 - wd)
        torch._foreach_add_(params, grads, alpha=-lr)
        return params

    return sgd_step_foreach, (params, grads)


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
    formula built from eight pointwise ops, so an eager run shows every
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
    batch = _checks.positive_int("batch", batch)
    n_heads = _checks.positive_int("n_heads", n_heads)
    dev = _device(device)
    seq = _checks.positive_int("seq", seq if seq is not None else (256 if _big(dev) else 16))
    d_model = _checks.positive_int(
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
    """One training step of a :class:`TinyBlock`: forward, loss, backward, AdamW (chapter 04).

    Returns ``(step, (x,))`` with ``x`` of shape ``(batch, seq, d_model)``;
    ``step(x)`` clears the gradients, runs the block, takes a stand-in loss
    (the mean square of the output: what matters here is that a backward
    runs), back-propagates and updates every weight with
    ``torch.optim.AdamW``. ``step.model`` and ``step.optimizer`` are the two
    objects; every call updates the weights, as training does.

    ``optimizer`` picks AdamW's implementation (:data:`OPTIMIZERS`):
    ``"for-loop"`` (``foreach=False``: each line of the update is one op per
    weight tensor), ``"foreach"`` (one ``torch._foreach_*`` op per line over
    the whole list) or ``"fused"`` (one kernel for the whole update). Same
    arithmetic, ever fewer ops.

    ``precision`` ``"bf16"`` or ``"fp16"`` runs the forward and the loss under
    ``torch.autocast`` in that dtype (mixed precision: the matmuls in 16 bits,
    the weights, gradients and AdamW's state kept in fp32); ``"fp32"`` runs
    everything in fp32. Sizes default as :func:`transformer_block`'s. The
    weights are seeded (the same block every call).

    The FLOPs: the matmuls of the forward, twice them backward (the gradient
    of each input and of each weight), so ``3 x (24 N C^2 + 4 B T^2 C)`` for
    ``N = B T`` tokens of width ``C``; about ``6 x parameters x tokens`` for
    the weights, the usual rule for a training step.
    """
    batch = _checks.positive_int("batch", batch)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}
    if precision not in amp:
        raise ValueError(
            f"precision={precision!r} is not one of {', '.join(amp)} (for TF32, call "
            "torch.set_float32_matmul_precision('high') first)"
        )
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
    """``x.cos().cos()``: the essay's example of two ops fusion turns into one pass (chapter 02).

    Eager, it reads ``x``, writes a temporary, reads it back and writes the
    result: 16 bytes per fp32 element where one fused kernel moves 8. With
    ``out`` (a tensor shaped like ``x``), both results go into ``out``, the
    second in place: the same 16 bytes, and no fresh memory to fault in on a
    CPU; ``torch.compile`` of that form writes its one pass straight into ``out``.
    """
    if out is None:
        return x.cos().cos()
    return torch.cos(torch.cos(x, out=out), out=out)


def checkpointed(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn`` under activation checkpointing: its forward saves only its inputs for backward.

    ``torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)``: the
    intermediate results are recomputed during the backward pass instead of
    kept, less memory held for more FLOPs (chapter 02).
    """
    from torch.utils.checkpoint import checkpoint

    def run(*args: Any) -> torch.Tensor:
        return checkpoint(fn, *args, use_reentrant=False)

    run.__name__ = f"checkpointed({getattr(fn, '__name__', 'fn')})"
    return run


def backward_step(fn: Callable[..., torch.Tensor]) -> Callable[..., None]:
    """A training step of ``fn``: the forward, a scalar loss (the sum), the backward."""

    def step(*args: Any) -> None:
        fn(*args).sum().backward()

    step.__name__ = f"backward_step({getattr(fn, '__name__', 'fn')})"
    return step


def softmax_by_hand(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last dimension, written op by op as a model might (chapter 02).

    Eager, five kernels each make a pass over memory (a row maximum, a
    subtraction, ``exp``, a row sum, a division): 32 bytes per fp32 element.
    ``torch.compile`` fuses them into one kernel that reads each row once,
    keeps it in cache while it reduces, and writes it once (8 bytes per
    element); ``torch.softmax`` is such a kernel, written fused by hand. With
    ``out``, the full-size results go into ``out`` (the same bytes, no fresh
    memory), as :func:`cos_cos` does.
    """
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
    """``softmax(q @ kᵀ / √d) @ v`` as four eager ops (chapter 02).

    ``q``, ``k``, ``v`` are ``(batch, heads, N, d)``. The scores are
    ``(batch, heads, N, N)``: written to memory by the first matmul, read and
    written by the scaling and by the softmax, read by the second matmul: six
    passes over ``4·N²`` bytes per head. A fused kernel
    (``F.scaled_dot_product_attention``; FlashAttention on a GPU) keeps each
    block of scores on the chip and never writes them. ``scratch``: two
    existing ``(batch, heads, N, N)`` tensors for the scores and the
    probabilities, so that a call moves the same bytes without allocating
    N × N memory (which a CPU faults in page by page on every call).
    """
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
    """Self-attention over ``seq_len`` tokens, by hand or fused (chapter 02).

    Returns ``(fn, (q, k, v))`` with fp32 ``q``, ``k``, ``v`` of shape
    ``(1, heads, seq_len, head_dim)``. ``fn`` is :func:`attention_by_hand`
    writing its scores into two scratch tensors made here (no N × N memory
    allocated per call), or, when ``fused``,
    ``torch.nn.functional.scaled_dot_product_attention`` (one kernel on a CPU
    and on a GPU). Both compute the same result to rounding and the same
    matmul FLOPs, ``4 x heads x seq_len² x head_dim``; the hand-written form
    moves ``24 x heads x seq_len²`` bytes more (its scores).
    """
    dev = _device(device)
    n = _checks.positive_int("seq_len", seq_len)
    shape = (1, _checks.positive_int("heads", heads), n, _checks.positive_int("head_dim", head_dim))
    q, k, v = (torch.randn(shape, device=dev) for _ in range(3))
    if fused:
        return torch.nn.functional.scaled_dot_product_attention, (q, k, v)
    # two scratch tensors of N x N scores per head; zeros: their pages are touched now, not timed
    scratch = tuple(torch.zeros(shape[:3] + (n,), device=dev) for _ in range(2))
    return functools.partial(attention_by_hand, scratch=scratch), (q, k, v)
