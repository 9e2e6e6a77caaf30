"""The zoo's architectures in plain PyTorch, each with its FLOPs and bytes counted by hand."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from brrrlib.decoding._model import _Block  # the GPT-2 block, here without a mask
from brrrlib.zoo._tally import HandCount, Tally

__all__ = [
    "DecoderConfig",
    "Llama",
    "ResNet",
    "ResNetConfig",
    "ViT",
    "VisionConfig",
    "llama_count",
    "llama_workload",
    "resnet_count",
    "vit_count",
]


# ---------------------------------------------------------------- a ResNet with bottleneck blocks


@dataclass(frozen=True)
class ResNetConfig:
    """Blocks per stage and the first stage's width; ResNet-50 is ``(3, 4, 6, 3)``, 64."""

    blocks: tuple[int, ...] = (3, 4, 6, 3)
    width: int = 64
    image: int = 224
    classes: int = 1000


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout)
    )


class _Bottleneck(nn.Module):
    """1x1 (reduce), 3x3 (the stride, as torchvision's "v1.5"), 1x1 (expand x4), a shortcut."""

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.a, self.b = _conv_bn(cin, width, 1), _conv_bn(width, width, 3, stride)
        self.c = _conv_bn(width, 4 * width, 1)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = (
            _conv_bn(cin, 4 * width, 1, stride) if stride != 1 or cin != 4 * width else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.c(self.relu(self.b(self.relu(self.a(x)))))
        out += x if self.shortcut is None else self.shortcut(x)
        return self.relu(out)


class ResNet(nn.Module):
    """ResNet with bottleneck blocks (He et al. 2016), laid out as torchvision's ``resnet50``."""

    def __init__(self, cfg: ResNetConfig) -> None:
        super().__init__()
        w = cfg.width
        self.stem = nn.Sequential(
            _conv_bn(3, w, 7, stride=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, padding=1)
        )
        blocks, cin = [], w
        for stage, n in enumerate(cfg.blocks):
            width = w * 2**stage
            for i in range(n):
                blocks.append(_Bottleneck(cin, width, 2 if i == 0 and stage > 0 else 1))
                cin = 4 * width
        self.blocks = nn.Sequential(*blocks)
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(cin, cfg.classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` -> class logits ``(B, classes)``."""
        return self.fc(self.pool(self.blocks(self.stem(images))).flatten(1))


def _count_conv_bn(tally: Tally, b, cin, h, w, cout, k, stride=1) -> tuple[int, int]:
    h, w = tally.conv2d(b, cin, h, w, cout, k, stride=stride)
    tally.batch_norm(b * cout * h * w, cout)
    return h, w


def resnet_count(cfg: ResNetConfig, b: int) -> HandCount:
    """ResNet FLOPs: every convolution ``2*B*Cout*Ho*Wo*Cin*k^2``, then the rest per element."""
    tally, w0 = Tally(), cfg.width
    h, w = _count_conv_bn(tally, b, 3, cfg.image, cfg.image, w0, 7, stride=2)
    tally.inplace(b * w0 * h * w)  # relu
    h2, w2 = (h - 1) // 2 + 1, (w - 1) // 2 + 1  # 3x3 max pool, stride 2, padding 1
    tally.move(b * w0 * h * w, b * w0 * h2 * w2, indices=b * w0 * h2 * w2)
    h, w, cin = h2, w2, w0
    for stage, n in enumerate(cfg.blocks):
        width = w0 * 2**stage
        for i in range(n):
            stride = 2 if i == 0 and stage > 0 else 1
            h, w, cin = _count_bottleneck(tally, b, cin, h, w, width, stride)
    tally.reduce(b * cin * h * w, b * cin)  # adaptive average pool to 1 x 1
    tally.linear(b, cin, cfg.classes)
    return tally.done()


def _count_bottleneck(tally: Tally, b, cin, h, w, width, stride) -> tuple[int, int, int]:
    _count_conv_bn(tally, b, cin, h, w, width, 1)
    tally.inplace(b * width * h * w)
    ho, wo = _count_conv_bn(tally, b, width, h, w, width, 3, stride)
    tally.inplace(b * width * ho * wo)
    out = b * 4 * width * ho * wo
    _count_conv_bn(tally, b, width, ho, wo, 4 * width, 1)
    if stride != 1 or cin != 4 * width:
        _count_conv_bn(tally, b, cin, h, w, 4 * width, 1, stride)
    tally.inplace(out, out)  # out += shortcut
    tally.inplace(out)  # relu
    return ho, wo, 4 * width


# --------------------------------------------------------------------------- a Vision Transformer


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

    tokens = property(lambda self: (self.image // self.patch) ** 2)  # patches per image


class ViT(nn.Module):
    """A Vision Transformer (Dosovitskiy et al. 2021): patches, a class token, encoder blocks."""

    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.patches = nn.Conv2d(3, cfg.d, cfg.patch, stride=cfg.patch)
        self.cls = nn.Parameter(torch.randn(1, 1, cfg.d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, cfg.tokens + 1, cfg.d) * 0.02)
        ffn = cfg.ffn or 4 * cfg.d
        self.blocks = nn.Sequential(*(_Block(cfg.d, cfg.heads, ffn) for _ in range(cfg.layers)))
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


# -------------------------------------------------- a Llama-style decoder, for prefill and decode


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

    head_size = property(lambda self: self.d // self.heads)  # hs = C // nh


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
        if cache is not None:  # decode: this token's k and v into the cache's last slot
            cache[0][:, :, -1:], cache[1][:, :, -1:] = k, v
            k, v = cache
        gqa = self.heads != self.kv_heads
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None, enable_gqa=gqa)
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
        h = self.norm_2(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


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
