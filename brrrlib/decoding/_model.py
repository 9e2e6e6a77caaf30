"""A GPT-2-style decoder with a static KV cache, counted by hand, and its int8 weights (chapter 06)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib import _checks

__all__ = [
    "BYTES_PER_WEIGHT",
    "Decoder",
    "DecoderShape",
    "Int8Linear",
    "KVCache",
    "build",
    "decode_flops",
    "generate",
    "int8_kernel",
    "kv_cache_bytes",
    "matmul_weights",
    "new_cache",
    "parameters",
    "prefill_flops",
    "quantize_int8",
    "weight_bytes",
]


@dataclass(frozen=True)
class DecoderShape:
    """A GPT-2-style decoder's shape: ``layers`` blocks of width ``d_model``."""

    name: str
    layers: int
    d_model: int
    heads: int
    vocab: int
    max_context: int

    def __post_init__(self) -> None:
        for field in ("layers", "d_model", "heads", "vocab", "max_context"):
            _checks.positive_int(field, getattr(self, field))
        _checks.divides("heads", self.heads, "d_model", self.d_model)

    @property
    def head_size(self) -> int:
        """C // nh."""
        return self.d_model // self.heads


@dataclass(frozen=True)
class KVCache:
    """Each layer's keys and values, ``(B, nh, S, hs)`` each, preallocated (:func:`new_cache`)."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def length(self) -> int:
        """Positions it holds per sequence (S)."""
        return self.keys[0].shape[2]


def new_cache(model: Decoder, batch: int, length: int) -> KVCache:
    """A zeroed KV cache for ``batch`` sequences of up to ``length`` positions."""
    shape, w = model.shape, model.wte.weight
    if not 1 <= length <= shape.max_context:
        raise ValueError(f"length={length} must be between 1 and max_context={shape.max_context}")
    size = (_checks.positive_int("batch", batch), shape.heads, length, shape.head_size)
    keys, values = (
        tuple(torch.zeros(size, dtype=w.dtype, device=w.device) for _ in range(shape.layers))
        for _ in range(2)
    )
    if w.device.type == "cuda":  # torch.compile's CUDA graphs keep these addresses
        for t in (*keys, *values):
            torch._dynamo.mark_static_address(t)
    return KVCache(keys, values)


class _Block(nn.Module):
    """Pre-norm block, as nanoGPT's ``Block``: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, pos=None, k_cache=None, v_cache=None, mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if pos is not None:  # this step's keys and values into their slots of the cache
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
        if pos is None:  # an encoder (the zoo's ViT): every token attends to every token
            y = F.scaled_dot_product_attention(q, k, v)  # (B, nh, T, hs)
        elif mask is None:  # prefill: the prompt attends to itself, causally
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # decode: one query per sequence against every slot of the cache
            y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class Decoder(nn.Module):
    """A GPT-2-style decoder (learned positions, LayerNorm, GELU MLP, tied output head)."""

    def __init__(self, shape: DecoderShape) -> None:
        super().__init__()
        self.shape = shape
        d = shape.d_model
        self.wte, self.wpe = nn.Embedding(shape.vocab, d), nn.Embedding(shape.max_context, d)
        self.blocks = nn.ModuleList(_Block(d, shape.heads, 4 * d) for _ in range(shape.layers))
        self.ln_f = nn.LayerNorm(d)
        self.head: nn.Module | None = None
        self.register_buffer("slots", torch.arange(shape.max_context), persistent=False)

    def _run(self, idx, pos, cache: KVCache, mask) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        for block, k_cache, v_cache in zip(self.blocks, cache.keys, cache.values, strict=True):
            x = block(x, pos, k_cache, v_cache, mask)
        x = self.ln_f(x[:, -1])  # (B, C): only the last position's logits are needed
        return F.linear(x, self.wte.weight) if self.head is None else self.head(x)  # (B, V)

    def prefill(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """The prompt ``(B, T)``, from position 0: fills the cache's first T slots."""
        if cache.length < idx.shape[1]:
            need = f"new_cache(model, batch, length={idx.shape[1]})"
            raise ValueError(f"the KV cache holds {cache.length} positions: make one with {need}")
        return self._run(idx, self.slots[: idx.shape[1]], cache, None)

    def decode(self, idx: torch.Tensor, pos: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """One token per sequence ``(B, 1)`` at position ``pos`` (a tensor of one position)."""
        mask = (self.slots[: cache.length] <= pos).view(1, 1, 1, -1)  # the slots written so far
        return self._run(idx, pos, cache, mask)


def build(
    shape: DecoderShape,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> Decoder:
    """A :class:`Decoder` of ``shape`` with random weights, in eval mode, without gradients."""
    with torch.device("meta"):
        model = Decoder(shape)
    model = model.to_empty(device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        model.slots.copy_(torch.arange(shape.max_context))
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() == 1:  # LayerNorm weights
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=generator)
    return model.to(dtype).eval().requires_grad_(False)


@torch.no_grad()
def generate(model: Decoder, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy generation, as gpt-fast's ``generate`` without sampling: ``(B, T + new_tokens)``."""
    _checks.positive_int("new_tokens", new_tokens)
    B, T = prompt.shape
    cache = new_cache(model, B, T + new_tokens)
    out = [prompt, model.prefill(prompt, cache).argmax(-1, keepdim=True)]  # (B, 1) each
    pos = torch.tensor([T], device=prompt.device)
    for _ in range(new_tokens - 1):
        out.append(model.decode(out[-1], pos, cache).argmax(-1, keepdim=True))
        pos += 1
    return torch.cat(out, dim=1)


# --------------------------------------------------------------------------- counted by hand

#: Bytes per weight of each precision the chapter stores weights in.
BYTES_PER_WEIGHT = {"fp32": 4, "bf16": 2, "fp16": 2, "int8": 1}


def parameters(shape: DecoderShape) -> int:
    """``V*C + max_context*C + L*(12*C^2 + 13*C) + 2*C``."""
    L, C = shape.layers, shape.d_model
    return shape.vocab * C + shape.max_context * C + L * (12 * C**2 + 13 * C) + 2 * C


def matmul_weights(shape: DecoderShape) -> int:
    """Weights that take part in a matmul: ``L*12*C^2`` in the blocks, ``V*C`` in the head."""
    return shape.layers * 12 * shape.d_model**2 + shape.vocab * shape.d_model


def weight_bytes(shape: DecoderShape, precision: str = "fp32") -> int:
    """Bytes of weights one decode step reads: every parameter but the position table."""
    _checks.one_of("precision", precision, BYTES_PER_WEIGHT)
    read = parameters(shape) - shape.max_context * shape.d_model
    if precision != "int8":
        return read * BYTES_PER_WEIGHT[precision]
    matmuls = matmul_weights(shape)  # 1 byte each; the rest and a scale per output row in 2
    scales = shape.layers * 9 * shape.d_model + shape.vocab
    return matmuls + 2 * (read - matmuls + scales)


def decode_flops(shape: DecoderShape, batch: int = 1, context: int = 1) -> int:
    """One decode step, one new token per sequence: ``B*(2*matmul_weights + 4*L*S*C)``."""
    return batch * (2 * matmul_weights(shape) + 4 * shape.layers * context * shape.d_model)


def prefill_flops(shape: DecoderShape, batch: int = 1, tokens: int = 1) -> int:
    """A prompt of T tokens: ``B*(2*L*12*C^2*T + 2*L*C*T*(T+1) + 2*V*C)``."""
    L, C, T = shape.layers, shape.d_model, tokens
    return batch * (2 * L * 12 * C**2 * T + 2 * L * C * T * (T + 1) + 2 * shape.vocab * C)


def kv_cache_bytes(shape: DecoderShape, batch: int, context: int, bytes_per_number: int = 4) -> int:
    """``2 * L * B * S * C * bytes``: a key and a value per layer, position and sequence."""
    return 2 * shape.layers * batch * context * shape.d_model * bytes_per_number


# --------------------------------------------------------------------------- weight-only int8


class Int8Linear(nn.Module):
    """``y = (x @ q.T) * scales + bias`` with int8 weights ``q`` ``(N, K)`` and one scale per row."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        w = weight.detach().float()  # per row: scale = max|w| / 127, q = round(w / scale)
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (N,)
        self.register_buffer("q", torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8))
        self.register_buffer("scales", scales.to(weight.dtype))
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch._weight_int8pack_mm(x.reshape(-1, x.shape[-1]), self.q, self.scales)  # (rows, N)
        y = y.view(*x.shape[:-1], -1)
        return y if self.bias is None else y + self.bias


def quantize_int8(model: Decoder) -> Decoder:
    """A copy of ``model`` (bf16 or fp16) whose matmuls read int8 weights."""
    dtype = model.wte.weight.dtype
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"model must be 16-bit, not {dtype}: build it with dtype=torch.bfloat16")
    out = copy.deepcopy(model)
    for block in out.blocks:
        for name in ("qkv", "proj", "fc", "fc_out"):
            linear = getattr(block, name)
            setattr(block, name, Int8Linear(linear.weight, linear.bias))
    out.head = Int8Linear(out.wte.weight)
    return out


def int8_kernel(device: str | torch.device = "cpu", dtype: torch.dtype = torch.bfloat16) -> bool:
    """True when ``torch._weight_int8pack_mm`` runs here with ``dtype`` activations."""
    dev = torch.device(device)
    x = torch.ones(4, 32, dtype=dtype, device=dev)
    q = torch.ones(8, 32, dtype=torch.int8, device=dev)
    scales = torch.full((8,), 0.5, dtype=dtype, device=dev)
    try:
        y = torch._weight_int8pack_mm(x, q, scales).float().cpu()
    except (NotImplementedError, RuntimeError):  # no kernel here (or no data: the meta device)
        return False
    return bool(torch.allclose(y, torch.full((4, 8), 16.0)))
