"""The zoo's decoder: a Llama-style model, for prefill and decode."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib.zoo._tally import HandCount, Tally

__all__ = ["DecoderConfig", "Llama", "llama_count", "llama_workload"]


@dataclass(frozen=True)
class DecoderConfig:
    """A decoder's shape. ``kv_heads < heads`` is grouped-query attention (Llama 2/3)."""

    layers: int
    d: int
    heads: int
    vocab: int
    ctx: int = 1024
    kv_heads: int | None = None
    ffn: int | None = None  # hidden width of the SwiGLU MLP, ~8/3*d in Llama (default 4*d)

    @property
    def head_size(self) -> int:
        """C // nh."""
        return self.d // self.heads


# ----------------------------------------------------------------------------- Llama


class _LlamaBlock(nn.Module):
    """RMSNorm, rotary positions, grouped-query attention, SwiGLU MLP; no biases."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        d, kv, f = cfg.d, (cfg.kv_heads or cfg.heads) * cfg.head_size, cfg.ffn or 4 * cfg.d
        self.heads, self.kv_heads = cfg.heads, cfg.kv_heads or cfg.heads
        self.norm_1, self.norm_2 = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
        self.wq, self.wk, self.wv = (nn.Linear(d, n, bias=False) for n in (d, kv, kv))
        self.wo = nn.Linear(d, d, bias=False)
        self.w1, self.w3 = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False)
        self.w2 = nn.Linear(f, d, bias=False)

    def forward(self, x, rope, cache):
        B, T, C = x.shape
        h = self.norm_1(x)
        q = self.wq(h).view(B, T, self.heads, -1).transpose(1, 2)  # (B, nh, T, hs)
        k = self.wk(h).view(B, T, self.kv_heads, -1).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.wv(h).view(B, T, self.kv_heads, -1).transpose(1, 2)
        q, k = _rotate(q, *rope), _rotate(k, *rope)
        y = _attend(q, k, v, cache, gqa=self.heads != self.kv_heads)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm_2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


def _attend(q, k, v, cache, gqa: bool = False) -> torch.Tensor:
    """Causal attention over the prompt, or one query over the KV cache."""
    if cache is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    k_cache, v_cache = cache
    k_cache[:, :, -1:] = k
    v_cache[:, :, -1:] = v
    return F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=gqa)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021, RoFormer), the "rotate half" form."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Llama(nn.Module):
    """A Llama-style decoder (Touvron et al. 2023): RMSNorm, rotary positions, untied head."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.d)
        self.blocks = nn.ModuleList(_LlamaBlock(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.d, eps=1e-5)
        self.head = nn.Linear(cfg.d, cfg.vocab, bias=False)
        hs = cfg.head_size
        inv_freq = 1.0 / (10000 ** (torch.arange(0, hs, 2).float() / hs))
        angles = torch.outer(torch.arange(cfg.ctx).float(), inv_freq).repeat(1, 2)  # (ctx, hs)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, idx: torch.Tensor, caches: tuple | None = None) -> torch.Tensor:
        """Token ids ``(B, T)`` (and the caches, to decode) -> last logits ``(B, 1, V)``."""
        T = idx.shape[1]
        start = 0 if caches is None else caches[0][0].shape[2] - T
        rope = (self.cos[start : start + T], self.sin[start : start + T])  # (T, hs) views
        x = self.tok(idx)
        for i, block in enumerate(self.blocks):
            x = block(x, rope, None if caches is None else caches[i])
        return self.head(self.norm(x[:, -1:]))


def llama_count(cfg: DecoderConfig, b: int, t: int, cached: int = 0) -> HandCount:
    """Llama FLOPs: ``L*(2BTC(2C+2Ckv+3F) + 4BTSC + 10BTC + 4BT + 3.5BT(C+Ckv) + 2BTF) + 4BC + 2B +
    2BCV``.
    """
    n, c, hs, f, s = b * t, cfg.d, cfg.head_size, cfg.ffn or 4 * cfg.d, cached + t
    ckv = (cfg.kv_heads or cfg.heads) * hs
    tally = Tally()
    tally.lookup(n, c)
    for _ in range(cfg.layers):
        tally.rms_norm(n * c, n, c)
        for width in (c, ckv, ckv):
            tally.linear(n, c, width, bias=False)
        for width in (c, ckv):  # rotary: -x[half:], cat, x * cos, rotated * sin, add
            tally.pointwise(n * width // 2)
            tally.move(n * width, n * width)
            tally.pointwise(n * width, n * width, t * hs)
            tally.pointwise(n * width, n * width, t * hs)
            tally.pointwise(n * width, n * width, n * width)
        # decode writes k and v into the cache first; merging the heads after, (B, nh, T, hs)
        # -> (B, T, C), is a view: the CPU attention kernel lays its output out so
        tally.attention(b, cfg.heads, t, s, hs, kv_heads=cfg.kv_heads, cached=s > t)
        tally.linear(n, c, c, bias=False)
        tally.pointwise(n * c, n * c, n * c)  # residual
        tally.rms_norm(n * c, n, c)
        tally.linear(n, c, f, bias=False)
        tally.pointwise(n * f)  # silu
        tally.linear(n, c, f, bias=False)
        tally.pointwise(n * f, n * f, n * f)  # gate multiply
        tally.linear(n, f, c, bias=False)
        tally.pointwise(n * c, n * c, n * c)  # residual
    tally.rms_norm(b * c, b, c)
    tally.linear(b, c, cfg.vocab, bias=False)
    return tally.done()


# ----------------------------------------------------------------------------- workloads


def llama_workload(cfg: DecoderConfig, batch: int, tokens: int, cached: int):
    """``(model, (idx,))`` for a prefill, ``(model, (idx, caches))`` for a decode step."""
    model = Llama(cfg)
    idx = torch.randint(0, cfg.vocab, (batch, tokens))
    if not cached:
        return model, (idx,)
    shape = (batch, cfg.kv_heads or cfg.heads, cached + tokens, cfg.head_size)
    scale = 1 / math.sqrt(cfg.head_size)
    caches = tuple((torch.randn(shape) * scale, torch.randn(shape)) for _ in range(cfg.layers))
    return model, (idx, caches)
