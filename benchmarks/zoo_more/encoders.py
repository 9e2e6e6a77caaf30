"""A BERT-style text encoder and an MLP-Mixer.

Shapes in the comments: B batch, T tokens (or image patches), C = ``d``
model width, nh heads, hs = C // nh, F the MLP's hidden width, Ft the Mixer's
token-mixing width.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib.zoo import HandCount, Tally

__all__ = ["BertConfig", "BertEncoder", "Mixer", "MixerConfig", "bert_count", "mixer_count"]


# ----------------------------------------------------------------------------- BERT


@dataclass(frozen=True)
class BertConfig:
    """A BERT-style encoder's shape (BERT-base: 12 layers, 768 wide, 12 heads, 30,522 words)."""

    layers: int
    d: int
    heads: int
    vocab: int = 30522  # BERT's WordPiece vocabulary (Devlin et al. 2019)
    ffn: int | None = None
    max_positions: int = 512


class _BertLayer(nn.Module):
    """Post-norm layer, as in BERT: ``x = LN(x + attn(x))``, then ``x = LN(x + mlp(x))``."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        d, f = cfg.d, cfg.ffn or 4 * cfg.d
        self.heads = cfg.heads
        self.query, self.key, self.value = (nn.Linear(d, d) for _ in range(3))
        self.attn_out, self.ln_1 = nn.Linear(d, d), nn.LayerNorm(d, eps=1e-12)
        self.inter, self.out, self.ln_2 = (
            nn.Linear(d, f),
            nn.Linear(f, d),
            nn.LayerNorm(d, eps=1e-12),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (
            lin(x).view(B, T, self.heads, C // self.heads).transpose(1, 2)
            for lin in (self.query, self.key, self.value)
        )  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, C)
        x = self.ln_1(x + self.attn_out(y))
        return self.ln_2(x + self.out(F.gelu(self.inter(x))))


class BertEncoder(nn.Module):
    """Word + position + segment embeddings, post-norm layers, and BERT's tanh pooler.

    ``forward(idx)`` takes token ids ``(B, T)`` (one segment, no padding) and
    returns the sequence output ``(B, T, C)`` and the pooled ``(B, C)``.
    """

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(cfg.vocab, cfg.d)
        self.position, self.segment = nn.Embedding(cfg.max_positions, cfg.d), nn.Embedding(2, cfg.d)
        self.ln = nn.LayerNorm(cfg.d, eps=1e-12)
        self.layers = nn.ModuleList(_BertLayer(cfg) for _ in range(cfg.layers))
        self.pooler = nn.Linear(cfg.d, cfg.d)

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids ``(B, T)`` -> the sequence ``(B, T, C)`` and the pooled ``(B, C)``."""
        T = idx.shape[1]
        x = self.word(idx) + self.position.weight[:T] + self.segment.weight[0]
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        return x, torch.tanh(self.pooler(x[:, 0]))


def bert_count(cfg: BertConfig, b: int, t: int) -> HandCount:
    """BERT FLOPs: ``L*(24*B*T*C^2 + 4*B*T^2*C + 20*B*T*C) + 9*B*T*C + 2*B*C^2 + B*C``.

    (With ``F = 4C``; in general the MLP is ``4*B*T*C*F``.) Per layer: Q, K,
    V and output projections ``8*B*T*C^2``, attention ``4*B*T^2*C``, MLP
    ``16*B*T*C^2``; two LayerNorms (7 per element), GELU and two residual
    adds (1 each): ``20*B*T*C``. Embeddings: two adds and a LayerNorm,
    ``9*B*T*C``; the pooler: a ``C x C`` matmul and a tanh on the first token.
    """
    n, c, f = b * t, cfg.d, cfg.ffn or 4 * cfg.d
    tally = Tally()
    tally.lookup(n, c)
    tally.pointwise(n * c, n * c, t * c)  # + position embeddings (broadcast over B)
    tally.pointwise(n * c, n * c, c)  # + segment 0's embedding
    tally.layer_norm(n * c, n, c)
    for _ in range(cfg.layers):
        for _ in range(3):
            tally.linear(n, c, c)  # Q, K, V
        tally.attention(b, cfg.heads, t, t, c // cfg.heads)
        tally.linear(n, c, c)
        tally.pointwise(n * c, n * c, n * c)  # residual
        tally.layer_norm(n * c, n, c)
        tally.mlp(n, c, f)
        tally.layer_norm(n * c, n, c)
    tally.linear(b, c, c)  # pooler on the first token
    tally.pointwise(b * c)  # tanh
    return tally.done()


# ----------------------------------------------------------------------------- MLP-Mixer


@dataclass(frozen=True)
class MixerConfig:
    """An MLP-Mixer's shape: ``image`` pixels square, cut into ``patch``-pixel patches."""

    image: int
    patch: int
    layers: int
    d: int
    ffn: int | None = None  # channel-mixing MLP width (default 4*d)
    token_ffn: int | None = None  # token-mixing MLP width (default d/2)
    classes: int = 1000

    @property
    def tokens(self) -> int:
        """Patches per image: ``(image / patch)^2``."""
        return (self.image // self.patch) ** 2


class _MixerBlock(nn.Module):
    """Token mixing across patches, then channel mixing, each an MLP with a residual."""

    def __init__(self, tokens: int, d: int, token_ffn: int, ffn: int) -> None:
        super().__init__()
        self.ln_1, self.tok_1, self.tok_2 = (
            nn.LayerNorm(d),
            nn.Linear(tokens, token_ffn),
            nn.Linear(token_ffn, tokens),
        )
        self.ln_2, self.ch_1, self.ch_2 = nn.LayerNorm(d), nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x).transpose(1, 2)  # (B, C, T): mix along the patches
        x = x + self.tok_2(F.gelu(self.tok_1(y))).transpose(1, 2)
        return x + self.ch_2(F.gelu(self.ch_1(self.ln_2(x))))


class Mixer(nn.Module):
    """An MLP-Mixer (Tolstikhin et al. 2021): no attention, MLPs across patches and channels."""

    def __init__(self, cfg: MixerConfig) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, cfg.d, cfg.patch, stride=cfg.patch)
        ffn, token_ffn = cfg.ffn or 4 * cfg.d, cfg.token_ffn or cfg.d // 2
        self.blocks = nn.Sequential(
            *(_MixerBlock(cfg.tokens, cfg.d, token_ffn, ffn) for _ in range(cfg.layers))
        )
        self.ln, self.head = nn.LayerNorm(cfg.d), nn.Linear(cfg.d, cfg.classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` -> class logits ``(B, classes)``, from the mean patch."""
        x = self.patches(images).flatten(2).transpose(1, 2)  # (B, T, C)
        return self.head(self.ln(self.blocks(x)).mean(dim=1))


def mixer_count(cfg: MixerConfig, b: int) -> HandCount:
    """Mixer FLOPs: patches, ``L*(4*B*C*T*Ft + 4*B*T*C*F + 16*B*T*C + 2*B*C*Ft + B*T*F)``, head.

    Per layer: token MLP ``2 * (B*C) * T * Ft`` twice, channel MLP
    ``2 * (B*T) * C * F`` twice; two LayerNorms (7 per element) and two
    residual adds: ``16*B*T*C``; GELU on ``B*C*Ft`` and ``B*T*F`` elements,
    and one bias add on ``B*C*Ft`` (a Linear fed the transposed tensor runs
    as ``mm`` plus a separate add). Then the patch embedding ``2*B*T*C*3*p^2``
    before, and a LayerNorm, the mean over patches (1 per element) and the
    classifier ``2*B*C*classes`` after.
    """
    c, t = cfg.d, cfg.tokens
    f, ft = cfg.ffn or 4 * cfg.d, cfg.token_ffn or cfg.d // 2
    n = b * t
    tally = Tally()
    tally.conv2d(b, 3, cfg.image, cfg.image, c, cfg.patch, stride=cfg.patch, pad=0, bias=True)
    for _ in range(cfg.layers):
        tally.layer_norm(n * c, n, c)
        # a Linear on the transposed (B, C, T) runs as a matmul and a separate bias add; with
        # B > 1 the input is first copied to a contiguous (B*C, T)
        if b > 1:
            tally.move(n * c, n * c)
        tally.linear(b * c, t, ft, bias=False)
        tally.pointwise(b * c * ft, b * c * ft, weights=ft)
        tally.pointwise(b * c * ft)  # gelu
        tally.linear(b * c, ft, t)
        tally.pointwise(n * c, n * c, n * c)  # residual, transposed back
        tally.layer_norm(n * c, n, c)
        tally.mlp(n, c, f)
    tally.layer_norm(n * c, n, c)
    tally.reduce(n * c, b * c)
    tally.linear(b, c, cfg.classes)
    return tally.done()
