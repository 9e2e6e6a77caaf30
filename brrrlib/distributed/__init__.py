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

import torch
import torch.distributed as dist

from brrrlib import _checks, _fmt, machine
from brrrlib.distributed import _collectives_worker, _launch
from brrrlib.distributed._collective_results import CollectiveSweep, DataParallelRun
from brrrlib.distributed._collectives_worker import mlp
from brrrlib.distributed._ladder import (
    BandwidthLadder,
    bandwidth_ladder,
    host_device_copies,
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

#: The data-parallel example: an MLP of 788k parameters (3 MiB of fp32 gradients).
DEFAULT_MODEL = {"d_in": 256, "hidden": 512, "depth": 3, "d_out": 256}
_KINDS = {"all_reduce": CollectiveSweep, "data_parallel": DataParallelRun}


def _cores() -> int:
    """The cores this process may run on (a container's CPU set, where the OS says), at least 1."""
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0))) if affinity else os.cpu_count() or 1


def local_world_sizes() -> tuple[int, ...]:
    """The process counts worth measuring here: 2, and 4 when there are 4 cores or more."""
    return tuple(n for n in (2, 4) if n == 2 or n <= _cores())


def cores_note(world_size: int) -> str:
    """Why ``world_size`` processes would oversubscribe this machine's cores, or ``""``."""
    cores = _cores()
    late = world_size - cores  # always waiting for a core: they time the scheduler, not the link
    return f"{world_size} processes on {cores} cores: {late} wait for a core" if late > 0 else ""


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
    return _run_local("all_reduce", sizes_bytes, world_size, backend, budget_s, timeout_s, port)


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
    return _run_local("data_parallel", batches, world_size, backend, budget_s, timeout_s, port)


def load(path: str | os.PathLike) -> CollectiveSweep | DataParallelRun:
    """Read a result saved by ``python -m brrrlib.distributed ... --out PATH`` (or ``to_dict``)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or data.get("kind") not in _KINDS:
        raise ValueError(f"path={str(path)!r} holds no all_reduce or data_parallel result")
    return _KINDS[data["kind"]].from_dict(data)


def _run_local(kind, what, world_size, backend, budget_s, timeout_s, port) -> Any:
    """``kind`` over ``world_size`` local processes, up to 64 (the arguments checked first)."""
    _checks.positive_int("world_size", world_size, 2, 64)
    if port is not None:  # None: the store binds a free one
        _checks.positive_int("port", port, 1, 65535)
    job = _job(kind, what, world_size, backend, budget_s, timeout_s)
    return _KINDS[kind].from_dict(_launch.run(job, world_size, timeout_s=timeout_s, port=port))


def _job(
    kind: str, what: Any, world_size: int, backend: Any, budget_s: Any, timeout_s: Any
) -> dict:
    """What every rank runs, each argument checked: ``kind`` over ``what`` (sizes, or batches)."""
    _checks.seconds("budget_s", budget_s)
    _checks.seconds("timeout_s", timeout_s)
    backend = _backend(backend, world_size)
    job = {"kind": kind, "backend": backend, "launcher": CollectiveSweep.launcher}
    job |= {"threads": max(1, _cores() // world_size), "budget_s": float(budget_s)}
    job["group_timeout_s"] = max(10.0, min(60.0, timeout_s))
    if kind == "data_parallel":
        batches = _numbers("batches", what, (8, 16, 32, 64, 128, 256), 65536, 16)
        # at least 6 rounds: then a median's 95% interval is narrower than the whole range
        return job | {"batches": batches, "model": DEFAULT_MODEL, "min_rounds": 6, "max_rounds": 20}
    default = (*(4**k for k in range(1, 13)), 2**25)  # 4 B (one fp32) to 16 MiB, 32 MiB
    listed = _numbers("sizes_bytes", what, default, 2**62, 64)
    sizes = sorted({4 * math.ceil(s / 4) for s in listed})  # whole fp32 elements
    # every buffer and scratch, on each GPU for one process, else in host memory for all
    nccl, biggest = backend == "nccl", f"max(sizes_bytes)={_fmt.binary_bytes(sizes[-1])}"
    needed = (1 if nccl else world_size) * (sum(sizes) + 2 * sizes[-1])
    dev = torch.device("cuda", 0) if nccl else torch.device("cpu")
    machine._refuse_over_headroom(needed, dev, biggest, "max(sizes_bytes)")
    return job | {"sizes_bytes": sizes, "min_rounds": 5, "max_rounds": 50}


def _numbers(name: str, value: Any, default: Sequence[int], high: int, most: int) -> list[int]:
    """``value`` sorted, without repeats: a list of 1 to ``most`` whole numbers from 1 to ``high``."""
    if value is None:
        return list(default)
    _checks.kind(name, value, (list, tuple, range), "list")
    _checks.positive_int(f"len({name})", len(value), 1, most)
    return sorted({_checks.positive_int(name, v, 1, high) for v in value})


def _backend(backend: str | None, world_size: int) -> str:
    """gloo on CPUs; nccl when CUDA has one GPU per process (asked for, or by default)."""
    gpus = torch.cuda.device_count()
    nccl_ok = dist.is_available() and dist.is_nccl_available() and gpus >= world_size
    _checks.one_of("backend", backend, (None, "gloo", "nccl"))
    if backend == "nccl" and not nccl_ok:
        raise ValueError(f"backend='nccl' needs {world_size} GPUs, {gpus} here: use backend='gloo'")
    return backend or ("nccl" if nccl_ok else "gloo")


def _sizes(text: str) -> list[int]:
    """``"4,64K,1M"``: whole numbers, K, M and G scaling by 1024, 1024^2 and 1024^3."""
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}
    words = [w.strip().upper() for w in text.split(",")]
    return [int(float(w.rstrip("KMG")) * scale.get(w[-1:], 1)) for w in words]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m brrrlib.distributed {all-reduce,data-parallel}``, one rank under torchrun."""
    parser = argparse.ArgumentParser(prog="python -m brrrlib.distributed", description=__doc__)
    parser.add_argument("job", choices=("all-reduce", "data-parallel"))
    parser.add_argument("--sizes", type=_sizes, metavar="4,64K,1M")
    parser.add_argument("--batches", type=_sizes, metavar="8,16")
    parser.add_argument("--budget-s", type=float, help="seconds of rounds (default 2, or 4)")
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--backend", choices=("gloo", "nccl"), default=None)
    parser.add_argument("--out", metavar="RESULT.json")
    args = parser.parse_args(argv)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        how = f"torchrun --standalone --nproc-per-node=2 -m brrrlib.distributed {args.job}"
        print(f"usage: {how}", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    kind = args.job.replace("-", "_")
    what, budget_s = (args.sizes, 2.0) if kind == "all_reduce" else (args.batches, 4.0)
    job = _job(kind, what, local, args.backend, args.budget_s or budget_s, args.timeout_s)
    job["launcher"] = "torchrun"
    _collectives_worker.watchdog(None, time.time() + args.timeout_s)
    result = _collectives_worker.run_job(job)
    if result is not None:  # rank 0
        shown = _KINDS[kind].from_dict(result)
        print(shown)
        if args.out:
            Path(args.out).write_text(json.dumps(shown.to_dict()))
    return 0
