"""A GPT-2-style decoder with a static KV cache, in plain PyTorch (chapter 06)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib import _checks

__all__ = ["Decoder", "DecoderShape", "KVCache", "build", "generate", "new_cache"]


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
        if self.d_model % self.heads:
            raise ValueError(f"heads={self.heads} must divide d_model={self.d_model}")

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
    shape = model.shape
    if not 1 <= length <= shape.max_context:
        raise ValueError(f"length={length} must be between 1 and max_context={shape.max_context}")
    _checks.positive_int("batch", batch)
    w = model.wte.weight
    size = (batch, shape.heads, length, shape.head_size)
    keys = tuple(torch.zeros(size, dtype=w.dtype, device=w.device) for _ in range(shape.layers))
    values = tuple(torch.zeros(size, dtype=w.dtype, device=w.device) for _ in range(shape.layers))
    if w.device.type == "cuda":
        for t in (*keys, *values):
            torch._dynamo.mark_static_address(t)
    return KVCache(keys, values)


class _Block(nn.Module):
    """Pre-norm block, as nanoGPT's ``Block``: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, shape: DecoderShape) -> None:
        super().__init__()
        d = shape.d_model
        self.heads = shape.heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, pos, k_cache, v_cache, mask):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        k_cache.index_copy_(2, pos, k)  # this step's keys and values into their slots
        v_cache.index_copy_(2, pos, v)
        if mask is None:  # prefill: the prompt attends to itself, causally
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
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
        self.blocks = nn.ModuleList(_Block(shape) for _ in range(shape.layers))
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
            raise ValueError(
                f"the KV cache holds {cache.length} positions, the prompt has {idx.shape[1]}: "
                "make one with new_cache(model, batch, length) for length >= the prompt"
            )
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
    if T + new_tokens > model.shape.max_context:
        raise ValueError(
            f"prompt ({T}) + new_tokens ({new_tokens}) exceeds max_context={model.shape.max_context}"
        )
    cache = new_cache(model, B, T + new_tokens)
    out = [prompt, model.prefill(prompt, cache).argmax(-1, keepdim=True)]  # (B, 1) each
    pos = torch.tensor([T], device=prompt.device)
    for _ in range(new_tokens - 1):
        out.append(model.decode(out[-1], pos, cache).argmax(-1, keepdim=True))
        pos += 1
    return torch.cat(out, dim=1)
