"""The host rung: copies from host memory to a GPU, pageable, pinned and overlapped (chapter 05)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brrrlib import _fmt
from brrrlib.distributed._comm_model import TableRepr

__all__ = ["HostDeviceCopies", "host_device_copies"]


@dataclass(frozen=True, repr=False)
class HostDeviceCopies(TableRepr):
    """Host-to-device copies of ``nbytes`` on the GPU ``device_name``: two timings, two comparisons."""

    nbytes: int
    device_name: str
    pageable: Any  # bl.Timing
    pinned: Any
    pinned_vs_pageable: Any  # bl.Comparison
    overlap: Any  # overlapped copy + matmul against serial

    @property
    def pinned_bytes_per_s(self) -> float:
        """Median bandwidth of the pinned copy."""
        return self.nbytes / self.pinned.median_s

    @property
    def pageable_bytes_per_s(self) -> float:
        """Median bandwidth of the pageable copy."""
        return self.nbytes / self.pageable.median_s

    def _header(self) -> tuple[str, ...]:
        return ("copy", "time", "bandwidth", "against", "ratio")

    def _rows(self) -> list[tuple[str, ...]]:
        pageable, pinned = self.pageable.median_s, self.pinned.median_s
        return [
            ("pageable", _fmt.seconds(pageable), _fmt.si(self.pageable_bytes_per_s, "B/s"), "", ""),
            ("pinned", _fmt.seconds(pinned), _fmt.si(self.pinned_bytes_per_s, "B/s"))
            + ("pageable", self.pinned_vs_pageable.says()),
            ("overlapped with a matmul", "", "", "serial", self.overlap.says()),
        ]

    def _caption(self) -> str:
        return f"{_fmt.binary_bytes(self.nbytes)} host to {self.device_name}"


def host_device_copies(nbytes: int = 64 * 2**20, *, budget_s: float = 0.5) -> HostDeviceCopies:
    """Pinned vs pageable host-to-device copies and copy/compute overlap, on this machine's GPU."""
    import torch

    from brrrlib import timing

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 2**10 <= nbytes <= 2**32:
        raise ValueError(f"nbytes must be a whole number from 1 KiB to 4 GiB, got {nbytes!r}")
    if not torch.cuda.is_available():
        raise RuntimeError(
            "no CUDA GPU here to copy to: predict the copy from the GPU's host link, "
            "nbytes / bl.hardware.link(...).bandwidth_bytes_per_s"
        )
    dev = torch.device("cuda")
    pageable = torch.empty(nbytes, dtype=torch.uint8)  # 1. the buffers
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)

    def bench(fn: Any, label: str) -> Any:
        return timing.benchmark(fn, budget_s=budget_s, device=dev, label=label)

    def compare(a: Any, b: Any, labels: tuple[str, str]) -> Any:
        return timing.compare(a, b, budget_s=budget_s, device=dev, labels=labels)

    def copy_pinned() -> None:
        dst.copy_(pinned, non_blocking=True)

    def copy_pageable() -> None:
        dst.copy_(pageable)

    t_pageable, t_pinned = bench(copy_pageable, "pageable"), bench(copy_pinned, "pinned")  # 2.
    ratio = compare(copy_pinned, copy_pageable, ("pinned", "pageable"))  # 3.
    a = _matmul_lasting(t_pinned.median_s, dev)  # 4. a matmul as long as the copy, beside it
    side = torch.cuda.Stream(dev)

    def serial() -> None:
        copy_pinned()
        a @ a

    def overlapped() -> None:
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            copy_pinned()
        a @ a
        torch.cuda.current_stream(dev).wait_stream(side)

    overlap = compare(overlapped, serial, ("overlapped", "serial"))
    name = torch.cuda.get_device_name(dev)
    return HostDeviceCopies(nbytes, name, t_pageable, t_pinned, ratio, overlap)


def _matmul_lasting(seconds: float, dev: Any) -> Any:
    """A square fp32 matrix whose ``a @ a`` takes at least ``seconds`` (or the largest tried)."""
    import torch

    from brrrlib import timing

    for n in (512, 1024, 2048, 4096, 8192):
        a = torch.randn(n, n, device=dev)
        if timing.benchmark(torch.mm, a, a, budget_s=0.05).median_s >= seconds:
            break
    return a
