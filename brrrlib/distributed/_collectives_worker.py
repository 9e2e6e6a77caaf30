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

import torch
import torch.distributed as dist

__all__ = ["EXIT_DEADLINE", "MODES", "main", "mlp", "run_job", "watchdog"]

#: The exit code of a rank whose deadline passed: the launcher reads it as a timeout.
EXIT_DEADLINE = 5
#: The three ways a data-parallel step is run, in the order the result lists them.
MODES = ("compute only", "all-reduce after backward", "overlapped buckets")
#: Where a rank says what it does: stderr under the local launcher (quoted on failure), else none.
_LOG: Any = None


def main(argv: list[str] | None = None) -> int:
    """Run one rank of the job in ``JOB.json``; rank 0 writes ``result.json`` beside it."""
    global _LOG
    _LOG, job_path = sys.stderr, Path((sys.argv[1:] if argv is None else argv)[0])
    job = json.loads(job_path.read_text())
    watchdog(job["parent_pid"], job["deadline_unix"])
    result = run_job(job)
    if result is not None:
        job_path.with_name("result.json").write_text(json.dumps(result))
    return 0


def watchdog(parent_pid: int | None, deadline_unix: float) -> None:
    """End this process when its parent is gone (no orphan outlives a killed kernel) or at the deadline."""

    def watch() -> None:
        while parent_pid is None or os.getppid() == parent_pid:
            if time.time() > deadline_unix:
                os._exit(EXIT_DEADLINE)
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="brrr-watchdog", daemon=True).start()


def _say(text: str) -> None:
    if _LOG is not None:  # each rank's own log file: the launcher quotes its tail on a failure
        print(text, file=_LOG, flush=True)


def run_job(job: dict[str, Any]) -> dict[str, Any] | None:
    """Join the process group, run ``job["kind"]``, leave the group; rank 0 returns the result."""
    torch.set_num_threads(int(job["threads"]))
    dev, device_id = torch.device("cpu"), None
    if job["backend"] == "nccl":
        dev = device_id = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    _say("init_process_group")
    timeout = datetime.timedelta(seconds=float(job["group_timeout_s"]))
    dist.init_process_group(job["backend"], timeout=timeout, device_id=device_id)
    try:
        measure = {"all_reduce": _all_reduce_sweep, "data_parallel": _data_parallel}[job["kind"]]
        result = {**measure(job, dev), **_facts(job, dev)}
        _say("done")
        return result if dist.get_rank() == 0 else None
    finally:
        dist.destroy_process_group()


def _facts(job: dict[str, Any], dev: torch.device) -> dict[str, Any]:
    """Where it ran (backend, world size, all ranks' hosts...), and whether the sums were right."""
    n = dist.get_world_size()
    hosts: list[Any] = [None] * n
    dist.all_gather_object(hosts, socket.gethostname())
    x = torch.full((4,), float(dist.get_rank() + 1), device=dev)
    dist.all_reduce(x)  # every rank's rank + 1: n (n + 1) / 2
    return {
        "verified": bool((x == n * (n + 1) / 2).all()),
        "backend": dist.get_backend(),
        "world_size": n,
        "hosts": hosts,
        "device": dev.type,
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "threads_per_process": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "launcher": job["launcher"],
    }


def _agree(values: Any, dev: torch.device) -> torch.Tensor:
    """Every rank's values replaced by the largest across ranks: numbers all ranks agree on."""
    t = torch.as_tensor(values, dtype=torch.float64).to(dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.cpu()


def _time_block(dev: torch.device, call: Any, calls: int) -> float:
    """Seconds per call of one block: barrier, sync, ``calls`` calls, sync."""
    sync = torch.cuda.synchronize if dev.type == "cuda" else lambda: None
    dist.barrier()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    return (time.perf_counter() - t0) / calls


def _rounds(
    job: dict[str, Any], dev: torch.device, cases: list[tuple[str, Any]]
) -> tuple[list[list[float]], list[int]]:
    """Time every ``(name, call)`` of ``cases`` in rounds: per case its samples, and calls per block."""
    for name, call in cases:  # 1. warm up, then estimate each case's time per call
        _say(f"warm-up {name}")
        _time_block(dev, call, 3)
    estimates = [_time_block(dev, call, 3) for _, call in cases]
    # 2. calls per block (a block long enough that the clock and the skew of ranks leaving the
    # barrier are small against it; up to 2000 calls), and rounds (the budget, within bounds)
    floor_s = 2e-3 if job["kind"] == "all_reduce" else 5e-3
    per_call = [max(s, 1e-9) for s in _agree(estimates, dev).tolist()]
    calls = [max(1, min(2000, math.ceil(floor_s / s))) for s in per_call]
    round_s = sum(c * s for c, s in zip(calls, per_call, strict=True))
    rounds = max(job["min_rounds"], min(job["max_rounds"], int(job["budget_s"] / round_s)))
    samples = torch.zeros(rounds, len(cases), dtype=torch.float64)
    _say(f"rounds {rounds}")
    for r in range(rounds):  # 3. every case once a round, in alternating order
        for i in range(len(cases)) if r % 2 == 0 else reversed(range(len(cases))):
            samples[r, i] = _time_block(dev, cases[i][1], calls[i])
    return _agree(samples, dev).T.tolist(), calls  # 4. the slowest rank's times


def _all_reduce_sweep(job: dict[str, Any], dev: torch.device) -> dict[str, Any]:
    """Time all-reduce over each message size, in rounds that visit every size."""
    bufs = [torch.zeros(n // 4, device=dev) for n in job["sizes_bytes"]]  # multiples of 4 bytes
    cases = [(f"{4 * b.numel()} bytes", lambda b=b: dist.all_reduce(b)) for b in bufs]
    samples, calls = _rounds(job, dev, cases)
    return {"sizes_bytes": job["sizes_bytes"], "samples_s": samples, "calls_per_sample": calls}


def mlp(d_in: int, hidden: int, depth: int, d_out: int) -> torch.nn.Sequential:
    """The data-parallel example: ``depth`` hidden layers of ``hidden`` units with ReLU."""
    widths = [d_in] + [hidden] * depth
    layers: list[torch.nn.Module] = []
    for a, b in zip(widths, widths[1:], strict=False):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(widths[-1], d_out))


def _data_parallel(job: dict[str, Any], dev: torch.device) -> dict[str, Any]:
    """Time training steps of one small model at several batch sizes per process."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)  # 1. the same weights on every rank
    base = mlp(**job["model"]).to(dev)
    params = sum(p.numel() for p in base.parameters())
    grad_mb = params * 4 / 2**20  # fp32 gradients
    one = DDP(copy.deepcopy(base), bucket_cap_mb=2 * grad_mb + 1)
    many = DDP(copy.deepcopy(base), bucket_cap_mb=grad_mb / 8)
    opts = {id(m): torch.optim.SGD(m.parameters(), lr=1e-6) for m in (one, many)}
    torch.manual_seed(1 + dist.get_rank())  # each rank its own data, as in real training
    inputs = [torch.randn(b, job["model"]["d_in"], device=dev) for b in job["batches"]]
    grads = torch.zeros(params, device=dev)

    def step(model: Any, x: torch.Tensor, sync: bool) -> None:
        opts[id(model)].zero_grad(set_to_none=True)
        with contextlib.nullcontext() if sync else model.no_sync():
            model(x).square().mean().backward()
        opts[id(model)].step()

    modes = dict(zip(MODES, ((one, False), (one, True), (many, True)), strict=True))  # 2.
    cases = [
        (f"batch {len(x)}, {mode}", lambda m=model, x=x, s=sync: step(m, x, s))
        for x in inputs
        for mode, (model, sync) in modes.items()
    ]
    cases.append(("all_reduce(grads)", lambda: dist.all_reduce(grads)))
    table, _calls = _rounds(job, dev, cases)  # 3.
    return {
        "batches": [len(x) for x in inputs],
        "samples_s": {m: table[k : len(table) - 1 : len(MODES)] for k, m in enumerate(MODES)},
        "allreduce_samples_s": table[-1],
        "params": params,
        "grad_bytes": 4 * params,
        "buckets": {MODES[1]: _buckets(one), MODES[2]: _buckets(many)},
        "model": job["model"],
    }


def _buckets(model: Any) -> int:
    """How many gradient buckets DDP formed (0 when this torch does not say)."""
    with contextlib.suppress(Exception):
        data = model._get_ddp_logging_data()
        sizes = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
        return len([s for s in str(sizes).split(",") if s.strip()])
    return 0


if __name__ == "__main__":  # each rank, started by the launcher: python _collectives_worker.py JOB
    sys.exit(main())
