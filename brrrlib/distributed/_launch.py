"""Local processes for a collective benchmark: started, watched, and always cleaned up.

:func:`run` starts ``world_size`` Python processes on this machine, each
running :mod:`brrrlib.distributed._collectives_worker` as one rank, waits for them with a
deadline, and returns rank 0's result. It is what ``torchrun
--nproc-per-node=N`` does for a script, reduced to what a notebook needs:

* **The rendezvous**: every process gets ``MASTER_ADDR=127.0.0.1`` and a
  ``MASTER_PORT``; rank 0 listens there and the others connect. With
  ``port=None`` a free port is picked (and picked again if another program
  takes it first); a port you name that is taken is refused before anything
  starts.
* **Never a hung kernel**: the wait polls every process and the clock. When
  one process fails, the others are stopped at once (a collective cannot
  finish without all its ranks) and the error says which rank, how it
  ended, what it was doing and the last lines it wrote. Past ``timeout_s``,
  every process is stopped and :class:`GroupTimeout` says so.
* **No orphans**: :class:`LocalGroup` is a context manager that stops its
  processes on every way out (result, error, Ctrl-C or *Kernel > Interrupt*);
  an ``atexit`` hook stops any still running when Python exits; and each
  worker's own watchdog ends it if this process disappears without either
  (a killed kernel) or when its deadline passes.

Stopping is SIGTERM, then SIGKILL after a grace period, each worker in its
own session so that a Ctrl-C meant for the notebook reaches only the notebook.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from brrrlib.distributed import _collectives_worker as worker

__all__ = ["DistributedError", "GroupTimeout", "LocalGroup", "PortInUse", "WorkerDied", "run"]

#: Seconds a stopped worker gets to exit after SIGTERM before SIGKILL.
_GRACE_S = 2.0
#: How often the wait looks at the processes.
_POLL_S = 0.02
#: A worker's own deadline is this much later than the launcher's, so the
#: launcher, which can say what happened, always acts first.
_WORKER_EXTRA_S = 5.0
#: Tries with a fresh free port when another program took the one picked.
_PORT_TRIES = 3
#: Lines of a failed worker's output quoted in the error.
_TAIL_LINES = 8
#: What each worker process runs (``python -c``, not ``-m``: the package imports the
#: worker module first, and ``-m`` would run a second copy of it, with a warning).
_WORKER = "import sys; from brrrlib.distributed._collectives_worker import main; sys.exit(main())"


class DistributedError(RuntimeError):
    """A group of benchmark processes failed; the message says what happened and what to do."""


class PortInUse(DistributedError):
    """The rendezvous port is taken by another program."""


class WorkerDied(DistributedError):
    """A worker process ended early (killed, crashed, or lost its peers); the others were stopped."""


class GroupTimeout(DistributedError, TimeoutError):
    """The group did not finish within its ``timeout_s``; every process was stopped."""


_LIVE: weakref.WeakSet[LocalGroup] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """When Python exits, stop every group still running (the kernel shuts down, say)."""
    for group in list(_LIVE):
        group.stop()


def run(
    job: dict[str, Any], world_size: int, *, timeout_s: float, port: int | None, what: str
) -> dict[str, Any]:
    """Run ``job`` on ``world_size`` local processes; rank 0's result, or a clear error.

    ``what`` names the job in messages ("the all-reduce sweep"). With
    ``port=None`` a port another program grabs between picking and
    listening is picked again, up to 3 times.
    """
    if port is not None:
        _check_port_free(port)
    for attempt in range(1 if port is not None else _PORT_TRIES):
        with LocalGroup(
            job, world_size, timeout_s=timeout_s, port=port or _free_port(), what=what
        ) as group:
            try:
                return group.wait()
            except PortInUse:
                if port is not None or attempt == _PORT_TRIES - 1:
                    raise
    raise AssertionError("unreachable")  # pragma: no cover


class LocalGroup:
    """``world_size`` worker processes on this machine running one job (a context manager).

    ``with LocalGroup(job, 2, timeout_s=60, port=29500, what="...") as g:
    result = g.wait()``. Leaving the block stops every process, whatever the
    way out. ``pids`` lists the processes (tests use it to kill one).
    """

    def __init__(
        self, job: dict[str, Any], world_size: int, *, timeout_s: float, port: int, what: str
    ) -> None:
        self.job, self.world_size, self.port, self.what = dict(job), world_size, port, what
        self.timeout_s = timeout_s
        self.procs: list[subprocess.Popen] = []
        self.dir: Path | None = None
        self.deadline = math.inf

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids, rank order."""
        return [p.pid for p in self.procs]

    def __enter__(self) -> LocalGroup:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Write the job to a temporary folder and start one process per rank."""
        self.dir = Path(tempfile.mkdtemp(prefix="brrr-group-"))
        self.deadline = time.monotonic() + self.timeout_s
        self.job.update(
            out=str(self.dir / "result.json"),
            deadline_unix=time.time() + self.timeout_s + _WORKER_EXTRA_S,
        )
        (self.dir / "job.json").write_text(json.dumps(self.job))
        _LIVE.add(self)
        for rank in range(self.world_size):
            log = open(self.dir / f"rank{rank}.log", "wb")  # closed below, once the child has it
            try:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", _WORKER, str(self.dir / "job.json")],
                        env=self._env(rank),
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                        cwd=self.dir,
                    )
                )
            finally:
                log.close()

    def _env(self, rank: int) -> dict[str, str]:
        threads = str(self.job.get("threads", 1))
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        return {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(self.world_size),
            "LOCAL_WORLD_SIZE": str(self.world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(self.port),
            "OMP_NUM_THREADS": threads,
            "BRRR_PARENT_PID": str(os.getpid()),
            "BRRR_STATUS_FILE": str(self.dir / f"rank{rank}.status"),
            "PYTHONPATH": path,
        }

    def wait(self) -> dict[str, Any]:
        """Rank 0's result once every process exits cleanly; else stop them all and raise.

        Polls every 20 ms, so a failure or the deadline is acted on at once.
        """
        while True:
            codes = [p.poll() for p in self.procs]
            if all(c == 0 for c in codes):
                return json.loads((self.dir / "result.json").read_text())
            failed = [rank for rank, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                message = self._failure(failed, codes)  # read the status files before stopping
                self.stop()
                raise message
            if time.monotonic() > self.deadline:
                doing = self._doing()
                self.stop()
                raise GroupTimeout(
                    f"{self.what} did not finish within timeout_s={self.timeout_s:g} s, so its "
                    f"{self.world_size} processes were stopped (they were {doing}). Raise "
                    "timeout_s, or measure fewer or smaller messages; on a busy machine, close "
                    "other programs first."
                )
            time.sleep(_POLL_S)

    def stop(self) -> None:
        """Stop every process still running (SIGTERM, then SIGKILL), remove the folder."""
        alive = [p for p in self.procs if p.poll() is None]
        for p in alive:
            _signal(p, p.terminate)
        end = time.monotonic() + _GRACE_S
        for p in alive:
            try:
                p.wait(timeout=max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(p, p.kill)
                p.wait()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        _LIVE.discard(self)

    # -- messages -----------------------------------------------------------------
    def _doing(self) -> str:
        states = [self._status(r) for r in range(self.world_size)]
        if len(set(states)) == 1:
            return f"all {states[0]}"
        return "; ".join(f"rank {r}: {s}" for r, s in enumerate(states))

    def _status(self, rank: int) -> str:
        with contextlib.suppress(OSError):
            return (self.dir / f"rank{rank}.status").read_text().strip() or "starting"
        return "starting Python and importing torch"

    def _tail(self, rank: int) -> str:
        with contextlib.suppress(OSError):
            lines = (self.dir / f"rank{rank}.log").read_text(errors="replace").splitlines()
            lines = [line for line in lines if line.strip()][-_TAIL_LINES:]
            return "\n".join(f"    {line}" for line in lines)
        return ""

    def _failure(self, failed: list[int], codes: list[int | None]) -> DistributedError:
        """The error for the first rank that failed for its own reasons (not a lost peer)."""
        own = [r for r in failed if codes[r] != worker.EXIT_PEER_LOST] or failed
        rank = own[0]
        code = codes[rank]
        if code == worker.EXIT_PORT_IN_USE:
            return PortInUse(_port_message(self.port))
        why = ""
        if code is not None and code < 0:
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
        others = self.world_size - 1
        stopped = f"the other {others} process{'es were' if others > 1 else ' was'} stopped"
        tail = self._tail(rank)
        last = f" Its last lines:\n{tail}" if tail else ""
        return WorkerDied(
            f"worker rank {rank} (pid {self.procs[rank].pid}) of {self.what} {how} while "
            f"{self._status(rank)}{why}; {stopped}, since a collective cannot finish without "
            f"every rank. Run it again; if it fails the same way, the worker's output says why."
            f"{last}"
        )


def _signal(p: subprocess.Popen, how: Any) -> None:
    """``p.terminate`` (SIGTERM) or ``p.kill`` (SIGKILL), when the process is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        how()


def _free_port() -> int:
    """A port nobody listens on right now (the OS picks one when asked for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check_port_free(port: int) -> None:
    """Refuse a port another program listens on, before starting anything."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                raise PortInUse(_port_message(port)) from None
            raise ValueError(
                f"port={port} cannot be used here ({err.strerror}); pass a port between 1024 "
                "and 65535, or None to let the library pick a free one"
            ) from None


def _port_message(port: int) -> str:
    return (
        f"port={port} is already in use on this machine (another torchrun, an earlier run that "
        "is still going, or another program listens there). Pass port=None to let the library "
        f"pick a free port, or stop the program on port {port} (`ss -ltnp | grep :{port}` shows "
        "it on Linux)."
    )
