"""Beyond one device: collectives measured over processes, the alpha-beta model, data parallelism."""

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


# ------------------------------------------------------------------ how many processes here


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
        f"{world_size} processes on {cores} cores: each process of a collective keeps a core "
        f"busy, so {world_size - cores} of them would always be waiting for the operating system "
        "to give them a turn (a time slice of milliseconds), and the times would measure the "
        "scheduler, not the link. Measure with as many processes as cores, or fewer."
    )


# ------------------------------------------------------------------ the measurements


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
    world_size = _check_world_size(world_size)
    sizes = _check_sizes(sizes_bytes)
    backend = _backend(backend, world_size)
    _check_memory(sizes, world_size, backend)
    job = _job("all_reduce", world_size, backend, budget_s, timeout_s, sizes_bytes=sizes)
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
    world_size = _check_world_size(world_size)
    backend = _backend(backend, world_size)
    batches, model = _check_batches(batches), dict(DEFAULT_MODEL)
    job = _job(
        "data_parallel", world_size, backend, budget_s, timeout_s, batches=batches, model=model
    )
    return DataParallelRun.from_dict(_run_local(job, world_size, timeout_s, port))


def load(path: str | os.PathLike) -> CollectiveSweep | DataParallelRun:
    """Read a result saved by ``python -m brrrlib.distributed ... --out PATH`` (or ``to_dict``)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"path={str(path)!r} is not a saved result ({err})") from None
    kinds = {"all_reduce": CollectiveSweep, "data_parallel": DataParallelRun}
    if not isinstance(data, dict) or data.get("kind") not in kinds:
        raise ValueError(f"path={str(path)!r} holds no all_reduce or data_parallel result")
    return kinds[data["kind"]].from_dict(data)


def _job(
    kind: str, world_size: int, backend: str, budget_s: float, timeout_s: float, **what: Any
) -> dict[str, Any]:
    """What every rank runs: ``kind`` over ``what`` (its sizes, or its batches and model)."""
    for name, value in (("budget_s", budget_s), ("timeout_s", timeout_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e5:
            raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return {
        "kind": kind,
        **what,
        "min_rounds": _ROUNDS[kind][0],
        "max_rounds": _ROUNDS[kind][1],
        "backend": backend,
        "threads": max(1, _cores() // world_size),
        "budget_s": float(budget_s),
        "group_timeout_s": max(10.0, min(60.0, float(timeout_s))),
        "launcher": "local processes",
    }


def _run_local(job: dict[str, Any], world_size: int, timeout_s: float, port: Any) -> dict:
    """Rank 0's result of ``job`` over ``world_size`` local processes (``_launch.run``)."""
    what = {"all_reduce": "all-reduce sweep", "data_parallel": "data-parallel steps"}[job["kind"]]
    what = f"the {what} over {world_size} local processes"
    return _launch.run(job, world_size, timeout_s=timeout_s, port=_check_port(port), what=what)


# ------------------------------------------------------------------ checking arguments


def _whole(value: Any, low: int, high: int) -> bool:
    """Whether ``value`` is a whole number (``True`` is not one) from ``low`` to ``high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _check_world_size(world_size: Any) -> int:
    if not _whole(world_size, 2, MAX_LOCAL_WORLD_SIZE):
        raise ValueError(
            f"world_size must be a whole number from 2 to {MAX_LOCAL_WORLD_SIZE} (a collective "
            f"needs at least 2 processes), got {world_size!r}; local_world_sizes() suggests some"
        )
    return world_size


def _check_port(port: Any) -> int | None:
    if port is not None and not _whole(port, 1, 65535):
        raise ValueError(
            f"port must be None (pick a free one) or a number 1024-65535, got {port!r}"
        )
    return port


def _check_sizes(sizes_bytes: Sequence[int] | None) -> list[int]:
    """Whole positive sizes, rounded up to whole fp32 numbers (4 bytes), sorted, no repeats."""
    if sizes_bytes is None:
        return list(DEFAULT_SIZES_BYTES)
    if isinstance(sizes_bytes, (int, str)) or not isinstance(sizes_bytes, Sequence):
        raise TypeError(
            f"sizes_bytes must be a list of sizes in bytes such as [4, 4096, 2**20], got {sizes_bytes!r}"
        )
    bad = [s for s in sizes_bytes if not _whole(s, 1, 2**62)]
    if bad or not sizes_bytes or len(sizes_bytes) > 64:
        raise ValueError(
            f"sizes_bytes must hold 1 to 64 whole numbers of bytes >= 1; these are not: {bad[:3]}"
        )
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
            f"backend='nccl' needs CUDA with one GPU per process ({world_size}); this machine has "
            f"{gpus}. Use backend='gloo' (CPU) or fewer processes."
        )
    return backend


def _check_memory(sizes: list[int], world_size: int, backend: str) -> None:
    """Refuse messages that would not fit: every process holds all buffers plus scratch."""
    import torch

    from brrrlib import machine

    dev = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    processes = 1 if backend == "nccl" else world_size  # each GPU holds one process's buffers

    def needed(top: int) -> int:  # the sizes up to ``top``, and scratch as large as it
        return processes * (sum(s for s in sizes if s <= top) + _SCRATCH_COPIES * top)

    need, have = needed(max(sizes)), machine.available_memory_bytes(dev)
    if need > _MEMORY_SHARE * have:
        fits = [s for s in sizes if needed(s) <= _MEMORY_SHARE * have]
        advice = (
            f"keep sizes up to {_fmt.binary_bytes(max(fits))}" if fits else "use fewer processes"
        )
        raise ValueError(
            f"sizes_bytes asks for messages up to {_fmt.binary_bytes(max(sizes))}: {processes} "
            f"process(es) x (all buffers + {_SCRATCH_COPIES} x the largest as scratch) need about "
            f"{_fmt.binary_bytes(need)}, and this machine has {_fmt.binary_bytes(have)} available "
            f"on {dev.type} (half of it is the limit). Drop the largest sizes ({advice}) or close "
            "other programs."
        )


# ------------------------------------------------------------------ under torchrun


def _size(text: str) -> int:
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text.strip()[-1:].upper(), 1)
    number = text.strip()[:-1] if scale > 1 else text.strip()
    return int(float(number) * scale)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m brrrlib.distributed",
        description="Collective benchmarks of the brrr course; run under torchrun "
        "(torchrun --standalone --nproc-per-node=2 -m brrrlib.distributed all-reduce).",
    )
    sub = parser.add_subparsers(dest="job", required=True)
    for name, helptext in (
        ("all-reduce", "all-reduce time vs message size"),
        ("data-parallel", "DDP steps: compute, all-reduce, overlap"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--budget-s", type=float, default=2.0 if name == "all-reduce" else 4.0)
        p.add_argument("--timeout-s", type=float, default=600.0)
        p.add_argument("--backend", choices=("gloo", "nccl"), default=None)
        p.add_argument("--out", help="save the result as JSON (read it with distributed.load)")
        if name == "all-reduce":
            p.add_argument("--sizes", help="bytes, comma-separated; K, M, G = 1024, 1024^2, 1024^3")
        else:
            p.add_argument("--batches", help="samples per process, comma-separated")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m brrrlib.distributed {all-reduce,data-parallel}``, one rank under torchrun."""
    args = _parser().parse_args(argv)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print(
            "run this under torchrun, which starts the processes: torchrun --standalone "
            f"--nproc-per-node=2 -m brrrlib.distributed {args.job}",
            file=sys.stderr,
        )
        return 2
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    backend = _backend(args.backend, local)
    timing = (local, backend, args.budget_s, args.timeout_s)
    if args.job == "all-reduce":
        sizes = _check_sizes([_size(x) for x in args.sizes.split(",")] if args.sizes else None)
        _check_memory(sizes, local, backend)
        job = _job("all_reduce", *timing, sizes_bytes=sizes)
    else:
        batches = _check_batches(
            [int(b) for b in args.batches.split(",")] if args.batches else None
        )
        job = _job("data_parallel", *timing, batches=batches, model=dict(DEFAULT_MODEL))
    job["launcher"] = "torchrun"
    job["deadline_unix"] = time.time() + args.timeout_s
    _collectives_worker._start_watchdog(None, job["deadline_unix"])
    result = _collectives_worker.run_job(job)
    if result is not None:  # rank 0
        shown = (CollectiveSweep if args.job == "all-reduce" else DataParallelRun).from_dict(result)
        print(shown)
        if args.out:
            Path(args.out).write_text(json.dumps(shown.to_dict()))
    return 0
