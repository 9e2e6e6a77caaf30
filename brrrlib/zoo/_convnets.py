"""The zoo's convolutional net: a ResNet with bottleneck blocks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from brrrlib.zoo._tally import HandCount, Tally

__all__ = ["ResNet", "ResNetConfig", "resnet_count"]


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
