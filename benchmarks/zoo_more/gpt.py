"""A GPT-2-style decoder, for prefill and decode (the model brrrlib.decoding's tests load
their weights into: a second implementation).

Shapes in the comments: B batch, T new tokens, S tokens in the KV cache
(past + new), C = ``d`` model width, nh heads, hs = C // nh head size, V
vocabulary. **Prefill** runs the whole prompt at once; **decode** runs one new
token against a preallocated KV cache of S tokens. Both return the logits of
the last position only, as nanoGPT's ``generate`` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib.zoo import HandCount, Tally

__all__ = ["GPT", "GPTConfig", "gpt_count", "gpt_workload"]


@dataclass(frozen=True)
class GPTConfig:
    """A GPT-2-style decoder's shape (GPT-2 small: 12 layers, 768 wide, 12 heads, 50,257 words)."""

    layers: int
    d: int
    heads: int
    vocab: int
    ctx: int = 1024

    @property
    def head_size(self) -> int:
        """C // nh."""
        return self.d // self.heads


class _GPTBlock(nn.Module):
    """Pre-norm block, as nanoGPT's ``Block``: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        d = cfg.d
        self.heads = cfg.heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc_out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor, cache: tuple | None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)  # 3 x (B, T, C)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if cache is None:  # prefill: causal attention over the prompt
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        else:  # decode: k and v into the cache's last slot, then one query over all S
            cache[0][:, :, -1:], cache[1][:, :, -1:] = k, v
            y = F.scaled_dot_product_attention(q, *cache)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """A GPT-2-style decoder (learned positions, LayerNorm, GELU MLP, tied output head).

    ``forward(idx)`` prefills; ``forward(idx, caches)`` decodes with one
    ``(k, v)`` pair per layer. Returns the last position's logits, ``(B, 1, V)``.
    """

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(cfg.vocab, cfg.d), nn.Embedding(cfg.ctx, cfg.d)
        self.blocks = nn.ModuleList(_GPTBlock(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.d)

    def forward(self, idx: torch.Tensor, caches: tuple | None = None) -> torch.Tensor:
        """Token ids ``(B, T)`` (and the caches, to decode) -> last logits ``(B, 1, V)``."""
        T = idx.shape[1]
        start = 0 if caches is None else caches[0][0].shape[2] - T
        x = self.wte(idx) + self.wpe.weight[start : start + T]  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return F.linear(self.ln_f(x[:, -1:]), self.wte.weight)  # (B, 1, V), weights tied


def gpt_count(cfg: GPTConfig, b: int, t: int, cached: int = 0) -> HandCount:
    """GPT FLOPs: ``L*(24*B*T*C^2 + 4*B*T*S*C + 20*B*T*C) + B*T*C + 7*B*C + 2*B*C*V``.

    T new tokens attend to S = ``cached`` + T (prefill: ``cached = 0``).

    Per layer: the four matmuls ``2*B*T*C*(3C + C + 4C + 4C)``; attention
    ``4*B*T*S*C`` (S = T in prefill: the causal mask is not discounted);
    two LayerNorms (7 each), GELU (1) and two residual adds (1 each) per
    element: ``20*B*T*C``. Then the embedding add, the final LayerNorm on the
    last position only, and the tied output head.
    """
    n, c, s = b * t, cfg.d, cached + t
    tally = Tally()
    tally.lookup(n, c)  # wte(idx)
    tally.pointwise(n * c, n * c, t * c)  # + wpe[:T] (broadcast over B)
    for _ in range(cfg.layers):
        tally.layer_norm(n * c, n, c)
        tally.linear(n, c, 3 * c)
        # merging the heads after, (B, nh, T, hs) -> (B, T, C), is a view
        tally.attention(b, cfg.heads, t, s, cfg.head_size, cached=s > t)
        tally.linear(n, c, c)
        tally.pointwise(n * c, n * c, n * c)  # residual
        tally.layer_norm(n * c, n, c)
        tally.mlp(n, c, 4 * c)
    tally.layer_norm(b * c, b, c)
    tally.linear(b, c, cfg.vocab, bias=False)
    return tally.done()


def gpt_workload(cfg: GPTConfig, batch: int, tokens: int, cached: int):
    """``(model, (idx,))`` for a prefill, ``(model, (idx, caches))`` for a decode step."""
    model = GPT(cfg)
    idx = torch.randint(0, cfg.vocab, (batch, tokens))
    if not cached:
        return model, (idx,)
    shape = (batch, cfg.heads, cached + tokens, cfg.head_size)
    scale = 1 / math.sqrt(cfg.head_size)
    caches = tuple((torch.randn(shape) * scale, torch.randn(shape)) for _ in range(cfg.layers))
    return model, (idx, caches)
