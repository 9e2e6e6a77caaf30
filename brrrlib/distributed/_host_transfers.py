"""The host rung: copies from host memory to a GPU, pageable, pinned and overlapped (chapter 05)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brrrlib import _fmt

__all__ = ["HostDeviceCopies", "host_device_copies"]


@dataclass(frozen=True, repr=False)
class HostDeviceCopies:
    """Host-to-device copies of ``nbytes`` on the GPU ``device_name``, measured."""

    nbytes: int
    device_name: str
    pageable: Any
    pinned: Any
    pinned_vs_pageable: Any
    overlap: Any

    @property
    def pinned_bytes_per_s(self) -> float:
        """Median bandwidth of the pinned copy."""
        return self.nbytes / self.pinned.median_s

    @property
    def pageable_bytes_per_s(self) -> float:
        """Median bandwidth of the pageable copy."""
        return self.nbytes / self.pageable.median_s

    def __repr__(self) -> str:
        return (
            f"HostDeviceCopies(measured on {self.device_name}, {_fmt.binary_bytes(self.nbytes)}: "
            f"pageable {_fmt.si(self.pageable_bytes_per_s, 'B/s')}, pinned "
            f"{_fmt.si(self.pinned_bytes_per_s, 'B/s')}; pinned vs pageable: "
            f"{self.pinned_vs_pageable.says()}; overlapped vs serial: {self.overlap.says()})"
        )


def host_device_copies(nbytes: int = 64 * 2**20, *, budget_s: float = 0.5) -> HostDeviceCopies:
    """Pinned vs pageable host-to-device copies and copy/compute overlap, on this machine's GPU."""
    import torch

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 2**10 <= nbytes <= 2**32:
        raise ValueError(f"nbytes must be a whole number from 1 KiB to 4 GiB, got {nbytes!r}")
    if not torch.cuda.is_available():
        raise RuntimeError(
            "host_device_copies needs a CUDA GPU to copy to, and this machine has none: predict "
            "the copy from the GPU's host link instead, nbytes / bl.hardware.link(...)"
            ".bandwidth_bytes_per_s"
        )
    return _measure_copies(nbytes, budget_s)


def _measure_copies(nbytes: int, budget_s: float) -> HostDeviceCopies:
    import torch

    from brrrlib import timing

    dev = torch.device("cuda")
    pageable = torch.empty(nbytes, dtype=torch.uint8)  # 1.
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    t_pageable = timing.benchmark(
        lambda: dst.copy_(pageable), budget_s=budget_s, device=dev, label="pageable"
    )  # 2.
    t_pinned = timing.benchmark(
        lambda: dst.copy_(pinned, non_blocking=True), budget_s=budget_s, device=dev, label="pinned"
    )
    ratio = timing.compare(
        lambda: dst.copy_(pinned, non_blocking=True),
        lambda: dst.copy_(pageable),
        budget_s=budget_s,
        device=dev,
        labels=("pinned", "pageable"),
    )  # 3.
    a = _matmul_lasting(t_pinned.median_s, dev)  # 4.
    side = torch.cuda.Stream(dev)

    def serial() -> None:
        dst.copy_(pinned, non_blocking=True)
        a @ a

    def overlapped() -> None:
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            dst.copy_(pinned, non_blocking=True)
        a @ a
        torch.cuda.current_stream(dev).wait_stream(side)

    overlap = timing.compare(
        overlapped, serial, budget_s=budget_s, device=dev, labels=("overlapped", "serial")
    )
    return HostDeviceCopies(
        nbytes, torch.cuda.get_device_name(dev), t_pageable, t_pinned, ratio, overlap
    )


def _matmul_lasting(seconds: float, dev: Any) -> Any:
    """A square fp32 matrix whose ``a @ a`` takes at least ``seconds`` (or the largest tried)."""
    import torch

    from brrrlib import timing

    for n in (512, 1024, 2048, 4096, 8192):
        a = torch.randn(n, n, device=dev)
        if timing.benchmark(torch.mm, a, a, budget_s=0.05).median_s >= seconds:
            break
    return a
