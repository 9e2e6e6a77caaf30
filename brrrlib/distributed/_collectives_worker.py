"""What each process of a collective benchmark runs, under torch's elastic launcher or torchrun."""

from __future__ import annotations

import contextlib
import copy
import datetime
import json
import math
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = [
    "EXIT_DEADLINE",
    "EXIT_ERROR",
    "EXIT_PARENT_GONE",
    "EXIT_PEER_LOST",
    "MODES",
    "main",
    "mlp",
    "run_job",
]

# Exit codes the launcher reads (0 is success).
EXIT_ERROR = 1
EXIT_PARENT_GONE = 4
EXIT_DEADLINE = 5
EXIT_PEER_LOST = 6

#: A timed block of calls lasts at least this long, so the clock and the
#: skew between ranks leaving the barrier are small against it.
_MIN_BLOCK_S = {"all_reduce": 2e-3, "data_parallel": 5e-3}
_MAX_CALLS_PER_BLOCK = 2000
#: How often the watchdog looks at the parent and the deadline.
_WATCH_EVERY_S = 0.2
#: Words in an error that mean another rank went away in the middle of a collective.
_PEER_LOST = (
    "connection closed",
    "connection reset",
    "broken pipe",
    "timed out",
    "timeout",
    "socket closed",
    "connection refused",
    "peer",
    "end of file",
)


def main(argv: list[str] | None = None) -> int:
    """Run one rank of the job in ``JOB.json`` (the launcher starts one process a rank)."""
    global _STATUS_PATH
    args = sys.argv[1:] if argv is None else argv
    job_path = Path(args[0])
    job = json.loads(job_path.read_text())
    _STATUS_PATH = job_path.with_name(f"rank{os.environ.get('RANK', '0')}.status")
    _start_watchdog(job["parent_pid"], float(job["deadline_unix"]))
    try:
        result = run_job(job)
    except Exception as err:  # noqa: BLE001 -- the launcher reads the code and this text
        text = f"{type(err).__name__}: {err}"
        print(f"brrr worker rank {os.environ.get('RANK')}: {text}", file=sys.stderr)
        lost = any(words in text.lower() for words in _PEER_LOST)
        return EXIT_PEER_LOST if lost else EXIT_ERROR
    if result is not None:
        out = job_path.with_name("result.json")
        tmp = out.with_suffix(".partial")
        tmp.write_text(json.dumps(result))
        tmp.replace(out)
    return 0


def run_job(job: dict[str, Any]) -> dict[str, Any] | None:
    """Join the process group, run ``job["kind"]``, leave the group; rank 0 returns the result."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(job.get("threads", 1)))  # 1.
    dev = _join(job, dist, torch)  # 2.
    try:
        _status(f"running the {job['kind'].replace('_', ' ')} job")
        measure = {"all_reduce": _all_reduce_sweep, "data_parallel": _data_parallel}[job["kind"]]
        result = measure(job, dist, torch, dev)  # 3.
        result.update(_facts(job, dist, torch, dev))
        result["verified"] = _verify(dist, torch, dev)  # 4.
        _status("done")
        return result if dist.get_rank() == 0 else None
    finally:
        dist.destroy_process_group()


def _join(job: dict[str, Any], dist: Any, torch: Any) -> Any:
    """2. The process group, from the environment (the launcher's store at MASTER_PORT)."""
    backend = job["backend"]
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cpu")
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        kwargs["device_id"] = dev
    _status("initialising the process group")
    dist.init_process_group(
        backend, timeout=datetime.timedelta(seconds=float(job["group_timeout_s"])), **kwargs
    )
    return dev


def _facts(job: dict[str, Any], dist: Any, torch: Any, dev: Any) -> dict[str, Any]:
    """Where it ran: backend, world size, hosts (all ranks' host names), torch version."""
    hosts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(hosts, socket.gethostname())
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    return {
        "backend": dist.get_backend(),
        "world_size": dist.get_world_size(),
        "hosts": hosts,
        "device": dev.type,
        "device_name": device_name,
        "threads_per_process": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "launcher": job.get("launcher", "torchrun"),
    }


def _verify(dist: Any, torch: Any, dev: Any) -> bool:
    x = torch.full((4,), float(dist.get_rank() + 1), device=dev)
    dist.all_reduce(x)
    n = dist.get_world_size()
    return bool((x == n * (n + 1) / 2).all())


def _sync(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _agree(dist: Any, torch: Any, values: list[float]) -> list[float]:
    """Every rank's values replaced by the largest across ranks: counts all ranks agree on."""
    t = torch.tensor(values, dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.cpu().tolist()


def _time_block(dist: Any, torch: Any, dev: Any, call: Any, calls: int) -> float:
    """Seconds per call of one block: barrier, sync, ``calls`` calls, sync."""
    dist.barrier()
    _sync(torch, dev)
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    _sync(torch, dev)
    return (time.perf_counter() - t0) / calls


def _plan(job: dict[str, Any], per_call_s: list[float]) -> tuple[list[int], int]:
    """Calls per block (each block >= the minimum) and rounds (the budget, within bounds)."""
    floor_s = _MIN_BLOCK_S[job["kind"]]
    calls = [
        max(1, min(_MAX_CALLS_PER_BLOCK, math.ceil(floor_s / max(s, 1e-9)))) for s in per_call_s
    ]
    round_s = sum(c * s for c, s in zip(calls, per_call_s, strict=True))
    rounds = int(job["budget_s"] / max(round_s, 1e-9))
    return calls, max(int(job["min_rounds"]), min(int(job["max_rounds"]), rounds))


def _rounds(
    job: dict[str, Any], dist: Any, torch: Any, dev: Any, cases: list[tuple[str, Any]]
) -> tuple[list[list[float]], list[int]]:
    """Time every ``(name, call)`` of ``cases`` in rounds: per case its samples, and calls per block."""
    estimates = []
    for name, call in cases:  # 1.
        _status(f"warming up: {name}")
        for _ in range(3):
            call()
        estimates.append(_time_block(dist, torch, dev, call, 3))
    calls, rounds = _plan(job, _agree(dist, torch, estimates))
    samples = torch.zeros(rounds, len(cases), dtype=torch.float64)
    for r in range(rounds):  # 2.
        _status(f"{job['kind'].replace('_', '-')} round {r + 1}/{rounds}")
        for i in range(len(cases)) if r % 2 == 0 else reversed(range(len(cases))):
            samples[r, i] = _time_block(dist, torch, dev, cases[i][1], calls[i])
    worst = torch.tensor(_agree(dist, torch, samples.flatten().tolist()), dtype=torch.float64)  # 3.
    return worst.reshape(rounds, len(cases)).T.tolist(), calls


# ------------------------------------------------------------------ the all-reduce sweep


def _all_reduce_sweep(job: dict[str, Any], dist: Any, torch: Any, dev: Any) -> dict[str, Any]:
    """Time all-reduce over each message size, in rounds that visit every size (:func:`_rounds`)."""
    sizes = [int(n) for n in job["sizes_bytes"]]
    bufs = [torch.zeros(max(1, n // 4), dtype=torch.float32, device=dev) for n in sizes]
    cases = [
        (f"the all-reduce of {4 * b.numel()} bytes", lambda b=b: dist.all_reduce(b)) for b in bufs
    ]
    table, calls = _rounds(job, dist, torch, dev, cases)
    return {
        "kind": "all_reduce",
        "sizes_bytes": [4 * b.numel() for b in bufs],
        "samples_s": table,
        "calls_per_sample": calls,
        "dtype": "float32",
    }


# ------------------------------------------------------------------ data-parallel steps

#: The three ways a step is run, in the order the result lists them.
MODES = ("compute only", "all-reduce after backward", "overlapped buckets")


def mlp(d_in: int, hidden: int, depth: int, d_out: int) -> Any:
    """The data-parallel example: ``depth`` hidden layers of ``hidden`` units with ReLU."""
    import torch

    layers: list[Any] = []
    width = d_in
    for _ in range(depth):
        layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
        width = hidden
    layers.append(torch.nn.Linear(width, d_out))
    return torch.nn.Sequential(*layers)


def _data_parallel(job: dict[str, Any], dist: Any, torch: Any, dev: Any) -> dict[str, Any]:
    """Time training steps of one small model at several batch sizes per process."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    shape = job["model"]
    torch.manual_seed(0)  # 1. same weights on every rank
    base = mlp(**shape).to(dev)
    params = sum(p.numel() for p in base.parameters())
    grad_mb = params * 4 / 2**20  # fp32 gradients
    one = DDP(copy.deepcopy(base), bucket_cap_mb=2 * grad_mb + 1)
    many = DDP(copy.deepcopy(base), bucket_cap_mb=grad_mb / 8)
    opts = {id(m): torch.optim.SGD(m.parameters(), lr=1e-6) for m in (one, many)}
    torch.manual_seed(1 + dist.get_rank())  # each rank its own data, as in real training
    batches = [int(b) for b in job["batches"]]
    inputs = [torch.randn(b, shape["d_in"], device=dev) for b in batches]
    grads = torch.zeros(params, device=dev)

    def step(model: Any, x: Any, sync: bool) -> None:
        opts[id(model)].zero_grad(set_to_none=True)
        with contextlib.nullcontext() if sync else model.no_sync():
            model(x).square().mean().backward()
        opts[id(model)].step()

    modes = {MODES[0]: (one, False), MODES[1]: (one, True), MODES[2]: (many, True)}  # 2.
    cases = [
        (f"batch {len(x)}, {mode}", lambda m=model, x=x, s=sync: step(m, x, s))
        for x in inputs
        for mode, (model, sync) in modes.items()
    ]
    cases.append(("the gradient all-reduce", lambda: dist.all_reduce(grads)))
    table, _calls = _rounds(job, dist, torch, dev, cases)  # 3.
    return {
        "kind": "data_parallel",
        "batches": batches,
        "modes": list(modes),
        "samples_s": {
            mode: [table[i * len(modes) + k] for i in range(len(batches))]
            for k, mode in enumerate(modes)
        },
        "allreduce_samples_s": table[-1],
        "params": params,
        "grad_bytes": int(grads.numel() * grads.element_size()),
        "buckets": {MODES[1]: _buckets(one), MODES[2]: _buckets(many)},
        "model": dict(shape),
    }


def _buckets(model: Any) -> int:
    """How many gradient buckets DDP formed (0 when this torch does not say)."""
    with contextlib.suppress(Exception):
        data = model._get_ddp_logging_data()
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        return len([s for s in str(sizes).split(",") if s.strip()])
    return 0


# ------------------------------------------------------------------ staying bounded


#: Where :func:`main` says what this rank is doing (None under torchrun: nobody reads it).
_STATUS_PATH: Path | None = None


def _status(text: str) -> None:
    """What this rank is doing, for the launcher's message if something goes wrong."""
    if _STATUS_PATH is not None:
        with contextlib.suppress(OSError):
            _STATUS_PATH.write_text(text)


def _start_watchdog(parent_pid: int | None, deadline_unix: float) -> None:
    """End this process when its parent is gone or its deadline has passed."""
    parent = int(parent_pid) if parent_pid else None

    def watch() -> None:
        while True:
            if parent is not None and os.getppid() != parent:
                os._exit(EXIT_PARENT_GONE)
            if time.time() > deadline_unix:
                print("brrr worker: deadline passed, exiting", file=sys.stderr, flush=True)
                os._exit(EXIT_DEADLINE)
            time.sleep(_WATCH_EVERY_S)

    threading.Thread(target=watch, name="brrr-watchdog", daemon=True).start()
