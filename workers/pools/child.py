"""A process pool's child (``process_pool.py`` supervises it): it imports the app once,
then runs one job at a time as its parent sends them over its pipe, and sends back each
result and the progress its handlers report.

Signals: ``SIGUSR1`` raises ``Aborted``, ``TimeLimitExceeded`` or
``SoftTimeLimitExceeded`` in the running handler, for the job the parent named in the
shared array (the child may have moved on to another job before the signal lands).
``SIGINT`` and ``SIGTERM`` are ignored: a Ctrl-C reaches the whole process group, and
the parent, not the child, decides when a running handler stops (a forced stop kills).
A child whose parent is gone sees its pipe close and exits after its job.
"""

from __future__ import annotations

import signal
import threading
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import SynchronizedArray
from types import FrameType
from typing import Any

from tickwork.scheduler import Aborted, TimeLimitExceeded
from tickwork.scheduler.loading import load_app
from tickwork.scheduler.runs.context import RunContext, RunInfo, SoftTimeLimitExceeded
from tickwork.scheduler.runs.durable import DurableRun
from tickwork.scheduler.runs.durable_opening import open_with
from tickwork.scheduler.runs.results import running_record
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.pools.execution import HandlerResult, aborted, run_handler
from tickwork.workers.pools.remote_durable import ChildAsking, child_support
from tickwork.workers.reporting.memory_bound import resident_kb

#: added to a job's number in the shared array: its soft time limit passed (a time limit
#: is its negative, an abort the number itself)
SOFT = 1 << 40

#: what a parent sends: (job, task, args, kwargs, info); None to stop
Call = tuple[int, str, list[Any], dict[str, Any], RunInfo]

_app: WorkerApp | None = None
_pipe: Connection | None = None
_sending = threading.Lock()  # a handler's own threads may report progress too
_aborting: SynchronizedArray[int] | None = None
_job = 0  # the job this child runs now, 0 when idle
_run: RunContext | None = None


class _Guard:
    """The time limit's window: open right around the handler's call, so the signal raises
    only there (a signal handler runs between the main thread's bytecodes: the flag needs
    no lock)."""

    def __init__(self) -> None:
        self.inside = False
        self.warned = False  # SoftTimeLimitExceeded was raised in this run

    def enter(self) -> None:
        self.inside = True
        self.warned = False

    def leave(self) -> None:
        self.inside = False


_guard = _Guard()


def serve(reference: str, pipe: Connection, aborting: SynchronizedArray[int]) -> None:
    """The child's life: import the app, then run what the parent sends until it sends
    None or goes away."""
    global _app, _pipe, _aborting
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _app, _pipe, _aborting = load_app(reference), pipe, aborting
    signal.signal(signal.SIGUSR1, _on_signal)
    _send(("ready",))
    while True:
        try:
            call: Call | None = pipe.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if call is None:
            return
        job = call[0]
        result = _run_job(*call)
        _send(("done", job, result, resident_kb()))


def _run_job(
    job: int, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
) -> HandlerResult:
    global _job, _run
    assert _app is not None, "serve() imports the app first"
    run = RunContext(info, _report_progress, _open_durable, _charge)
    try:
        _job, _run = job, run
        try:
            limited = info.time_limit_s is not None or info.soft_time_limit_s is not None
            return run_handler(_app, task, args, kwargs, run, _guard if limited else None)
        finally:
            _job, _run = 0, None
    except Aborted as err:  # the abort's signal landed just outside the handler
        _job, _run = 0, None
        return aborted(str(err))


def _open_durable(run_id: str, task: str, queue: str) -> DurableRun:
    """A durable run here: its journal, waits, children and clock asked of the parent."""
    assert _app is not None and _pipe is not None
    pipe = _pipe
    support = child_support(ChildAsking(_send, pipe.recv), _app.settings.max_payload_bytes)
    return open_with(_app, run_id, task, queue, support)


def _send(message: tuple[Any, ...]) -> None:
    assert _pipe is not None
    with _sending:
        _pipe.send(message)


def _report_progress(info: RunInfo, fraction: float, note: str | None) -> None:
    """Progress goes to the parent, which writes it: a child forked from a threaded
    process must not open storage of its own (SQLite's own locks may have been held by
    another thread at the fork)."""
    running_record(fraction, note, info.attempt, 0)  # a bad fraction raises here, in the task
    _send(("progress", _job, info, fraction, note))


def _charge(info: RunInfo, units: int) -> None:
    """A charge goes to the parent, which counts it (as progress does)."""
    _send(("charge", _job, info, units))


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    """An abort (the job's number in the shared array), a time limit (its negative) or a
    soft time limit (its number plus ``SOFT``), raised in the running job's handler if it
    is still that one."""
    run, job, aborting = _run, _job, _aborting
    if run is None or job == 0 or aborting is None or run.aborted:
        return
    named = aborting[:]
    if job in named:
        run.request_abort()
        raise Aborted(f"message {run.message_id} was aborted")
    if -job in named and _guard.inside:
        _guard.inside = False  # once
        raise TimeLimitExceeded
    if job + SOFT in named and _guard.inside and not _guard.warned:
        _guard.warned = True  # once
        raise SoftTimeLimitExceeded
