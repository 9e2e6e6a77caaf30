"""A U-Net: a contracting path, an expanding one, skip connections.

Shapes in the comments: B batch, C channels, H x W pixels. Convolutions
without bias are followed by a batch norm, as modern U-Nets have; in eval mode
the norm uses its running statistics (7 FLOPs per element by the counting
convention).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from brrrlib.zoo import HandCount, Tally

__all__ = ["UNet", "UNetConfig", "unet_count"]


def _conv_bn(cin: int, cout: int, k: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout))


def _count_conv_bn(tally: Tally, b, cin, h, w, cout, k) -> None:
    h, w = tally.conv2d(b, cin, h, w, cout, k)
    tally.batch_norm(b * cout * h * w, cout)


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
