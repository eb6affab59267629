"""Several worker processes under one supervisor (``tickwork worker --processes N``), so a
worker scales to a machine's cores without a process manager.

The supervisor runs no handler and opens no backend: it starts ``N`` child processes (each
a whole worker, ``workers/worker.py``, started with the command it is given), restarts one
that dies, and stops them all. A child is a fresh interpreter (``subprocess``, not
``fork``: the parent holds no connection or thread a child could inherit half-way).

Restarts: a child that exits with a failure or is killed by a signal is started again
after a back-off (1 s, doubling up to 30 s while it keeps dying within 10 s of its start;
back to 1 s once it has lived longer). A child that exits with 0 (``--duration`` elapsed,
``--burst`` found nothing left) has finished and is not restarted; the supervisor exits
once every child has finished.

Shutdown, in this order (SIGTERM or SIGINT to the supervisor):
1. the supervisor stops restarting children;
2. it sends SIGTERM to every child at once; each runs the worker's own shutdown order
   (stop claiming, release claims not started, give running handlers the grace period,
   settle every result);
3. it waits for them: a second signal is passed on (each child then stops at once, its
   running handlers abandoned to their leases), and a child still alive ``stop_timeout_s``
   after the first signal is killed (SIGKILL; its leases expire and its work is claimed
   again).
The exit status is 0 when every child's last exit was 0, else 1.

A child asks the kernel for SIGTERM when the supervisor dies (Linux ``PR_SET_PDEATHSIG``),
so killing the supervisor with SIGKILL does not leave orphaned workers claiming work. A
supervisor that dies between the child's fork and that request sends nothing: the child
then sees it has another parent and exits before it runs anything.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType

log = logging.getLogger("tickwork.supervisor")

_PR_SET_PDEATHSIG = 1
_FIRST_BACKOFF_S = 1.0
_MAX_BACKOFF_S = 30.0
_STABLE_AFTER_S = 10.0
_POLL_S = 0.1


@dataclass
class _Child:
    """One slot of the supervisor: the process now in it and its restart state."""

    index: int
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    backoff_s: float = _FIRST_BACKOFF_S
    restart_at: float | None = None
    finished: bool = False
    last_status: int | None = None


@dataclass
class Supervisor:
    """Runs ``processes`` children, child ``i`` started with ``command(i)``."""

    command: Callable[[int], list[str]]
    processes: int
    stop_timeout_s: float = 60.0
    env: Mapping[str, str] | None = None
    _children: list[_Child] = field(default_factory=list, init=False)
    _signals: int = field(default=0, init=False)
    _stop_deadline: float | None = field(default=None, init=False)

    def run(self) -> int:
        """Start the children and supervise them until they have all exited; the exit
        status (0: every child's last exit was 0)."""
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self._children = [_Child(index) for index in range(self.processes)]
            for child in self._children:
                self._start(child)
            while True:
                self._step(time.monotonic())
                if all(self._done(child) for child in self._children):
                    break
                time.sleep(_POLL_S)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        failed = [c for c in self._children if c.last_status not in (0, None)]
        return 1 if failed else 0

    def _done(self, child: _Child) -> bool:
        """Whether ``child``'s slot is over: its process has exited (and been seen by
        ``_step``) and it has finished, or the supervisor is stopping."""
        return child.process is None and (child.finished or self._signals > 0)

    def _step(self, now: float) -> None:
        """Notice exited children; restart the ones due; kill the ones past the stop's
        deadline."""
        for child in self._children:
            process = child.process
            if process is not None and (status := process.poll()) is not None:
                child.process, child.last_status = None, status
                self._exited(child, status, now)
            if child.restart_at is not None and now >= child.restart_at and not self._signals:
                child.restart_at = None
                self._start(child)
        if self._stop_deadline is not None and now >= self._stop_deadline:
            for child in self._children:
                if child.process is not None and child.process.poll() is None:
                    log.warning("worker process %d did not stop in time: killing it", child.index)
                    child.process.kill()
            self._stop_deadline = None

    def _exited(self, child: _Child, status: int, now: float) -> None:
        name = f"worker process {child.index}"
        if self._signals:
            log.info("%s stopped (%s)", name, _describe(status))
            return
        if status == 0:
            log.info("%s finished", name)
            child.finished = True
            return
        lived = now - child.started_at
        if lived >= _STABLE_AFTER_S:
            child.backoff_s = _FIRST_BACKOFF_S
        wait = child.backoff_s
        child.backoff_s = min(_MAX_BACKOFF_S, child.backoff_s * 2)
        log.warning("%s %s after %.1fs: restarting in %.1fs", name, _describe(status), lived, wait)
        child.restart_at = now + wait

    def _start(self, child: _Child) -> None:
        child.process = subprocess.Popen(
            self.command(child.index),
            env=None if self.env is None else dict(self.env),
            preexec_fn=functools.partial(_die_with_parent, os.getpid()),
            # a group of its own: Ctrl-C in a terminal signals the foreground group, and a
            # child that saw it as well as the supervisor's SIGTERM would stop at once
            process_group=0,
        )
        child.started_at = time.monotonic()
        log.info("worker process %d started: pid %d", child.index, child.process.pid)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals == 1:
            log.info("signal %d: stopping the worker processes", signum)
            self._stop_deadline = time.monotonic() + self.stop_timeout_s
        else:
            log.warning("second signal: the worker processes stop at once")
        for child in self._children:
            child.restart_at = None
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)


def _describe(status: int) -> str:
    if status < 0:
        return f"was killed by {signal.Signals(-status).name}"
    return f"exited with {status}"


#: the C library's symbols, loaded before any fork (the child may only call into it)
_LIBC = ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def _die_with_parent(supervisor_pid: int) -> None:
    """In the child, before it executes: SIGTERM when the supervisor dies (Linux); exit
    now if it already has (the child was re-parented before it could ask)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != supervisor_pid:
            os._exit(1)
