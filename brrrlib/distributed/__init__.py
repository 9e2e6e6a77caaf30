"""Beyond one device: collectives measured over processes, the alpha-beta model, data parallelism.

On a cluster, one rank per process under torchrun (rank 0 prints the table; ``load`` reads
``--out``): ``torchrun --standalone --nproc-per-node=8 -m brrrlib.distributed all-reduce --out
ar.json``, or ``data-parallel``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brrrlib import _fmt
from brrrlib.distributed import _collectives_worker, _launch
from brrrlib.distributed._collective_results import CollectiveSweep, DataParallelRun
from brrrlib.distributed._collectives_worker import mlp
from brrrlib.distributed._host_transfers import host_device_copies
from brrrlib.distributed._ladder import (
    BandwidthLadder,
    bandwidth_ladder,
    measure_disk_read,
    node_ladder,
    plot_ladders,
)
from brrrlib.distributed._launch import GroupTimeout, PortInUse, WorkerDied
from brrrlib.distributed._message_explorer import message_size_explorer

__all__ = [
    "DEFAULT_MODEL",
    "BandwidthLadder",
    "CollectiveSweep",
    "DataParallelRun",
    "GroupTimeout",
    "PortInUse",
    "WorkerDied",
    "all_reduce_sweep",
    "bandwidth_ladder",
    "cores_note",
    "data_parallel_steps",
    "host_device_copies",
    "load",
    "local_world_sizes",
    "measure_disk_read",
    "message_size_explorer",
    "mlp",
    "node_ladder",
    "plot_ladders",
]

#: 4 bytes (one fp32 number) to 16 MiB by factors of 4, then 32 MiB.
DEFAULT_SIZES_BYTES: tuple[int, ...] = (*(4**k for k in range(1, 13)), 2**25)
#: Batches per process for :func:`data_parallel_steps`.
DEFAULT_BATCHES: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
#: The data-parallel example: an MLP of 788k parameters (3 MiB of fp32 gradients).
DEFAULT_MODEL = {"d_in": 256, "hidden": 512, "depth": 3, "d_out": 256}
#: The most processes the local launcher starts.
MAX_LOCAL_WORLD_SIZE = 64
#: Each process holds every message buffer plus about this many times the largest as scratch.
_SCRATCH_COPIES = 2
#: Only this share of the memory available now is planned for.
_MEMORY_SHARE = 0.5
#: The fewest and most rounds of each job (at least 6 data-parallel rounds: then a median's
#: 95% interval is narrower than the whole range).
_ROUNDS = {"all_reduce": (5, 50), "data_parallel": (6, 20)}
_KINDS = {"all_reduce": CollectiveSweep, "data_parallel": DataParallelRun}


def _cores() -> int:
    """The cores this process may run on (a container's CPU set, where the OS says), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def local_world_sizes() -> tuple[int, ...]:
    """The process counts worth measuring here: 2, and 4 when there are 4 cores or more."""
    return tuple(n for n in (2, 4) if n == 2 or n <= _cores())


def cores_note(world_size: int) -> str:
    """Why ``world_size`` processes would oversubscribe this machine's cores, or ``""``."""
    cores = _cores()
    if world_size <= cores:
        return ""
    return (
        f"{world_size} processes on {cores} cores: {world_size - cores} would always wait for a "
        "core, and the times would measure the scheduler, not the link"
    )


def all_reduce_sweep(
    sizes_bytes: Sequence[int] | None = None,
    *,
    world_size: int = 2,
    backend: str | None = None,
    budget_s: float = 2.0,
    timeout_s: float = 120.0,
    port: int | None = None,
) -> CollectiveSweep:
    """All-reduce time against message size, over ``world_size`` processes on this machine."""
    world_size, sizes = _check_world_size(world_size), _check_sizes(sizes_bytes)
    job = _job("all_reduce", world_size, backend, budget_s, timeout_s, sizes_bytes=sizes)
    _check_memory(sizes, world_size, job["backend"])
    return CollectiveSweep.from_dict(_run_local(job, world_size, timeout_s, port))


def data_parallel_steps(
    batches: Sequence[int] | None = None,
    *,
    world_size: int = 2,
    backend: str | None = None,
    budget_s: float = 4.0,
    timeout_s: float = 180.0,
    port: int | None = None,
) -> DataParallelRun:
    """Data-parallel training steps of a small MLP at each batch size, three ways."""
    world_size, batches = _check_world_size(world_size), _check_batches(batches)
    job = _job("data_parallel", world_size, backend, budget_s, timeout_s, batches=batches)
    return DataParallelRun.from_dict(_run_local(job, world_size, timeout_s, port))


def load(path: str | os.PathLike) -> CollectiveSweep | DataParallelRun:
    """Read a result saved by ``python -m brrrlib.distributed ... --out PATH`` (or ``to_dict``)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"path={str(path)!r} is not a saved result ({err})") from None
    if not isinstance(data, dict) or data.get("kind") not in _KINDS:
        raise ValueError(f"path={str(path)!r} holds no all_reduce or data_parallel result")
    return _KINDS[data["kind"]].from_dict(data)


def _run_local(job: dict[str, Any], world_size: int, timeout_s: float, port: Any) -> dict:
    """Rank 0's result of ``job`` over ``world_size`` local processes."""
    if port is not None and not _whole(port, 1, 65535):
        raise ValueError(f"port must be None (a free one) or a number 1024-65535, got {port!r}")
    return _launch.run(job, world_size, timeout_s=timeout_s, port=port)


def _job(
    kind: str, world_size: int, backend: str | None, budget_s: float, timeout_s: float, **what: Any
) -> dict[str, Any]:
    """What every rank runs: ``kind`` over ``what`` (its sizes, or its batches)."""
    for name, value in (("budget_s", budget_s), ("timeout_s", timeout_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e5:
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return {
        "kind": kind,
        **what,
        "model": DEFAULT_MODEL,
        "min_rounds": _ROUNDS[kind][0],
        "max_rounds": _ROUNDS[kind][1],
        "backend": _backend(backend, world_size),
        "threads": max(1, _cores() // world_size),
        "budget_s": float(budget_s),
        "group_timeout_s": max(10.0, min(60.0, float(timeout_s))),
        "launcher": "local processes",
    }


def _whole(value: Any, low: int, high: int) -> bool:
    """Whether ``value`` is a whole number (``True`` is not one) from ``low`` to ``high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _check_world_size(world_size: Any) -> int:
    if not _whole(world_size, 2, MAX_LOCAL_WORLD_SIZE):
        raise ValueError(f"world_size must be a whole number from 2 to 64, got {world_size!r}")
    return world_size


def _check_sizes(sizes_bytes: Sequence[int] | None) -> list[int]:
    """Whole positive sizes, rounded up to whole fp32 numbers (4 bytes), sorted, no repeats."""
    if sizes_bytes is None:
        return list(DEFAULT_SIZES_BYTES)
    if isinstance(sizes_bytes, (int, str)) or not isinstance(sizes_bytes, Sequence):
        raise TypeError(f"sizes_bytes must be a list of sizes in bytes, got {sizes_bytes!r}")
    if not 1 <= len(sizes_bytes) <= 64 or not all(_whole(s, 1, 2**62) for s in sizes_bytes):
        raise ValueError(f"sizes_bytes must be 1 to 64 whole numbers >= 1, got {sizes_bytes!r}")
    return sorted({4 * math.ceil(s / 4) for s in sizes_bytes})


def _check_batches(batches: Sequence[int] | None) -> list[int]:
    if batches is None:
        return list(DEFAULT_BATCHES)
    ok = isinstance(batches, Sequence) and not isinstance(batches, str) and 1 <= len(batches) <= 16
    if not ok or not all(_whole(b, 1, 65536) for b in batches):
        raise ValueError(f"batches must be 1 to 16 whole numbers from 1 to 65536, got {batches!r}")
    return sorted(set(batches))


def _backend(backend: str | None, world_size: int) -> str:
    """gloo on CPUs; nccl when CUDA has one GPU per process (asked for, or by default)."""
    import torch
    import torch.distributed as dist

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nccl_ok = dist.is_available() and dist.is_nccl_available() and gpus >= world_size
    if backend is None:
        return "nccl" if nccl_ok else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo', 'nccl' or None, got {backend!r}")
    if backend == "nccl" and not nccl_ok:
        raise ValueError(
            f"backend='nccl' needs a GPU per process, {world_size}; {gpus} here: use backend='gloo'"
        )
    return backend


def _check_memory(sizes: list[int], world_size: int, backend: str) -> None:
    """Refuse messages that would not fit: every process holds all buffers plus scratch."""
    import torch

    from brrrlib import machine

    dev = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    processes = 1 if backend == "nccl" else world_size  # each GPU holds one process's buffers
    have = _MEMORY_SHARE * machine.available_memory_bytes(dev)

    def needed(top: int) -> int:  # the sizes up to ``top``, and scratch as large as it
        return processes * (sum(s for s in sizes if s <= top) + _SCRATCH_COPIES * top)

    if needed(max(sizes)) > have:
        fits = max((s for s in sizes if needed(s) <= have), default=0)
        raise ValueError(
            f"sizes_bytes up to {_fmt.binary_bytes(max(sizes))} need about "
            f"{_fmt.binary_bytes(needed(max(sizes)))} on {dev.type}, over half of the memory "
            f"available: keep sizes up to {_fmt.binary_bytes(fits)}, or use fewer processes"
        )


# ------------------------------------------------------------------ under torchrun


def _size(text: str) -> int:
    """``"4"``, ``"64K"``, ``"1M"``, ``"2G"``: bytes (K, M, G = 1024, 1024^2, 1024^3)."""
    text = text.strip()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m brrrlib.distributed", description=__doc__)
    sub = parser.add_subparsers(dest="job", required=True)
    for name, budget, what in (("all-reduce", 2.0, "--sizes"), ("data-parallel", 4.0, "--batches")):
        p = sub.add_parser(name)
        p.add_argument("--budget-s", type=float, default=budget)
        p.add_argument("--timeout-s", type=float, default=600.0)
        p.add_argument("--backend", choices=("gloo", "nccl"), default=None)
        p.add_argument("--out", help="save the result as JSON (read it with distributed.load)")
        p.add_argument(
            what, help="comma-separated: bytes (K, M, G suffixes) or samples per process"
        )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m brrrlib.distributed {all-reduce,data-parallel}``, one rank under torchrun."""
    args = _parser().parse_args(argv)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        how = f"torchrun --standalone --nproc-per-node=2 -m brrrlib.distributed {args.job}"
        print(f"run this under torchrun, which starts the processes: {how}", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    timing = (local, args.backend, args.budget_s, args.timeout_s)
    if args.job == "all-reduce":
        sizes = _check_sizes([_size(x) for x in args.sizes.split(",")] if args.sizes else None)
        job = _job("all_reduce", *timing, sizes_bytes=sizes)
        _check_memory(sizes, local, job["backend"])
    else:
        batches = [int(b) for b in args.batches.split(",")] if args.batches else None
        job = _job("data_parallel", *timing, batches=_check_batches(batches))
    job["launcher"] = "torchrun"
    _collectives_worker.watchdog(None, time.time() + args.timeout_s)
    result = _collectives_worker.run_job(job)
    if result is not None:  # rank 0
        shown = _KINDS[job["kind"]].from_dict(result)
        print(shown)
        if args.out:
            Path(args.out).write_text(json.dumps(shown.to_dict()))
    return 0
