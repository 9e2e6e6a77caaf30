"""Weight-only int8: one byte per weight, for a decode step that reads every weight (chapter 06)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from brrrlib.decoding._model import Decoder

__all__ = ["Int8Linear", "int8_kernel", "quantize_int8"]


class Int8Linear(nn.Module):
    """``y = (x @ q.T) * scales + bias`` with int8 weights ``q`` ``(N, K)`` and one scale per row."""

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.register_buffer("q", q)
        self.register_buffer("scales", scales)
        self.register_buffer("bias", bias)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Int8Linear:
        """Quantize ``weight`` ``(N, K)``, row by row: ``scale = max|w| / 127``, ``q = round(w / scale)``."""
        w = weight.detach().float()
        scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127  # (N,)
        q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
        dtype = weight.dtype
        return cls(q, scales.to(dtype), None if bias is None else bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead, k = x.shape[:-1], x.shape[-1]
        y = torch._weight_int8pack_mm(x.reshape(-1, k), self.q, self.scales)  # (rows, N)
        y = y.view(*lead, -1)
        return y if self.bias is None else y + self.bias


def quantize_int8(model: Decoder) -> Decoder:
    """A copy of ``model`` (bf16 or fp16) whose matmuls read int8 weights."""
    dtype = model.wte.weight.dtype
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(
            f"quantize a 16-bit model (activations stay 16-bit); this one is {dtype}: "
            "build it with dtype=torch.bfloat16 (or float16), or call model.to(torch.bfloat16)"
        )
    out = copy.deepcopy(model)
    for block in out.blocks:
        for name in ("qkv", "proj", "fc", "fc_out"):
            linear = getattr(block, name)
            setattr(block, name, Int8Linear.from_weight(linear.weight, linear.bias))
    out.head = Int8Linear.from_weight(out.wte.weight)
    return out


def int8_kernel(device: str | torch.device = "cpu", dtype: torch.dtype = torch.bfloat16) -> bool:
    """True when ``torch._weight_int8pack_mm`` runs here with ``dtype`` activations."""
    dev = torch.device(device)
    x = torch.ones(4, 32, dtype=dtype, device=dev)
    q = torch.ones(8, 32, dtype=torch.int8, device=dev)
    scales = torch.full((8,), 0.5, dtype=dtype, device=dev)
    try:
        y = torch._weight_int8pack_mm(x, q, scales).float().cpu()
    except (NotImplementedError, RuntimeError):  # no kernel here (or no data: the meta device)
        return False
    return bool(torch.allclose(y, torch.full((4, 8), 16.0)))
