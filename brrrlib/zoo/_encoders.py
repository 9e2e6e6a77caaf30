"""The zoo's encoder: a Vision Transformer."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib.zoo._tally import HandCount, Tally

__all__ = ["ViT", "VisionConfig", "vit_count"]


@dataclass(frozen=True)
class VisionConfig:
    """A ViT's shape: ``image`` pixels square, cut into ``patch``-pixel patches."""

    image: int
    patch: int
    layers: int
    d: int
    heads: int = 1
    ffn: int | None = None  # the MLP's hidden width (default 4*d)
    classes: int = 1000

    @property
    def tokens(self) -> int:
        """Patches per image: ``(image / patch)^2``."""
        return (self.image // self.patch) ** 2


class _PreNormBlock(nn.Module):
    """ViT's encoder block: ``x + attn(LN(x))``, then ``x + mlp(LN(x))`` (no mask)."""

    def __init__(self, d: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_2, self.fc, self.fc_out = nn.LayerNorm(d), nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)  # (B, nh, T, hs)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_out(F.gelu(self.fc(self.ln_2(x))))


class ViT(nn.Module):
    """A Vision Transformer (Dosovitskiy et al. 2021): patches, a class token, encoder blocks."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, cfg.d, cfg.patch, stride=cfg.patch)
        self.cls = nn.Parameter(torch.randn(1, 1, cfg.d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, cfg.tokens + 1, cfg.d) * 0.02)
        ffn = cfg.ffn or 4 * cfg.d
        self.blocks = nn.Sequential(
            *(_PreNormBlock(cfg.d, cfg.heads, ffn) for _ in range(cfg.layers))
        )
        self.ln, self.head = nn.LayerNorm(cfg.d), nn.Linear(cfg.d, cfg.classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` -> class logits ``(B, classes)``."""
        x = self.patches(images).flatten(2).transpose(1, 2)  # (B, T, C)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.pos  # (B, T+1, C)
        return self.head(self.ln(self.blocks(x))[:, 0])  # classify the class token


def vit_count(cfg: VisionConfig, b: int) -> HandCount:
    """ViT FLOPs: patches ``2*B*T*C*3*p^2``, ``T + 1`` tokens through the layers, then the head."""
    c, t, f = cfg.d, cfg.tokens + 1, cfg.ffn or 4 * cfg.d
    n = b * t
    tally = Tally()
    tally.conv2d(b, 3, cfg.image, cfg.image, c, cfg.patch, stride=cfg.patch, pad=0, bias=True)
    tally.move(c + b * cfg.tokens * c, n * c)  # cat: the class token is read once (broadcast)
    tally.pointwise(n * c, n * c, t * c)  # + position embeddings
    for _ in range(cfg.layers):
        tally.layer_norm(n * c, n, c)
        tally.linear(n, c, 3 * c)
        tally.attention(b, cfg.heads, t, t, c // cfg.heads)
        tally.linear(n, c, c)
        tally.pointwise(n * c, n * c, n * c)
        tally.layer_norm(n * c, n, c)
        tally.mlp(n, c, f)
    tally.layer_norm(n * c, n, c)
    tally.linear(b, c, cfg.classes)
    return tally.done()
