"""The rows of the zoo's other workloads: each one's two sizes, as data.

As brrrlib.zoo's own rows: a name and a size, how to build the model and its
inputs, how to count it by hand, and what regime to expect on a laptop CPU.
"tiny" rows move a few kilobytes per op; "big" rows take 5-200 ms per call on
a quiet 2-core CPU (timed on a 2-core AMD EPYC VM).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from brrrlib.zoo import Row

from . import encoders as enc
from . import gpt, unet
from . import others as oth

__all__ = ["rows"]


def _ids(vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape)


def _images(batch: int, side: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, side, side),)


def _with(model: Callable, config: object, inputs: Callable[[], tuple]) -> Callable[[], tuple]:
    """A build function: ``model(config)`` and its inputs, made when called."""
    return lambda: (model(config), inputs())


# ----------------------------------------------------------------------------- GPT

_GPT = {
    "tiny": gpt.GPTConfig(layers=2, d=64, heads=4, vocab=1024, ctx=64),
    "prefill": gpt.GPTConfig(layers=4, d=512, heads=8, vocab=50257),  # GPT-2's vocabulary
    "decode": gpt.GPTConfig(layers=8, d=1024, heads=16, vocab=50257),
}
# ----------------------------------------------------------------------------- encoders


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


def _mixers() -> list[Row]:
    mix_tiny = enc.MixerConfig(image=32, patch=8, layers=2, d=64, token_ffn=32, classes=10)
    mix_big = enc.MixerConfig(224, 16, layers=8, d=512, token_ffn=256, ffn=2048)  # Mixer-S/16
    return [
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


# ----------------------------------------------------------------------------- U-Net


def _unets() -> list[Row]:
    # The tiny one takes 2 images: on a CPU the convolution library switches kernels
    # between a batch of 1 and 2 (twice the time for twice the images), not beyond.
    u_tiny, u_big = unet.UNetConfig(image=16, width=4, levels=2), unet.UNetConfig(128, 32, 3)
    return [
        Row(
            "unet",
            "tiny",
            "U-Net, 2 levels 4-16 wide; 2 images of 16 x 16",
            _with(unet.UNet, u_tiny, lambda: _images(2, 16)),
            partial(unet.unet_count, u_tiny, 2),
            unet.unet_count,
            "overhead",
        ),
        Row(
            "unet",
            "big",
            "U-Net, 3 levels 32-256 wide; one 128 x 128 image",
            _with(unet.UNet, u_big, lambda: _images(1, 128)),
            partial(unet.unet_count, u_big, 1),
            unet.unet_count,
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
    gpts = [
        Row.decoder(
            "gpt", "GPT-2-style decoder", _GPT, gpt.gpt_workload, gpt.gpt_count, phase, size
        )
        for phase in ("prefill", "decode")
        for size in ("tiny", "big")
    ]
    mlps_and_lstms = _mlps_and_lstms()
    return [
        *mlps_and_lstms[:2],
        *gpts,
        *_berts(),
        *_mixers(),
        *_moe(),
        *_unets(),
        *mlps_and_lstms[2:],
        *_sparse(),
    ]
