"""Local processes for a collective benchmark, started by torch's elastic launcher."""

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

from brrrlib.distributed import _collectives_worker as worker

__all__ = ["DistributedError", "GroupTimeout", "PortInUse", "WorkerDied", "run"]

#: Whole seconds a stopped worker gets to exit after SIGTERM before SIGKILL.
_GRACE_S = 2
#: How often the launcher looks at its workers.
_POLL_S = 0.05
#: Lines of a failed worker's output quoted in the error.
_TAIL_LINES = 8
#: What each worker process runs (``python -c``, not ``-m``: the package imports the
#: worker module first, and ``-m`` would run a second copy of it, with a warning). The
#: folder holding brrrlib goes first on its path, as it is on this one's.
_WORKER = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from brrrlib.distributed._collectives_worker import main; sys.exit(main())"
)
#: The loggers of the launcher, its agent and its rendezvous.
_LOGGERS = ("torch.distributed.elastic", "torch.distributed.launcher")
#: The signals on which the launcher stops its workers (and raises); its own default.
_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


class DistributedError(RuntimeError):
    """A group of benchmark processes failed; the message says what happened and what to do."""


class PortInUse(DistributedError):
    """The rendezvous port is taken by another program."""


class WorkerDied(DistributedError):
    """A worker process ended early (killed, crashed, or lost its peers); the others were stopped."""


class GroupTimeout(DistributedError, TimeoutError):
    """The group did not finish within its ``timeout_s``; every process was stopped."""


def run(
    job: dict[str, Any], world_size: int, *, timeout_s: float, port: int | None, what: str
) -> dict[str, Any]:
    """Run ``job`` on ``world_size`` local processes; rank 0's result, or a clear error."""
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
            monitor_interval=_POLL_S,
            local_addr="127.0.0.1",
            logs_specs=DefaultLogsSpecs(log_dir=str(folder / "logs"), redirects=Std.ALL),
            shutdown_timeout=_GRACE_S,
        )
        code = _WORKER.format(root=str(Path(__file__).resolve().parents[2]))
        with _contained():
            elastic_launch(config, sys.executable)("-c", code, str(folder / "job.json"))
        return json.loads((folder / "result.json").read_text())
    except ChildFailedError as err:
        raise _failure(err.failures, folder, world_size, timeout_s, what) from None
    except RendezvousConnectionError as err:
        if port is None:
            raise
        if "EADDRINUSE" in str(err.__cause__):
            raise PortInUse(_port_message(port)) from None
        raise ValueError(
            f"port={port} cannot be used here ({err.__cause__}); pass a port between 1024 "
            "and 65535, or None to let the rendezvous pick a free one"
        ) from None
    except SignalException as err:  # the launcher has stopped every worker
        if err.sigval == signal.SIGINT:
            raise KeyboardInterrupt from None
        raise DistributedError(
            f"{what} was stopped by {err.sigval.name}, and its {world_size} processes with it"
        ) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _contained() -> Iterator[None]:
    """The launcher's marks on this process undone: log lines, warnings, signal handlers."""
    loggers = [logging.getLogger(name) for name in _LOGGERS]
    saved_loggers = [(lg, lg.propagate, lg.handlers[:]) for lg in loggers]
    main = threading.current_thread() is threading.main_thread()
    sigs = [getattr(signal, name) for name in _SIGNALS if hasattr(signal, name)]
    handlers = {s: signal.getsignal(s) for s in sigs} if main else {}  # None: set outside Python
    env = os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE")
    for lg in loggers:
        lg.handlers, lg.propagate = [logging.NullHandler()], False
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"torch\.distributed")
            yield
    finally:
        for s, handler in handlers.items():
            if handler is not None:
                signal.signal(s, handler)
        if env is None:
            os.environ.pop("TORCHELASTIC_SIGNALS_TO_HANDLE", None)
        else:
            os.environ["TORCHELASTIC_SIGNALS_TO_HANDLE"] = env
        for lg, propagate, lg_handlers in saved_loggers:
            lg.handlers, lg.propagate = lg_handlers, propagate


# ------------------------------------------------------------------ messages


def _failure(
    failures: dict[int, Any], folder: Path, world_size: int, timeout_s: float, what: str
) -> DistributedError:
    """The error for the rank that failed for its own reasons (not stopped, not a lost peer)."""
    codes = {rank: f.exitcode for rank, f in failures.items()}
    if worker.EXIT_DEADLINE in codes.values():
        return GroupTimeout(
            f"{what} did not finish within timeout_s={timeout_s:g} s, so its "
            f"{world_size} processes were stopped (they were {_doing(folder, world_size)}). "
            "Raise timeout_s, or measure fewer or smaller messages; on a busy machine, close "
            "other programs first."
        )
    stopped = (worker.EXIT_PEER_LOST, -signal.SIGTERM)  # by the launcher, or for a peer
    rank = min((r for r, c in codes.items() if c not in stopped), default=min(codes))
    code = codes[rank]
    why = ""
    if code < 0:
        how = f"was killed by {signal.Signals(-code).name}"
        if code == -getattr(signal, "SIGKILL", 9):
            why = (
                " (SIGKILL is also how the system ends a process when memory runs out: "
                "if nobody killed it, measure smaller messages)"
            )
    elif code == worker.EXIT_PEER_LOST:
        how = "lost its connection to the other processes"
    else:
        how = f"exited with code {code}"
    others = world_size - 1
    stopped_others = f"the other {others} process{'es were' if others > 1 else ' was'} stopped"
    tail = _tail(folder, failures[rank].local_rank)
    last = f" Its last lines:\n{tail}" if tail else ""
    return WorkerDied(
        f"worker rank {rank} (pid {failures[rank].pid}) of {what} {how} while "
        f"{_status(folder, rank)}{why}; {stopped_others}, since a collective cannot finish "
        "without every rank. Run it again; if it fails the same way, the worker's output says "
        f"why.{last}"
    )


def _status(folder: Path, rank: int) -> str:
    """What ``rank`` last said it was doing."""
    with contextlib.suppress(OSError):
        return (folder / f"rank{rank}.status").read_text().strip() or "starting"
    return "starting Python and importing torch"


def _doing(folder: Path, world_size: int) -> str:
    states = [_status(folder, r) for r in range(world_size)]
    if len(set(states)) == 1:
        return f"all {states[0]}"
    return "; ".join(f"rank {r}: {s}" for r, s in enumerate(states))


def _tail(folder: Path, local_rank: int) -> str:
    """The last lines a worker wrote to stderr (the launcher's log folder keeps them)."""
    for log in folder.glob(f"logs/*/attempt_0/{local_rank}/stderr.log"):
        lines = log.read_text(errors="replace").splitlines()
        lines = [line for line in lines if line.strip()][-_TAIL_LINES:]
        return "\n".join(f"    {line}" for line in lines)
    return ""


def _port_message(port: int) -> str:
    return (
        f"port={port} is already in use on this machine (another torchrun, an earlier run that "
        "is still going, or another program listens there). Pass port=None to let the library "
        f"pick a free port, or stop the program on port {port} (`ss -ltnp | grep :{port}` shows "
        "it on Linux)."
    )
