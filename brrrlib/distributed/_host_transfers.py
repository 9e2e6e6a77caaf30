"""The host rungs: copies from host memory to a GPU, and the input pipeline that feeds it.

* :func:`host_device_copies`: on a GPU, a copy from *pageable* host memory
  (an ordinary tensor) against one from *pinned* (page-locked) memory, and a
  ``non_blocking`` copy on a side stream overlapped with compute; all timed
  with :func:`brrrlib.benchmark` and compared with :func:`brrrlib.compare`.
  Without a GPU it returns the prediction from the spec table, labelled so.
* :func:`input_pipeline`: a ``DataLoader`` reading samples from a file and
  decoding them, with 0, 1, 2... worker processes: how many samples per
  second the host delivers, to set beside how many a training step eats.

Why pinned memory matters (NVIDIA, "How to Optimize Data Transfers in CUDA
C/C++", developer.nvidia.com/blog/how-optimize-data-transfers-cuda-cc/): the
GPU's copy engine can only read page-locked memory, so a copy from pageable
memory first copies the data into a pinned staging buffer on the host, then
sends it. Pinned memory skips the staging copy and lets the copy run
asynchronously (``non_blocking=True``), beside kernels on another stream.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from brrrlib import _fmt, hardware
from brrrlib.distributed._ladder import available_cores, one_thread

__all__ = ["HostDeviceCopies", "InputPipeline", "host_device_copies", "input_pipeline"]


@dataclass(frozen=True, repr=False)
class HostDeviceCopies:
    """Host-to-device copies of ``nbytes``: measured on a GPU, predicted without one.

    Measured (``measured`` True): ``pageable`` and ``pinned`` are
    :class:`~brrrlib.timing.Timing` of one copy each; ``pinned_vs_pageable``
    the paired ratio (pageable time / pinned time); ``overlap`` compares a
    copy followed by a matmul on one stream with the same copy on a side
    stream beside the matmul (serial time / overlapped time).

    Predicted (``measured`` False): ``predicted_s`` maps each PCIe link of
    the spec table to the time of a pinned copy at its spec bandwidth, and
    ``staging_s`` is the extra host copy a pageable transfer makes (bytes
    read + written at this machine's measured DRAM bandwidth, when known).
    """

    nbytes: int
    measured: bool
    device_name: str = "cpu"
    pageable: Any = None
    pinned: Any = None
    pinned_vs_pageable: Any = None
    overlap: Any = None
    predicted_s: dict[str, float] = field(default_factory=dict)
    staging_s: float | None = None

    @property
    def pinned_bytes_per_s(self) -> float:
        """Measured pinned copy bandwidth (needs a GPU)."""
        if not self.measured:
            raise ValueError("no GPU here: nothing was measured; read predicted_s instead")
        return self.nbytes / self.pinned.median_s

    def __repr__(self) -> str:
        size = _fmt.binary_bytes(self.nbytes)
        if self.measured:
            pageable_bw = _fmt.si(self.nbytes / self.pageable.median_s, "B/s")
            return (
                f"HostDeviceCopies(measured on {self.device_name}, {size}: pageable {pageable_bw}, "
                f"pinned {_fmt.si(self.pinned_bytes_per_s, 'B/s')}; pageable / pinned time "
                f"{self.pinned_vs_pageable.says()}; serial / overlapped {self.overlap.says()})"
            )
        links = ", ".join(f"{name} {_fmt.seconds(s)}" for name, s in self.predicted_s.items())
        staging = (
            ""
            if self.staging_s is None
            else f"; pageable adds a staging copy of about {_fmt.seconds(self.staging_s)} on this "
            "host (less where the driver pipelines it)"
        )
        return (
            f"HostDeviceCopies(PREDICTED, no GPU here: a pinned copy of {size} takes {links} "
            f"at spec bandwidth{staging})"
        )


def host_device_copies(
    nbytes: int = 64 * 2**20, *, ceilings: Any = None, budget_s: float = 0.5
) -> HostDeviceCopies:
    """Pinned vs pageable host-to-device copies and copy/compute overlap, or their prediction.

    On CUDA, the method:

    1. **Buffers**: ``nbytes`` of pageable host memory, as much pinned
       (``pin_memory=True``), and a destination on the GPU.
    2. **Each copy alone** with :func:`brrrlib.benchmark` (events on the GPU).
    3. **Pinned against pageable** with :func:`brrrlib.compare`: the ratio
       with an interval.
    4. **Overlap**: a matmul sized to take about as long as the copy; then
       copy-then-matmul on one stream against the copy on a side stream
       (``non_blocking=True``) beside the matmul, compared the same way.

    Without CUDA nothing is measured: the result holds the times a pinned
    copy would take over each PCIe row of ``bl.hardware.links()``, and, given
    ``ceilings``, the staging copy a pageable one adds.
    """
    import torch

    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or not 2**10 <= nbytes <= 2**32:
        raise ValueError(f"nbytes must be a whole number from 1 KiB to 4 GiB, got {nbytes!r}")
    if not torch.cuda.is_available():
        predicted = {x.name: x.seconds_for(nbytes) for x in hardware.links("host-device")}
        staging = None if ceilings is None else 2 * nbytes / ceilings.mem_bandwidth_bytes_per_s
        return HostDeviceCopies(nbytes, measured=False, predicted_s=predicted, staging_s=staging)
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
        nbytes, True, torch.cuda.get_device_name(dev), t_pageable, t_pinned, ratio, overlap
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


# ------------------------------------------------------------------ the input pipeline


class FileSamples:
    """A map-style dataset of fixed-size samples in one file, decoded on read.

    ``__getitem__`` reads ``sample_bytes`` at its offset (each worker process
    opens the file for itself, on first use), turns the
    bytes into floats in [-0.5, 0.5] and runs ``decode_passes`` cheap
    elementwise passes over them, standing in for image decoding and
    augmentation. Defined here, not in a notebook, so worker processes can
    import it whatever their start method.
    """

    def __init__(self, path: str, sample_bytes: int, count: int, decode_passes: int) -> None:
        self.path, self.sample_bytes, self.count = path, sample_bytes, count
        self.decode_passes = decode_passes
        self._file: Any = None

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> Any:
        import torch

        if self._file is None:  # opened in each worker process, on first use
            self._file = open(self.path, "rb", buffering=0)  # closed by close()
        self._file.seek((i % self.count) * self.sample_bytes)
        raw = self._file.read(self.sample_bytes)
        x = torch.frombuffer(bytearray(raw), dtype=torch.uint8).float().div_(255).sub_(0.5)
        for _ in range(self.decode_passes):
            x = x.mul(1.001).tanh_()
        return x

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None}  # a worker opens its own

    def close(self) -> None:
        """Close this process's handle on the file (workers close theirs when they exit)."""
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(frozen=True, repr=False)
class InputPipeline:
    """Batches a DataLoader delivered per second, for each number of worker processes.

    ``samples_s[k]`` are seconds per batch with ``workers[k]`` workers, one
    per round (a block of batches each); ``startup_s[k]`` the time to the
    first batch (starting the workers). Compare ``samples_per_s`` with what
    a training step consumes: if the loader is slower, the device waits.
    """

    workers: tuple[int, ...]
    batch_size: int
    sample_bytes: int
    samples_s: tuple[tuple[float, ...], ...]
    startup_s: tuple[float, ...]
    cores: int

    @property
    def samples_per_s(self) -> tuple[float, ...]:
        """Median samples delivered per second, per worker count."""
        return tuple(self.batch_size / _fmt.median(row) for row in self.samples_s)

    def speedup_says(self, workers: int, than: int = 0) -> str:
        """How many times more samples per second ``workers`` deliver than ``than``, in words.

        From the per-round times (each round measures every setting), with
        the interval of :func:`brrrlib.distributed._collective_results.ratio_says`.
        """
        from brrrlib.distributed._collective_results import ratio_says

        if workers not in self.workers or than not in self.workers:
            raise ValueError(f"both worker counts must be among those measured: {self.workers}")
        a, b = self.samples_s[self.workers.index(than)], self.samples_s[self.workers.index(workers)]
        return ratio_says(a, b)

    @property
    def bytes_per_s(self) -> tuple[float, ...]:
        """Median bytes of samples read per second, per worker count."""
        return tuple(r * self.sample_bytes for r in self.samples_per_s)

    def __repr__(self) -> str:
        rows = [
            f"  {w} worker(s): {_fmt.si(r)} samples/s ({_fmt.si(b, 'B/s')} read), IQR "
            f"{_fmt.iqr(s) / _fmt.median(s):.0%}, first batch after {_fmt.seconds(t)}"
            for w, r, b, s, t in zip(
                self.workers,
                self.samples_per_s,
                self.bytes_per_s,
                self.samples_s,
                self.startup_s,
                strict=True,
            )
        ]
        return (
            f"InputPipeline(batches of {self.batch_size} x {_fmt.binary_bytes(self.sample_bytes)}, "
            f"{self.cores} cores)\n" + "\n".join(rows)
        )

    def plot(self, ax: Any = None) -> Any:
        """Samples per second against the number of workers."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar([str(w) for w in self.workers], self.samples_per_s, color="tab:purple")
        ax.set(
            xlabel="DataLoader worker processes",
            ylabel="samples delivered per second",
            title=f"Input pipeline on {self.cores} cores",
        )
        return ax


def input_pipeline(
    workers: Sequence[int] = (0, 1, 2),
    *,
    batch_size: int = 32,
    sample_bytes: int = 3 * 64 * 64,
    decode_passes: int = 8,
    rounds: int = 5,
) -> InputPipeline:
    """Time a DataLoader over a file of samples with each number of ``workers``.

    1. **A file** of 16 batches of random samples, in the page cache (this
       measures the host's side of the rung: reading and decoding).
    2. **One loader per worker count**, its workers started (the first
       batch, timed apart as ``startup_s``).
    3. **Rounds**: in each, every loader in turn first hands over what its
       workers prepared while it waited (untimed), then delivers a block of
       4 batches, timed: the rate its workers keep up, not their backlog.
    4. **Clean up**: workers stopped, file deleted, on every way out.

    The loading process decodes with one PyTorch thread while measured, as
    every worker does (DataLoader gives each worker one thread): one sample's
    ops are too small to share between threads, and on a busy machine a
    thread waiting for its partner would measure the scheduler.
    """
    cores = available_cores()
    if (
        isinstance(workers, (int, str))
        or not workers
        or any(
            isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= 4 * cores
            for w in workers
        )
    ):
        raise ValueError(
            f"workers must be a list of worker counts from 0 to {4 * cores}, got {workers!r}"
        )
    for name, value, top in (
        ("batch_size", batch_size, 4096),
        ("sample_bytes", sample_bytes, 2**24),
        ("decode_passes", decode_passes, 1000),
        ("rounds", rounds, 100),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValueError(f"{name} must be a whole number from 1 to {top}, got {value!r}")
    count = 16 * batch_size
    fd, path = tempfile.mkstemp(prefix="brrr-samples-")
    data = FileSamples(path, sample_bytes, count, decode_passes)  # opens the file on first use
    iters: list[Any] = []
    try:
        os.write(fd, os.urandom(count * sample_bytes))  # 1.
        with one_thread():  # see the docstring
            samples, startup = _rounds(data, workers, batch_size, count, rounds, iters)
    finally:
        for it in iters:  # 4.
            with contextlib.suppress(Exception):
                it._shutdown_workers()
        data.close()
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
    return InputPipeline(
        tuple(workers),
        batch_size,
        sample_bytes,
        tuple(tuple(s) for s in samples),
        tuple(startup),
        cores,
    )


def _rounds(
    data: Any, workers: Sequence[int], batch_size: int, count: int, rounds: int, iters: list[Any]
) -> tuple[list[list[float]], list[float]]:
    """2. and 3. of :func:`input_pipeline`; the iterators go into ``iters`` for the clean-up."""
    import torch
    from torch.utils.data import DataLoader

    startup = []
    for w in workers:  # 2.
        loader = DataLoader(
            data,
            batch_size=batch_size,
            num_workers=w,
            persistent_workers=w > 0,
            sampler=_Forever(count),
            prefetch_factor=2 if w else None,
        )
        t0 = time.perf_counter()
        iters.append(iter(loader))
        next(iters[-1])
        startup.append(time.perf_counter() - t0)
    samples: list[list[float]] = [[] for _ in workers]
    with torch.no_grad():
        for r in range(rounds):  # 3.
            order = range(len(workers)) if r % 2 == 0 else reversed(range(len(workers)))
            for k in order:
                for _ in range(2 * workers[k]):  # the backlog, untimed
                    next(iters[k])
                t0 = time.perf_counter()
                for _ in range(4):
                    next(iters[k])
                samples[k].append((time.perf_counter() - t0) / 4)
    return samples, startup


class _Forever:
    """A sampler that never runs out: indices 0, 1, ..., count - 1, 0, 1, ..."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __iter__(self):
        i = 0
        while True:
            yield i % self.count
            i += 1
