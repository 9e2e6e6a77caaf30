"""The zoo's convolutional nets: a ResNet with bottleneck blocks, and a U-Net.

Shapes in the comments: B batch, C channels, H x W pixels. Convolutions
without bias are followed by a batch norm, as in both papers; in eval mode the
norm uses its running statistics (7 FLOPs per element by the counting
convention).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from brrrlib.zoo._tally import HandCount, Tally

__all__ = ["ResNet", "ResNetConfig", "UNet", "UNetConfig", "resnet_count", "unet_count"]


# ----------------------------------------------------------------------------- ResNet


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
    """ResNet FLOPs: every convolution ``2*B*Cout*Ho*Wo*Cin*k^2``, then the rest per element.

    Besides the convolutions and the classifier (``2*B*C*classes``, which
    together are torchvision's published MACs x 2), each batch norm costs 7
    per element of its output, each ReLU and each residual add 1, and the
    global average pool 1 per element of its input. For ResNet-50 at 224 x 224
    those extras are ~1% of the total.
    """
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


# ----------------------------------------------------------------------------- U-Net


@dataclass(frozen=True)
class UNetConfig:
    """``levels`` halvings of the image; the first level has ``width`` channels, doubling down."""

    image: int
    width: int
    levels: int = 3
    classes: int = 2


def _double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        _conv_bn(cin, cout, 3),
        nn.ReLU(inplace=True),
        _conv_bn(cout, cout, 3),
        nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    """A U-Net (Ronneberger et al. 2015): a contracting path, an expanding one, skip connections.

    Each level is two 3x3 convolutions (with batch norm, as modern U-Nets
    have); 2x2 max pools go down, 2x2 transposed convolutions go up, and each
    up step concatenates the encoder's feature map of the same size.
    """

    def __init__(self, cfg: UNetConfig) -> None:
        super().__init__()
        widths = [cfg.width * 2**i for i in range(cfg.levels + 1)]
        self.down = nn.ModuleList(
            _double_conv(cin, cout)
            for cin, cout in zip([3, *widths[:-2]], widths[:-1], strict=True)
        )
        self.pool, self.bottom = nn.MaxPool2d(2), _double_conv(widths[-2], widths[-1])
        self.up = nn.ModuleList(nn.ConvTranspose2d(c, c // 2, 2, stride=2) for c in widths[:0:-1])
        self.dec = nn.ModuleList(_double_conv(c, c // 2) for c in widths[:0:-1])
        self.out = nn.Conv2d(cfg.width, cfg.classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` -> per-pixel logits ``(B, classes, H, W)``."""
        skips, x = [], images
        for down in self.down:
            skips.append(down(x))
            x = self.pool(skips[-1])
        x = self.bottom(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips), strict=True):
            x = dec(torch.cat((skip, up(x)), dim=1))  # (B, 2C, H, W)
        return self.out(x)  # (B, classes, H, W): a label per pixel


def _count_double_conv(tally: Tally, b, cin, h, w, cout) -> None:
    for c_in in (cin, cout):
        _count_conv_bn(tally, b, c_in, h, w, cout, 3)
        tally.inplace(b * cout * h * w)


def unet_count(cfg: UNetConfig, b: int) -> HandCount:
    """U-Net FLOPs: the 3x3 convolutions ``2*B*Cout*H*W*Cin*9`` at every level, and the rest.

    Down (level i at ``H/2^i``, width ``w*2^i``): two conv + batch norm (7
    per element) + ReLU (1), then a 2x2 max pool (no FLOPs); the bottom
    level likewise. Up: a 2x2 transposed convolution ``2*B*Cin*H*W*Cout*4``
    (halving the channels, doubling the size), a concatenation (no FLOPs), two
    conv + norm + ReLU. Last, a 1x1 convolution to ``classes`` per pixel.
    """
    tally, cin, side = Tally(), 3, cfg.image
    widths = [cfg.width * 2**i for i in range(cfg.levels + 1)]
    for width in widths[:-1]:
        _count_double_conv(tally, b, cin, side, side, width)
        out = b * width * (side // 2) ** 2
        tally.move(b * width * side * side, out, indices=out)  # 2x2 max pool
        cin, side = width, side // 2
    _count_double_conv(tally, b, cin, side, side, widths[-1])
    for c in widths[:0:-1]:
        side, _ = tally.conv_transpose2d(b, c, side, side, c // 2, 2, stride=2)
        both = b * c * side * side  # the skip and the upsampled map, C/2 channels each
        tally.move(both, both)
        _count_double_conv(tally, b, c, side, side, c // 2)
    tally.conv2d(b, cfg.width, side, side, cfg.classes, 1, bias=True)
    return tally.done()
