"""The bandwidth ladder: every road data takes on one machine, measured here or read from sheets."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brrrlib import _fmt, hardware
from brrrlib.distributed._comm_model import TableRepr

__all__ = [
    "LEVELS",
    "BandwidthLadder",
    "DiskRead",
    "Rung",
    "bandwidth_ladder",
    "measure_disk_read",
    "node_ladder",
    "plot_ladders",
]

#: The rungs, nearest the compute units first, and each one's colour.
LEVELS = ("cache", "memory", "host-device", "device-device", "node-node", "storage")
_COLOURS = dict(zip(LEVELS, ("red", "orange", "olive", "green", "blue", "purple"), strict=True))
_READ_CHUNK_BYTES = 8 * 2**20


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: a bandwidth, its level, how it is known (measured or spec) and from what."""

    name: str
    level: str
    bandwidth_bytes_per_s: float
    how: str
    source: str = ""

    def __post_init__(self) -> None:
        if self.level not in LEVELS or self.how not in ("measured", "spec"):
            raise ValueError(f"{self.name}: level must be in {LEVELS}, how measured or spec")
        if not self.bandwidth_bytes_per_s > 0:
            raise ValueError(f"{self.name}: bandwidth_bytes_per_s must be > 0")


@dataclass(frozen=True, repr=False)
class BandwidthLadder(TableRepr):
    """The rungs of one ``machine``, widest first; a table and a picture."""

    machine: str
    rungs: tuple[Rung, ...]

    def __post_init__(self) -> None:
        widest = sorted(self.rungs, key=lambda r: -r.bandwidth_bytes_per_s)
        object.__setattr__(self, "rungs", tuple(widest))

    def _header(self) -> tuple[str, ...]:
        return ("level", "rung", "bandwidth", "how", "source")

    def _rows(self) -> list[tuple[str, ...]]:
        return [
            (r.level, r.name, _fmt.si(r.bandwidth_bytes_per_s, "B/s"), r.how, r.source)
            for r in self.rungs
        ]

    def _caption(self) -> str:
        return f"{self.machine}, one direction, widest first"

    def get(self, name: str) -> Rung:
        """The rung whose name starts with ``name`` (case-insensitive)."""
        for r in self.rungs:
            if r.name.lower().startswith(name.lower()):
                return r
        raise KeyError(f"no rung named {name!r}; rungs: {', '.join(r.name for r in self.rungs)}")

    def plot(self, ax: Any = None) -> Any:
        """Horizontal bars on a log scale: measured solid, spec sheets hatched, levels coloured."""
        import matplotlib.pyplot as plt

        ax = plt.subplots(figsize=(9, 0.32 * len(self.rungs) + 1.2))[1] if ax is None else ax
        for y, r in enumerate(self.rungs):
            gb_s, spec = r.bandwidth_bytes_per_s / 1e9, r.how == "spec"
            look = {"alpha": 0.45 if spec else 0.9, "hatch": "//" if spec else None, "lw": 0.5}
            ax.barh(y, gb_s, color=f"tab:{_COLOURS[r.level]}", edgecolor="black", **look)
            ax.text(gb_s * 1.08, y, _fmt.si(gb_s * 1e9, "B/s"), va="center", fontsize=8)
        ax.set_yticks(
            range(len(self.rungs)), [f"{r.name} ({r.how})" for r in self.rungs], fontsize=8
        )
        ax.set_ylim(len(self.rungs) - 0.5, -0.5)  # widest at the top
        ax.set(xscale="log", xlabel="bandwidth, one direction (GB/s, log scale)")
        ax.set_title(f"{self.machine}: measured solid, spec sheets hatched", fontsize=10)
        ax.set_xlim(*_span(self.rungs))
        return ax


def _span(rungs: Sequence[Rung]) -> tuple[float, float]:
    """x limits in GB/s that leave room for the labels to the right of the widest bar."""
    values = [r.bandwidth_bytes_per_s / 1e9 for r in rungs]
    return min(values) / 2, max(values) * 8


def plot_ladders(*ladders: BandwidthLadder) -> Any:
    """Ladders one above the other on one bandwidth axis (GB/s, log), so their rungs line up."""
    import matplotlib.pyplot as plt

    heights = [0.3 * len(x.rungs) + 0.8 for x in ladders]
    fig, axes = plt.subplots(
        len(ladders),
        1,
        figsize=(9, sum(heights)),
        sharex=True,
        height_ratios=heights,
        squeeze=False,
    )
    for ax, ladder in zip(axes[:, 0], ladders, strict=True):
        ladder.plot(ax)
        ax.set_xlabel("")
    axes[-1, 0].set_xlabel("bandwidth, one direction (GB/s, log scale)")
    axes[0, 0].set_xlim(*_span([r for x in ladders for r in x.rungs]))
    fig.tight_layout()
    return axes[:, 0]


def bandwidth_ladder(
    ceilings: Any = None,
    *,
    disk: DiskRead | None = None,
    sweep: Any = None,
    copies: Any = None,
    measure_cache: bool = True,
) -> BandwidthLadder:
    """This machine's ladder, every rung measured here (from the results given, and a cache copy)."""
    rungs = [_cache_rung()] if measure_cache else []
    if ceilings is not None:
        how = "bl.measure_ceilings(): a large copy, bytes read + written / time"
        name = f"DRAM, this machine ({ceilings.device_name})"
        rungs.append(Rung(name, "memory", ceilings.bandwidth_for("copy"), "measured", how))
    if copies is not None:
        name = f"host to {copies.device_name}, pinned"
        rungs.append(
            Rung(name, "host-device", copies.pinned_bytes_per_s, "measured", "bl.benchmark")
        )
    if sweep is not None:
        name = f"all-reduce busbw, {sweep.world_size} local processes ({sweep.backend})"
        bw, how = sweep.peak_busbw_bytes_per_s, "all_reduce_sweep(): the largest busbw"
        rungs.append(Rung(name, "device-device", bw, "measured", how))
    if disk is not None:
        rungs.append(
            Rung("file read, this machine", "storage", disk.bytes_per_s, "measured", disk.method)
        )
    if not rungs:
        raise ValueError("nothing to put on the ladder: pass ceilings, disk, sweep or copies")
    where = getattr(ceilings, "device_name", "") or "this machine"
    return BandwidthLadder(f"this machine ({where})", tuple(rungs))


def node_ladder(name: str = "DGX H100") -> BandwidthLadder:
    """One GPU of the node ``name`` (``bl.hardware.node``), every rung from a spec sheet."""
    box = hardware.node(name)
    gpu = hardware.spec(box.gpu)
    rungs = [Rung(f"HBM, {gpu.name}", "memory", gpu.mem_bandwidth_bytes_per_s, "spec", gpu.source)]
    host = hardware.host_link(gpu.name).name
    for link_name in (box.gpu_link, host, box.nic_link, "NVMe SSD (PCIe 4.0 x4)"):
        x = hardware.link(link_name)
        rungs.append(Rung(x.name, x.kind, x.bandwidth_bytes_per_s, "spec", x.source))
    share = box.nics_per_node / box.gpus_per_node
    return BandwidthLadder(f"one GPU of a {box.name} ({share:g} NIC per GPU)", tuple(rungs))


def _cache_rung() -> Rung:
    """A copy that stays in cache, timed with bl.benchmark (bytes read + written / time)."""
    import torch

    from brrrlib import machine, timing

    dev = machine.device()
    threads = torch.get_num_threads()
    if dev.type == "cuda":
        nbytes, where = max(2**20, machine.last_level_cache_bytes(dev) // 4), "the GPU's L2"
    else:
        nbytes, where = 128 * 2**10 * threads, f"L2, 128 KiB per thread, {threads} thread(s)"
    src = torch.ones(nbytes // 4, device=dev)
    dst = torch.empty_like(src)
    t = timing.benchmark(dst.copy_, src, budget_s=0.2, label="copy in cache")
    how = f"bl.benchmark: copy of {_fmt.binary_bytes(nbytes)}, in {where}"
    return Rung(
        f"cache, this machine ({dev.type})", "cache", 2 * nbytes / t.median_s, "measured", how
    )


# ------------------------------------------------------------------ disk


@dataclass(frozen=True, repr=False)
class DiskRead(TableRepr):
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

    def _header(self) -> tuple[str, ...]:
        return ("size", "reads", "median", "slow quartile", "fast quartile", "page cache")

    def _rows(self) -> list[tuple[str, ...]]:
        slow, fast = (_fmt.si(b, "B/s") for b in self.quartile_bytes_per_s)
        cache = "dropped" if self.evicted else "KEPT: memory, not disk"
        size, median = _fmt.binary_bytes(self.nbytes), _fmt.si(self.bytes_per_s, "B/s")
        return [(size, str(len(self.samples_s)), median, slow, fast, cache)]

    def _caption(self) -> str:
        return f"{self.directory}; {self.method}"


def measure_disk_read(
    nbytes: int = 64 * 2**20, *, directory: str | None = None, repeats: int = 5
) -> DiskRead:
    """Write a file of ``nbytes``, then time reading it back from disk ``repeats`` times."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 2**20 <= nbytes <= 2**32:
        raise ValueError(f"nbytes must be a whole number from 1 MiB to 4 GiB, got {nbytes!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= 100:
        raise ValueError(f"repeats must be a whole number from 1 to 100, got {repeats!r}")
    directory = directory or tempfile.gettempdir()
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise ValueError(f"directory={directory!r} is not a folder this program can write to")
    if nbytes > shutil.disk_usage(directory).free // 2:
        raise ValueError(f"nbytes={nbytes} is over half the free space in {directory}")
    fd, path = tempfile.mkstemp(prefix="brrr-disk-", dir=directory)
    try:
        block = os.urandom(min(nbytes, 2**20))  # 1. write the file, and flush it to disk
        for offset in range(0, nbytes, len(block)):
            os.write(fd, block[: nbytes - offset])
        os.fsync(fd)
        buf = memoryview(bytearray(_READ_CHUNK_BYTES))
        samples, method, evicted = [], "", False
        for _ in range(repeats):
            method, evicted = _drop_cached_pages(fd)  # 2. out of the page cache
            t0 = time.perf_counter()  # 3. read it all back
            with open(fd, "rb", buffering=0, closefd=False) as f:
                while f.readinto(buf):
                    pass
            samples.append(time.perf_counter() - t0)
    finally:
        os.close(fd)  # 4. delete it
        with contextlib.suppress(OSError):
            os.unlink(path)
    return DiskRead(nbytes, tuple(samples), method, evicted, directory)


def _drop_cached_pages(fd: int) -> tuple[str, bool]:
    """Ask the OS to forget the file's cached pages, and rewind; say how, and whether it could."""
    os.lseek(fd, 0, os.SEEK_SET)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return "page cache dropped before each read (posix_fadvise DONTNEED)", True
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_NOCACHE", 48), 1)
        return "page cache bypassed (fcntl F_NOCACHE)", True
    return "read through the page cache (no way to drop it here)", False
