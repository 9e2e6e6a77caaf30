"""The zoo's rows: each workload's two sizes, as data (see :mod:`brrrlib.zoo`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from brrrlib.zoo import _convnets as cnn
from brrrlib.zoo import _decoders as dec
from brrrlib.zoo import _encoders as enc

__all__ = ["Row", "rows"]


_PREFILL_REASON = "every weight matrix meets all 256 tokens at once: ~{intensity} FLOP/B"
_DECODE_REASON = "reads every weight and the KV cache for 2 FLOPs per weight: ~{intensity} FLOP/B"


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
    cpu_reason: str = ""

    @classmethod
    def decoder(
        cls,
        name: str,
        family: str,
        configs: dict,
        workload: Callable,
        count: Callable,
        phase: str,
        size: str,
    ) -> Row:
        """A decoder's row: ``configs`` holds its ``"tiny"``, ``"prefill"`` and ``"decode"`` configs;
        ``workload(cfg, batch, tokens, cached)`` builds it, ``count`` (the same arguments) counts
        it.
        """
        cfg = configs["tiny" if size == "tiny" else phase]
        tokens, cached = (8, 0) if phase == "prefill" else (1, 7 if size == "tiny" else cfg.ctx - 1)
        if phase == "prefill" and size == "big":
            tokens = 256
        kv_heads = getattr(cfg, "kv_heads", cfg.heads)
        shape = f"{cfg.layers} layers x {cfg.d}, {cfg.heads}/{kv_heads} q/kv heads"
        doing = f"a prompt of {tokens} tokens" if not cached else f"1 token after {cached} cached"
        if size == "tiny":
            expected, reason = "overhead", ""
        else:
            expected = "compute" if phase == "prefill" else "memory"
            reason = _PREFILL_REASON if phase == "prefill" else _DECODE_REASON
        return cls(
            name=f"{name}_{phase}",
            size=size,
            summary=f"{family}, {shape}; {doing}",
            build=partial(workload, cfg, 1, tokens, cached),
            count=partial(count, cfg, 1, tokens, cached),
            formula_of=count,
            expected_cpu=expected,
            cpu_reason=reason,
        )


def _images(batch: int, side: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, side, side),)


def _with(model: Callable, config: object, inputs: Callable[[], tuple]) -> Callable[[], tuple]:
    """A build function: ``model(config)`` and its inputs, made when called."""
    return lambda: (model(config), inputs())


# ----------------------------------------------------------------------------- decoder

_LLAMA = {
    "tiny": dec.DecoderConfig(layers=2, d=64, heads=4, kv_heads=2, ffn=176, vocab=1024, ctx=64),
    "prefill": dec.DecoderConfig(layers=4, d=512, heads=8, kv_heads=2, ffn=1376, vocab=32000),
    "decode": dec.DecoderConfig(layers=8, d=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000),
}
# ----------------------------------------------------------------------------- encoder


def _vits() -> list[Row]:
    vit_tiny = enc.VisionConfig(image=32, patch=8, layers=2, d=64, heads=2, classes=10)
    vit_big = enc.VisionConfig(image=224, patch=16, layers=12, d=192, heads=3)  # ViT-Ti/16
    return [
        Row(
            "vit",
            "tiny",
            "ViT, 2 layers x 64; one 32 x 32 image in 8-pixel patches",
            _with(enc.ViT, vit_tiny, lambda: _images(1, 32)),
            partial(enc.vit_count, vit_tiny, 1),
            enc.vit_count,
            "overhead",
        ),
        Row(
            "vit",
            "big",
            "ViT-Ti/16, 12 layers x 192; one 224 x 224 image (197 tokens)",
            _with(enc.ViT, vit_big, lambda: _images(1, 224)),
            partial(enc.vit_count, vit_big, 1),
            enc.vit_count,
            "compute",
            "197 tokens through 12 layers of matmuls: ~{intensity} FLOP/B",
        ),
    ]


# ----------------------------------------------------------------------------- conv net


def _resnets() -> list[Row]:
    # The tiny one takes 2 images: on a CPU the convolution library switches kernels
    # between a batch of 1 and 2 (twice the time for twice the images), not beyond.
    r50 = cnn.ResNetConfig()
    r_tiny = cnn.ResNetConfig(blocks=(1, 1, 1, 1), width=8, image=32, classes=10)
    return [
        Row(
            "resnet",
            "tiny",
            "ResNet, 4 bottleneck blocks 8-256 wide; 2 images of 32 x 32",
            _with(cnn.ResNet, r_tiny, lambda: _images(2, 32)),
            partial(cnn.resnet_count, r_tiny, 2),
            cnn.resnet_count,
            "overhead",
        ),
        Row(
            "resnet",
            "big",
            "ResNet-50 (torchvision's layout); one 224 x 224 image",
            _with(cnn.ResNet, r50, lambda: _images(1, 224)),
            partial(cnn.resnet_count, r50, 1),
            cnn.resnet_count,
            "compute",
            "8.2 GFLOPs of convolutions, each filter reused at every pixel: ~{intensity} FLOP/B",
        ),
    ]


def rows() -> list[Row]:
    """Every row, workload by workload, tiny first."""
    llamas = [
        Row.decoder(
            "llama",
            "Llama-style (GQA) decoder",
            _LLAMA,
            dec.llama_workload,
            dec.llama_count,
            phase,
            size,
        )
        for phase in ("prefill", "decode")
        for size in ("tiny", "big")
    ]
    return [*_resnets(), *_vits(), *llamas]
