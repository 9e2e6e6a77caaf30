"""Local processes for a collective benchmark, started by torch's elastic launcher (torchrun's API)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from brrrlib.distributed import _collectives_worker

__all__ = ["GroupTimeout", "PortInUse", "WorkerDied", "run"]


class PortInUse(RuntimeError):
    """The rendezvous port is taken by another program."""


class WorkerDied(RuntimeError):
    """A worker process ended early (killed or crashed); the others were stopped."""


class GroupTimeout(TimeoutError):
    """The group did not finish within its ``timeout_s``; every process was stopped."""


def run(job: dict[str, Any], world_size: int, *, timeout_s: float, port: int | None) -> dict:
    """Run ``job`` on ``world_size`` local processes; rank 0's result, or one of the errors above."""
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, SignalException, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousConnectionError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    folder = Path(tempfile.mkdtemp(prefix="brrr-group-"))
    try:
        job = {**job, "parent_pid": os.getpid(), "deadline_unix": time.time() + timeout_s}
        (folder / "job.json").write_text(json.dumps(job))
        config = LaunchConfig(
            min_nodes=1,
            max_nodes=1,
            nproc_per_node=world_size,
            run_id=folder.name,
            rdzv_backend="c10d",  # torchrun --standalone's
            rdzv_endpoint=f"127.0.0.1:{port or 0}",  # port 0: the store binds a free one
            rdzv_configs={"is_host": True},  # a taken port fails, never joins another's store
            max_restarts=0,
            monitor_interval=0.05,
            local_addr="127.0.0.1",
            logs_specs=DefaultLogsSpecs(log_dir=str(folder / "logs"), redirects=Std.ALL),
            # seconds from SIGTERM to SIGKILL (torch 2.12 and later; before, the agent's 30)
            **({"shutdown_timeout": 2} if hasattr(LaunchConfig, "shutdown_timeout") else {}),
        )
        with _contained():  # each worker runs the module's file as a script: it needs no brrrlib
            elastic_launch(config, sys.executable)(
                _collectives_worker.__file__, str(folder / "job.json")
            )
        return json.loads((folder / "result.json").read_text())
    except ChildFailedError as err:
        raise _failure(err.failures, folder, timeout_s) from None
    except RendezvousConnectionError as err:
        if "EADDRINUSE" not in str(err.__cause__):
            raise
        raise PortInUse(f"port={port} is already in use; port=None picks a free one") from None
    except SignalException as err:  # the launcher has stopped every worker
        if err.sigval == signal.SIGINT:
            raise KeyboardInterrupt from None
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _contained() -> Iterator[None]:
    """The launcher's marks on this process undone: log lines, warnings, signal handlers, env."""
    # the signals on which the launcher stops its workers (its default), restored after a run
    stops = [getattr(signal, s, None) for s in ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")]
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in stops if s and main}
    quiet = {"handlers": [logging.NullHandler()], "propagate": False}
    try:
        with warnings.catch_warnings(), mock.patch.dict(os.environ), contextlib.ExitStack() as on:
            for name in ("torch.distributed.elastic", "torch.distributed.launcher"):
                on.enter_context(mock.patch.multiple(logging.getLogger(name), **quiet))
            warnings.filterwarnings("ignore", module=r"torch\.distributed")
            yield
    finally:
        for s, handler in handlers.items():
            if handler is not None:  # None: set outside Python, cannot be restored
                signal.signal(s, handler)


def _failure(failures: dict, folder: Path, timeout_s: float) -> Exception:
    """The error of the first rank to fail: killed by a foreign signal, else the lowest not stopped."""
    codes = {rank: f.exitcode for rank, f in failures.items()}
    if _collectives_worker.EXIT_DEADLINE in codes.values():
        stopped = f"not done within timeout_s={timeout_s:g}; all were stopped"
        return GroupTimeout(stopped + _tail(folder, 0))
    rank = min(codes, key=lambda r: (codes[r] == -signal.SIGTERM, codes[r] >= 0, r))
    f = failures[rank]
    how = signal.Signals(-f.exitcode).name if f.exitcode < 0 else f"exitcode={f.exitcode}"
    stopped = f"rank {rank} (pid {f.pid}) ended early ({how}); the others were stopped"
    return WorkerDied(stopped + _tail(folder, f.local_rank))


def _tail(folder: Path, local_rank: int, lines: int = 8) -> str:
    """The last lines a worker wrote to stderr (the launcher's log folder keeps them)."""
    for log in folder.glob(f"logs/*/attempt_0/{local_rank}/stderr.log"):
        last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        return "".join(f"\n    {line}" for line in last[-lines:])
    return ""
