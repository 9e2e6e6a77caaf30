"""The bandwidth ladder: every road data takes on one machine, measured here or from spec sheets."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import torch

from brrrlib import _checks, _fmt, hardware, machine, timing

__all__ = ["BandwidthLadder", "DiskRead", "HostDeviceCopies", "Rung", "bandwidth_ladder"]
__all__ += ["host_device_copies", "measure_disk_read", "node_ladder", "plot_ladders"]

#: The rungs' levels, nearest the compute units first, and each one's colour.
_COLOURS = {"cache": "red", "memory": "orange", "host-device": "olive"}
_COLOURS |= {"device-device": "green", "node-node": "blue", "storage": "purple"}


@dataclass(frozen=True)
class Rung:
    """One rung: a bandwidth, its level (of _COLOURS), how it is known (measured or spec), its source."""

    name: str
    level: str
    bandwidth_bytes_per_s: float
    how: str
    source: str = ""


@dataclass(frozen=True, repr=False)
class BandwidthLadder(_fmt.Table):
    """The rungs of one ``machine``, widest first; a table and a picture."""

    machine: str
    rungs: tuple[Rung, ...]

    def __post_init__(self) -> None:
        widest = sorted(self.rungs, key=lambda r: -r.bandwidth_bytes_per_s)
        object.__setattr__(self, "rungs", tuple(widest))

    def _table(self) -> tuple:
        rows = [
            (r.level, r.name, _fmt.si(r.bandwidth_bytes_per_s, "B/s"), r.how, r.source)
            for r in self.rungs
        ]
        title = f"BandwidthLadder: {self.machine}, one direction"
        return [title], ("level", "rung", "bandwidth", "how", "source"), rows, "llrll"

    def get(self, name: str) -> Rung:
        """The rung whose name starts with ``name`` (case-insensitive)."""
        found = [r for r in self.rungs if r.name.lower().startswith(name.lower())]
        return found[0] if found else _checks.one_of("name", name, [r.name for r in self.rungs])

    def plot(self, ax: Any = None) -> Any:
        """Horizontal bars on a log scale: measured solid, spec sheets hatched, levels coloured."""
        if ax is None:
            return plot_ladders(self)[0]
        for y, r in enumerate(self.rungs):
            gb_s, spec = r.bandwidth_bytes_per_s / 1e9, r.how == "spec"
            look = {"alpha": 0.45 if spec else 0.9, "hatch": "//" if spec else None, "lw": 0.5}
            ax.barh(y, gb_s, color=f"tab:{_COLOURS[r.level]}", edgecolor="black", **look)
            ax.text(gb_s * 1.08, y, _fmt.si(gb_s * 1e9, "B/s"), va="center", fontsize=8)
        labels = [f"{r.name} ({r.how})" for r in self.rungs]
        ax.set_yticks(range(len(self.rungs)), labels, fontsize=8)
        ax.set_xscale("log")
        ax.set_ylim(len(self.rungs) - 0.5, -0.5)  # widest at the top
        ax.set_title(self.machine, fontsize=10)  # the labels say measured (solid) or spec (hatched)
        return ax


def plot_ladders(*ladders: BandwidthLadder) -> Any:
    """Ladders one above the other on one bandwidth axis (GB/s, log), so their rungs line up."""
    import matplotlib.pyplot as plt

    heights = [0.3 * len(x.rungs) + 0.8 for x in ladders]
    layout = {"sharex": True, "height_ratios": heights, "squeeze": False}
    fig, axes = plt.subplots(len(ladders), figsize=(9, sum(heights)), **layout)
    for ax, ladder in zip(axes[:, 0], ladders, strict=True):
        ladder.plot(ax)
    gb_s = [r.bandwidth_bytes_per_s / 1e9 for x in ladders for r in x.rungs]
    # x limits that leave room for the labels to the right of the widest bar
    axes[-1, 0].set(
        xlabel="bandwidth, one direction (GB/s, log scale)", xlim=(min(gb_s) / 2, max(gb_s) * 8)
    )
    fig.tight_layout()
    return axes[:, 0]


def bandwidth_ladder(
    ceilings: Any = None,
    *,
    disk: DiskRead | None = None,
    sweep: Any = None,
    copies: HostDeviceCopies | None = None,
    measure_cache: bool = True,
) -> BandwidthLadder:
    """This machine's ladder, every rung measured here (from the results given, and a cache copy)."""
    found = [_cache_rung()] if measure_cache else []
    if ceilings is not None:  # a large copy: bytes read + written / time
        name = f"DRAM ({ceilings.device_name})"
        found.append((name, "memory", ceilings.bandwidth_for("copy"), "bl.measure_ceilings"))
    if copies is not None:
        name = f"host to {copies.device_name}, pinned"
        found.append((name, "host-device", copies.pinned_bytes_per_s, "bl.benchmark"))
    if sweep is not None:  # the largest bus bandwidth measured
        name = f"all-reduce busbw, {sweep.world_size} x {sweep.backend}"
        found.append((name, "device-device", sweep.peak_busbw_bytes_per_s, "all_reduce_sweep"))
    if disk is not None:
        found.append(("file read", "storage", disk.bytes_per_s, disk.method))
    if not found:
        raise ValueError("nothing to put on the ladder: pass ceilings, disk, sweep or copies")
    where = getattr(ceilings, "device_name", "") or machine.device_name(machine.device())
    rungs = tuple(Rung(name, level, bw, "measured", how) for name, level, bw, how in found)
    return BandwidthLadder(f"this machine ({where})", rungs)


def node_ladder(name: str = "DGX H100") -> BandwidthLadder:
    """One GPU of the node ``name`` (``bl.hardware.node``), every rung from a spec sheet."""
    box = hardware.node(name)
    gpu = hardware.spec(box.gpu)
    rungs = [Rung(f"HBM, {gpu.name}", "memory", gpu.mem_bandwidth_bytes_per_s, "spec", gpu.source)]
    host = hardware.host_link(gpu.name).name
    for link_name in (box.gpu_link, host, box.nic_link, "nvme"):
        x = hardware.link(link_name)
        rungs.append(Rung(x.name, x.kind, x.bandwidth_bytes_per_s, "spec", x.source))
    share = box.nics_per_node / box.gpus_per_node
    return BandwidthLadder(f"one GPU of a {box.name} ({share:g} NIC per GPU)", tuple(rungs))


def _cache_rung() -> tuple[str, str, float, str]:
    """A copy that stays in cache, timed with bl.benchmark (bytes read + written / time)."""
    dev = machine.device()
    if dev.type == "cuda":  # a quarter of the GPU's L2
        nbytes = max(2**20, machine.last_level_cache_bytes(dev) // 4)
    else:  # 128 KiB per thread: each core's share stays in its L2
        nbytes = 128 * 2**10 * torch.get_num_threads()
    src = torch.ones(nbytes // 4, device=dev)
    dst = torch.empty_like(src)
    t = timing.benchmark(dst.copy_, src, budget_s=0.2)
    return f"cache ({dev.type})", "cache", 2 * nbytes / t.median_s, "bl.benchmark"


@dataclass(frozen=True, repr=False)
class DiskRead(_fmt.Table):
    """Reads of one file from disk: every sample, and how the page cache was kept out."""

    nbytes: int
    samples_s: tuple[float, ...]
    method: str
    evicted: bool
    directory: str

    @property
    def bytes_per_s(self) -> float:
        """Median read bandwidth."""
        return self.nbytes / _fmt.median(self.samples_s)

    @property
    def quartile_bytes_per_s(self) -> tuple[float, float]:
        """``(low, high)``: the read bandwidth at the slow and the fast quartile of the reads."""
        slow, fast = (_fmt.quantile(self.samples_s, q) for q in (0.75, 0.25))
        return self.nbytes / slow, self.nbytes / fast

    def _table(self) -> tuple:
        bandwidths = (_fmt.si(b, "B/s") for b in (self.bytes_per_s, *self.quartile_bytes_per_s))
        size, reads = _fmt.binary_bytes(self.nbytes), str(len(self.samples_s))
        row = (size, reads, *bandwidths, str(self.evicted), self.method)  # False: memory was read
        header = ("size", "reads", "median", "slow", "fast", "evicted", "method")
        return [f"DiskRead: {self.directory}"], header, [row], "rrrrrll"


def measure_disk_read(
    nbytes: int = 64 * 2**20, *, directory: str | None = None, repeats: int = 5
) -> DiskRead:
    """Write a file of ``nbytes``, then time reading it back from disk ``repeats`` times."""
    _checks.positive_int("repeats", repeats, 1, 100)
    directory = directory or tempfile.gettempdir()
    if not (os.path.isdir(directory) and os.access(directory, os.W_OK)):
        raise ValueError(f"directory must be a folder this program can write to, got {directory!r}")
    half_free = shutil.disk_usage(directory).free // 2
    _checks.positive_int("nbytes", nbytes, 2**20, min(2**32, half_free))
    fd, path = tempfile.mkstemp(prefix="brrr-disk-", dir=directory)
    try:
        block = os.urandom(2**20)
        for offset in range(0, nbytes, len(block)):
            os.write(fd, block[: nbytes - offset])
        os.fsync(fd)
        buf, samples = memoryview(bytearray(8 * 2**20)), []
        for _ in range(repeats):
            method, evicted = _drop_cached_pages(fd)
            t0 = time.perf_counter()
            with open(fd, "rb", buffering=0, closefd=False) as f:
                while f.readinto(buf):
                    pass
            samples.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
    return DiskRead(nbytes, tuple(samples), method, evicted, directory)


def _drop_cached_pages(fd: int) -> tuple[str, bool]:
    """Rewind, and ask the OS to forget the file's cached pages; how, and whether it could."""
    os.lseek(fd, 0, os.SEEK_SET)
    if hasattr(os, "posix_fadvise"):  # before each read
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return "posix_fadvise(DONTNEED)", True
    with contextlib.suppress(ImportError, OSError):  # macOS: bypass the page cache
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_NOCACHE", 48), 1)
        return "fcntl(F_NOCACHE)", True
    return "page-cache", False  # no way to drop it here


@dataclass(frozen=True, repr=False)
class HostDeviceCopies(_fmt.Table):
    """Host-to-device copies of ``nbytes`` on the GPU ``device_name``: two timings, two comparisons."""

    nbytes: int
    device_name: str
    pageable: timing.Timing
    pinned: timing.Timing
    pinned_vs_pageable: timing.Comparison
    overlap: timing.Comparison  # a copy beside a matmul as long, against one after the other

    @property
    def pinned_bytes_per_s(self) -> float:
        """Median bandwidth of the pinned copy."""
        return self.nbytes / self.pinned.median_s

    def _table(self) -> tuple:
        pageable, pinned = self.pageable.median_s, self.pinned.median_s
        rows = [
            ("pageable", _fmt.seconds(pageable), _fmt.si(self.nbytes / pageable, "B/s"), "", ""),
            ("pinned", _fmt.seconds(pinned), _fmt.si(self.nbytes / pinned, "B/s"))
            + ("pageable", self.pinned_vs_pageable.says()),
            ("overlapped", "", "", "serial", self.overlap.says()),
        ]
        title = f"HostDeviceCopies: {_fmt.binary_bytes(self.nbytes)} host to {self.device_name}"
        return [title], ("copy", "time", "bandwidth", "against", "ratio"), rows, "lrrll"


def host_device_copies(nbytes: int = 64 * 2**20) -> HostDeviceCopies:
    """Pinned vs pageable host-to-device copies and copy/compute overlap, on this machine's GPU."""
    _checks.positive_int("nbytes", nbytes, 2**10, 2**32)
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU: predict the copy from the host link (bl.hardware.link)")
    dev = torch.device("cuda")
    pageable = torch.empty(nbytes, dtype=torch.uint8)  # 1. the buffers
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    copy_pinned = functools.partial(dst.copy_, pinned, non_blocking=True)
    copy_pageable = functools.partial(dst.copy_, pageable)
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

    on_gpu = {"budget_s": 0.5, "device": dev}
    t_pageable = timing.benchmark(copy_pageable, label="pageable", **on_gpu)  # 2. each copy
    t_pinned = timing.benchmark(copy_pinned, label="pinned", **on_gpu)
    ratio = timing.compare(copy_pinned, copy_pageable, labels=("pinned", "pageable"), **on_gpu)
    for n in (512, 1024, 2048, 4096, 8192):  # 3. a matmul at least as long as the copy
        a = torch.randn(n, n, device=dev)
        if timing.benchmark(torch.mm, a, a, budget_s=0.05).median_s >= t_pinned.median_s:
            break
    overlap = timing.compare(overlapped, serial, labels=("overlapped", "serial"), **on_gpu)  # 4.
    name = torch.cuda.get_device_name(dev)
    return HostDeviceCopies(nbytes, name, t_pageable, t_pinned, ratio, overlap)
