"""The zoo's rows: each workload's two sizes, as data (see :mod:`brrrlib.zoo`).

A row names a workload and a size, says how to build the model and its
inputs, how to count it by hand, and what regime to expect on a laptop CPU.
"tiny" rows move a few kilobytes per op; "big" rows take 5-200 ms per call on
a quiet 2-core CPU (timed on a 2-core AMD EPYC VM).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from brrrlib.zoo import _convnets as cnn
from brrrlib.zoo import _decoders as dec
from brrrlib.zoo import _encoders as enc
from brrrlib.zoo import _others as oth

__all__ = ["Row", "rows"]


@dataclass(frozen=True)
class Row:
    """One workload at one size.

    ``build()`` returns ``(model, args)``; ``count()`` the hand count;
    ``formula_of`` is the function whose docstring's first line is the FLOP
    formula. ``cpu_reason`` may say ``{intensity}``, filled in from the hand
    count; left empty, a tiny workload gets the generic reason.
    """

    name: str
    size: str
    summary: str
    build: Callable[[], tuple]
    count: Callable[[], object]
    formula_of: Callable
    expected_cpu: str
    cpu_reason: str = ""


def _ids(vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape)


def _images(batch: int, side: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, side, side),)


def _with(model: Callable, config: object, inputs: Callable[[], tuple]) -> Callable[[], tuple]:
    """A build function: ``model(config)`` and its inputs, made when called."""
    return lambda: (model(config), inputs())


# ----------------------------------------------------------------------------- decoders

_GPT = {
    "tiny": dec.DecoderConfig(layers=2, d=64, heads=4, vocab=1024, ctx=64),
    "prefill": dec.DecoderConfig(layers=4, d=512, heads=8, vocab=50257),  # GPT-2's vocabulary
    "decode": dec.DecoderConfig(layers=8, d=1024, heads=16, vocab=50257),
}
_LLAMA = {
    "tiny": dec.DecoderConfig(layers=2, d=64, heads=4, kv_heads=2, ffn=176, vocab=1024, ctx=64),
    "prefill": dec.DecoderConfig(layers=4, d=512, heads=8, kv_heads=2, ffn=1376, vocab=32000),
    "decode": dec.DecoderConfig(layers=8, d=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000),
}
_PREFILL_REASON = "every weight matrix meets all 256 tokens at once: ~{intensity} FLOP/B"
_DECODE_REASON = "reads every weight and the KV cache for 2 FLOPs per weight: ~{intensity} FLOP/B"


def _decoder_row(kind: str, phase: str, size: str) -> Row:
    configs, what = (_GPT, "GPT-2-style") if kind == "gpt" else (_LLAMA, "Llama-style (GQA)")
    cfg = configs["tiny" if size == "tiny" else phase]
    tokens, cached = (8, 0) if phase == "prefill" else (1, 7 if size == "tiny" else cfg.ctx - 1)
    count = dec.gpt_count if kind == "gpt" else dec.llama_count
    shape = f"{cfg.layers} layers x {cfg.d}, {cfg.heads}/{cfg.kv_heads or cfg.heads} q/kv heads"
    if phase == "prefill" and size == "big":
        tokens = 256
    doing = f"a prompt of {tokens} tokens" if not cached else f"1 token after {cached} cached"
    if size == "tiny":
        expected, reason = "overhead", ""
    else:
        expected = "compute" if phase == "prefill" else "memory"
        reason = _PREFILL_REASON if phase == "prefill" else _DECODE_REASON
    return Row(
        name=f"{kind}_{phase}",
        size=size,
        summary=f"{what} decoder, {shape}; {doing}",
        build=partial(dec.decoder_workload, kind, cfg, 1, tokens, cached),
        count=partial(count, cfg, 1, tokens, cached),
        formula_of=count,
        expected_cpu=expected,
        cpu_reason=reason,
    )


def _decoders() -> list[Row]:
    return [
        _decoder_row(kind, phase, size)
        for kind in ("gpt", "llama")
        for phase in ("prefill", "decode")
        for size in ("tiny", "big")
    ]


# ----------------------------------------------------------------------------- encoders


def _encoders() -> list[Row]:
    return _berts() + _vision_encoders()


def _berts() -> list[Row]:
    # The small real encoder of the course's bug report: 2 layers, hidden 64, 30k words.
    bert_tiny, bert_big = enc.BertConfig(2, 64, 2), enc.BertConfig(4, 256, 4)
    return [
        Row(
            "bert",
            "tiny",
            "BERT-style encoder, 2 layers x 64, 30,522 words; 1 x 8 tokens",
            _with(enc.BertEncoder, bert_tiny, lambda: (_ids(30522, 1, 8),)),
            partial(enc.bert_count, bert_tiny, 1, 8),
            enc.bert_count,
            "overhead",
        ),
        Row(
            "bert",
            "big",
            "BERT-style encoder, 4 layers x 256; 8 x 128 tokens",
            _with(enc.BertEncoder, bert_big, lambda: (_ids(30522, 8, 128),)),
            partial(enc.bert_count, bert_big, 8, 128),
            enc.bert_count,
            "compute",
            "1,024 tokens through 256-wide and wider matmuls: ~{intensity} FLOP/B",
        ),
    ]


def _vision_encoders() -> list[Row]:
    vit_tiny = enc.VisionConfig(image=32, patch=8, layers=2, d=64, heads=2, classes=10)
    vit_big = enc.VisionConfig(image=224, patch=16, layers=12, d=192, heads=3)  # ViT-Ti/16
    mix_tiny = enc.VisionConfig(image=32, patch=8, layers=2, d=64, token_ffn=32, classes=10)
    mix_big = enc.VisionConfig(224, 16, layers=8, d=512, token_ffn=256, ffn=2048)  # Mixer-S/16
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
        Row(
            "mixer",
            "tiny",
            "MLP-Mixer, 2 layers x 64; one 32 x 32 image",
            _with(enc.Mixer, mix_tiny, lambda: _images(1, 32)),
            partial(enc.mixer_count, mix_tiny, 1),
            enc.mixer_count,
            "overhead",
        ),
        Row(
            "mixer",
            "big",
            "MLP-Mixer-S/16, 8 layers x 512; one 224 x 224 image",
            _with(enc.Mixer, mix_big, lambda: _images(1, 224)),
            partial(enc.mixer_count, mix_big, 1),
            enc.mixer_count,
            "compute",
            "token and channel MLPs are all matmul: ~{intensity} FLOP/B",
        ),
    ]


# ----------------------------------------------------------------------------- conv nets


def _convnets() -> list[Row]:
    # The tiny ones take 2 images: on a CPU the convolution library switches kernels
    # between a batch of 1 and 2 (twice the time for twice the images), not beyond.
    r50 = cnn.ResNetConfig()
    r_tiny = cnn.ResNetConfig(blocks=(1, 1, 1, 1), width=8, image=32, classes=10)
    u_tiny, u_big = cnn.UNetConfig(image=16, width=4, levels=2), cnn.UNetConfig(128, 32, 3)
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
        Row(
            "unet",
            "tiny",
            "U-Net, 2 levels 4-16 wide; 2 images of 16 x 16",
            _with(cnn.UNet, u_tiny, lambda: _images(2, 16)),
            partial(cnn.unet_count, u_tiny, 2),
            cnn.unet_count,
            "overhead",
        ),
        Row(
            "unet",
            "big",
            "U-Net, 3 levels 32-256 wide; one 128 x 128 image",
            _with(cnn.UNet, u_big, lambda: _images(1, 128)),
            partial(cnn.unet_count, u_big, 1),
            cnn.unet_count,
            "compute",
            "3x3 convolutions on 32-256 channels: ~{intensity} FLOP/B",
        ),
    ]


# ----------------------------------------------------------------------------- the rest


def _mlps_and_lstms() -> list[Row]:
    mlp_tiny, mlp_big = (32, 64, 64, 10), (1024, 2048, 2048, 1024)
    lstm_tiny, lstm_big = (1000, 32, 32, 1, 10), (10000, 256, 256, 2, 10)
    return [
        Row(
            "mlp",
            "tiny",
            "MLP 32-64-64-10, batch 1",
            _with(oth.MLP, mlp_tiny, lambda: (torch.randn(1, 32),)),
            partial(oth.mlp_count, mlp_tiny, 1),
            oth.mlp_count,
            "overhead",
        ),
        Row(
            "mlp",
            "big",
            "MLP 1024-2048-2048-1024, batch 256",
            _with(oth.MLP, mlp_big, lambda: (torch.randn(256, 1024),)),
            partial(oth.mlp_count, mlp_big, 256),
            oth.mlp_count,
            "compute",
            "256 rows through 2048-wide layers: ~{intensity} FLOP/B",
        ),
        Row(
            "lstm",
            "tiny",
            "LSTM, 1 layer x 32; 1 sequence of 8 tokens",
            lambda: (oth.LSTMClassifier(*lstm_tiny), (_ids(1000, 1, 8),)),
            partial(oth.lstm_count, *lstm_tiny, 1, 8),
            oth.lstm_count,
            "overhead",
        ),
        Row(
            "lstm",
            "big",
            "LSTM, 2 layers x 256; 32 sequences of 64 tokens",
            lambda: (oth.LSTMClassifier(*lstm_big), (_ids(10000, 32, 64),)),
            partial(oth.lstm_count, *lstm_big, 32, 64),
            oth.lstm_count,
            "compute",
            "32 sequences share each step's 256 x 1024 gate matmuls; weights stay in cache",
        ),
    ]


def _sparse() -> list[Row]:
    gcn_tiny, gcn_big = (16, 16, 4), (64, 64, 16)
    return [
        Row(
            "dlrm",
            "tiny",
            "DLRM-style recommender, 4 tables x 1,000 x 16; batch 1, bags of 2",
            lambda: (oth.DLRM(13, 4, 1000, 16, 32), (torch.randn(1, 13), _ids(1000, 1, 4, 2))),
            partial(oth.dlrm_count, 13, 4, 16, 32, 1, 2),
            oth.dlrm_count,
            "overhead",
        ),
        Row(
            "dlrm",
            "big",
            "DLRM-style recommender, 8 tables x 100k x 64; batch 2048, bags of 32",
            lambda: (
                oth.DLRM(13, 8, 100_000, 64, 64),
                (torch.randn(2048, 13), _ids(100_000, 2048, 8, 32)),
            ),
            partial(oth.dlrm_count, 13, 8, 64, 64, 2048, 32),
            oth.dlrm_count,
            "memory",
            "134 MB of scattered embedding rows for 0.09 GFLOP of MLPs: ~{intensity} FLOP/B",
        ),
        Row(
            "gcn",
            "tiny",
            "GCN, 2 layers 16-16-4; 32 nodes, 5 edges each",
            lambda: (oth.GCN(gcn_tiny, oth.gcn_graph(32, 4)), (torch.randn(32, 16),)),
            partial(oth.gcn_count, gcn_tiny, 32, 32 * 5),
            oth.gcn_count,
            "overhead",
        ),
        Row(
            "gcn",
            "big",
            "GCN, 2 layers 64-64-16; 20,000 nodes, 17 edges each",
            lambda: (oth.GCN(gcn_big, oth.gcn_graph(20_000, 16)), (torch.randn(20_000, 64),)),
            partial(oth.gcn_count, gcn_big, 20_000, 20_000 * 17),
            oth.gcn_count,
            "memory",
            "gathers, scales and scatter-adds 340k messages a layer: ~{intensity} FLOP/B",
        ),
    ]


def _moe() -> list[Row]:
    return [
        Row(
            "moe",
            "tiny",
            "Mixture of experts, 4 experts x 64 wide, top-2; 1 x 8 tokens of 32",
            lambda: (oth.MoE(32, 4, 64), (torch.randn(1, 8, 32),)),
            partial(oth.moe_count, 32, 4, 64, 2, 1, 8),
            oth.moe_count,
            "overhead",
        ),
        Row(
            "moe",
            "big",
            "Mixture of experts, 8 experts x 1024 wide, top-2; 4 x 256 tokens of 512",
            lambda: (oth.MoE(512, 8, 1024), (torch.randn(4, 256, 512),)),
            partial(oth.moe_count, 512, 8, 1024, 2, 4, 256),
            oth.moe_count,
            "compute",
            "each expert multiplies ~256 tokens by its 512 x 1024 weights: ~{intensity} FLOP/B",
        ),
    ]


def rows() -> list[Row]:
    """Every row, workload by workload, tiny first."""
    return [
        *_mlps_and_lstms()[:2],
        *_decoders(),
        *_encoders(),
        *_moe(),
        *_convnets(),
        *_mlps_and_lstms()[2:],
        *_sparse(),
    ]
