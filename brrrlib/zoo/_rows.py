"""The zoo's rows: each workload's two sizes, as data (see :mod:`brrrlib.zoo`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from brrrlib.zoo import _models as m

__all__ = ["Row", "rows"]


@dataclass(frozen=True)
class Row:
    """One workload at one size."""

    name: str
    size: str
    summary: str
    build: Callable[[], tuple]
    count: Callable[[], object]
    formula_of: Callable
    expected_cpu: str
    cpu_reason: str = (
        ""  # a template: ZooEntry fills in {intensity}; "": ops, bytes per op, intensity
    )

    @classmethod
    def decoder(cls, name, family, configs, workload, count, phase, size) -> Row:
        """A decoder's row: ``configs[size or phase]``, built by ``workload``, counted by ``count``."""
        cfg, tiny = configs["tiny" if size == "tiny" else phase], size == "tiny"
        if phase == "prefill":
            tokens, cached = 8 if tiny else 256, 0
        else:
            tokens, cached = 1, 7 if tiny else cfg.ctx - 1
        shape = f"{cfg.layers} layers x {cfg.d}, {cfg.heads}/{getattr(cfg, 'kv_heads', cfg.heads)}"
        return cls(
            f"{name}_{phase}",
            size,
            f"{family}, {shape} q/kv heads; {tokens} new + {cached} cached tokens",
            partial(workload, cfg, 1, tokens, cached),
            partial(count, cfg, 1, tokens, cached),
            count,
            "overhead" if tiny else "compute" if phase == "prefill" else "memory",
        )


def _vision(name, model, count, sizes) -> list[Row]:
    """A vision model's rows from ``(size, config, images, summary)``: tiny overhead-bound."""
    return [
        Row(
            name,
            size,
            summary,
            lambda cfg=cfg, b=b: (model(cfg), (torch.randn(b, 3, cfg.image, cfg.image),)),
            partial(count, cfg, b),
            count,
            "overhead" if size == "tiny" else "compute",
        )
        for size, cfg, b, summary in sizes
    ]


_LLAMA = {
    "tiny": m.DecoderConfig(layers=2, d=64, heads=4, kv_heads=2, ffn=176, vocab=1024, ctx=64),
    "prefill": m.DecoderConfig(layers=4, d=512, heads=8, kv_heads=2, ffn=1376, vocab=32000),
    "decode": m.DecoderConfig(layers=8, d=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000),
}
_TINY_RESNET = m.ResNetConfig(blocks=(1, 1, 1, 1), width=8, image=32, classes=10)
_TINY_VIT = m.VisionConfig(image=32, patch=8, layers=2, d=64, heads=2, classes=10)
_RESNETS = (  # the tiny one takes 2 images: a CPU's convolution library switches kernels
    # between a batch of 1 and 2 (twice the time for twice the images), not beyond
    ("tiny", _TINY_RESNET, 2, "ResNet, 4 bottleneck blocks 8-256 wide; 2 images of 32 x 32"),
    ("big", m.ResNetConfig(), 1, "ResNet-50 (torchvision's layout); one 224 x 224 image"),
)
_VITS = (
    ("tiny", _TINY_VIT, 1, "ViT, 2 layers x 64; one 32 x 32 image in 8-pixel patches"),
    (
        "big",
        m.VisionConfig(image=224, patch=16, layers=12, d=192, heads=3),  # ViT-Ti/16
        1,
        "ViT-Ti/16, 12 layers x 192; one 224 x 224 image (197 tokens)",
    ),
)


def rows() -> list[Row]:
    """Every row, workload by workload, tiny first."""
    llamas = [
        Row.decoder(
            "llama", "Llama-style (GQA) decoder", _LLAMA, m.llama_workload, m.llama_count, p, s
        )
        for p in ("prefill", "decode")
        for s in ("tiny", "big")
    ]
    return [
        *_vision("resnet", m.ResNet, m.resnet_count, _RESNETS),
        *_vision("vit", m.ViT, m.vit_count, _VITS),
        *llamas,
    ]
