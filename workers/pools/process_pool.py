"""Handlers in child processes (``--pool process``), each of which imports the app once.

Abort: the parent notes the job number in a small shared array, then sends ``SIGUSR1`` to
the child running it (each child reports its pid when it starts a job). The child's
signal handler raises ``Aborted`` in the handler if that child is still running that job
(like Celery's soft time limit), and the run ends as aborted. A handler that does not stop
within ``abort_grace_s`` (it swallowed the exception, or sits in C code) has its process
killed; the executor breaks, so every other handler running in the pool then fails its
attempt (and is retried), and the next submit starts a fresh executor.

Why a job number in shared memory, not just a signal: the child may have finished the
job and started another before the signal lands; it only raises for the job named.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.sharedctypes import SynchronizedArray
from types import FrameType
from typing import Any

from tickwork.scheduler import Aborted, TickworkError, TimeLimitExceeded
from tickwork.scheduler.loading import load_app
from tickwork.scheduler.runs.context import RunContext, RunInfo, SoftTimeLimitExceeded
from tickwork.scheduler.runs.results import report_progress, running_record
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.pools.execution import HandlerResult, Verdict, aborted, run_handler
from tickwork.workers.pools.pool import Done, HandlerPool, W

log = logging.getLogger("tickwork.worker")

_ABORT_SLOTS = 64  # job numbers of the latest aborts, shared with every child
#: added to a job's number in the shared array: its soft time limit passed (a time limit
#: is its negative, an abort the number itself)
SOFT = 1 << 40

# -- the child's side --------------------------------------------------------------------------

_child_app: WorkerApp | None = None
_child_started: Any = None  # multiprocessing SimpleQueue: (job, pid) per job started, and progress
_child_aborting: SynchronizedArray[int] | None = None
_child_job = 0  # the job this child runs now, 0 when idle
_child_run: RunContext | None = None


def init_child(reference: str, started: Any, aborting: SynchronizedArray[int]) -> None:
    """Process pool initializer: import the app once, listen for abort signals."""
    global _child_app, _child_started, _child_aborting
    _child_app = load_app(reference)
    _child_started, _child_aborting = started, aborting
    signal.signal(signal.SIGUSR1, _on_abort_signal)


def _on_abort_signal(_signum: int, _frame: FrameType | None) -> None:
    """An abort (the job's number in the shared array), a time limit (its negative) or a
    soft time limit (its number plus ``SOFT``), raised in the handler of the job this
    child runs, if it is still that one."""
    run, job, aborting = _child_run, _child_job, _child_aborting
    if run is None or job == 0 or aborting is None or run.aborted:
        return
    named = aborting[:]
    if job in named:
        run.request_abort()
        raise Aborted(f"message {run.message_id} was aborted")
    if -job in named and _child_guard.inside:
        _child_guard.inside = False  # once
        raise TimeLimitExceeded
    if job + SOFT in named and _child_guard.inside and not _child_guard.warned:
        _child_guard.warned = True  # once
        raise SoftTimeLimitExceeded


class _ChildGuard:
    """The time limit's window in a child: open right around the handler's call, so the
    signal raises only there (a signal handler runs between the main thread's bytecodes:
    the flag needs no lock)."""

    def __init__(self) -> None:
        self.inside = False
        self.warned = False  # SoftTimeLimitExceeded was raised in this run

    def enter(self) -> None:
        self.inside = True
        self.warned = False

    def leave(self) -> None:
        self.inside = False


_child_guard = _ChildGuard()


def _report_to_parent(info: RunInfo, fraction: float, note: str | None) -> None:
    """Progress from a child goes to the worker process, which writes it: a child forked
    from a threaded process must not open storage of its own (SQLite's own locks may have
    been held by another thread at the fork)."""
    running_record(fraction, note, info.attempt, 0)  # a bad fraction raises here, in the task
    _child_started.put((_child_job, info, fraction, note))


def run_in_child(
    job: int, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
) -> HandlerResult:
    global _child_job, _child_run
    assert _child_app is not None, "init_child was not called"
    run = RunContext(info, _report_to_parent)
    _child_job, _child_run = job, run  # set before reporting: a signal may follow at once
    _child_started.put((job, os.getpid()))
    try:
        limited = info.time_limit_s is not None or info.soft_time_limit_s is not None
        guard = _child_guard if limited else None
        return run_handler(_child_app, task, args, kwargs, run, guard)
    finally:
        _child_job, _child_run = 0, None


# -- the parent's side -------------------------------------------------------------------------


class ProcessPool(HandlerPool[W]):
    """Handlers in child processes; aborts by signal, then by kill after a grace."""

    def __init__(
        self,
        app: WorkerApp,
        app_reference: str,
        size: int,
        on_done: Done[W],
        abort_grace_s: float = 10.0,
        time_limit_grace_s: float = 5.0,
    ) -> None:
        self._app = app  # writes the progress children report
        self._reference = app_reference
        self._size = size
        self._on_done = on_done
        self._abort_grace_s = abort_grace_s
        self._time_limit_grace_s = time_limit_grace_s
        context = multiprocessing.get_context()
        self._started = context.SimpleQueue()
        self._aborting: SynchronizedArray[int] = context.Array("q", _ABORT_SLOTS)
        self._abort_slot = itertools.count()
        self._jobs = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[W, Future[HandlerResult]]] = {}  # job -> item, future
        self._job_of: dict[int, int] = {}  # id(item) -> job
        self._pids: dict[int, int] = {}  # job -> pid of the child running it
        self._aborted: set[int] = set()  # jobs whose abort was asked
        self._limits: dict[int, float] = {}  # job -> its time limit (s), for limited jobs
        self._soft: dict[int, float] = {}  # job -> its soft time limit (s)
        self._over_limit: set[int] = set()  # jobs told they ran past their time limit
        self._executor = self._new_executor()
        self._listener = threading.Thread(
            target=self._listen, name="tickwork-process-starts", daemon=True
        )
        self._listener.start()

    def _new_executor(self) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(
            self._size,
            initializer=init_child,
            initargs=(self._reference, self._started, self._aborting),
        )

    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        job = next(self._jobs)
        with self._lock:
            try:
                future = self._executor.submit(run_in_child, job, task, args, kwargs, info)
            except BrokenProcessPool:  # a child died (killed by an abort, or crashed)
                log.warning("the process pool broke; starting a new one")
                self._executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._new_executor()
                future = self._executor.submit(run_in_child, job, task, args, kwargs, info)
            self._pending[job] = (item, future)
            self._job_of[id(item)] = job
            if info.time_limit_s is not None:
                self._limits[job] = info.time_limit_s
            if info.soft_time_limit_s is not None:
                self._soft[job] = info.soft_time_limit_s
        future.add_done_callback(lambda done: self._finished(job, done))

    def _finished(self, job: int, future: Future[HandlerResult]) -> None:
        with self._lock:
            entry = self._pending.pop(job, None)
            self._pids.pop(job, None)
            if entry is not None:
                self._job_of.pop(id(entry[0]), None)
            was_aborted = job in self._aborted
            self._aborted.discard(job)
            self._limits.pop(job, None)
            self._soft.pop(job, None)
            over_limit = job in self._over_limit
            self._over_limit.discard(job)
        if entry is None or future.cancelled():
            return
        error = future.exception()
        if error is None:
            result = future.result()
        elif over_limit:  # killed: it did not stop at its time limit
            result = HandlerResult(
                Verdict.FAIL,
                "TimeLimitExceeded",
                "the handler ran past its time limit and did not stop: its process was killed",
            )
        elif was_aborted:
            result = HandlerResult(Verdict.ABORTED, "Aborted", f"{type(error).__name__}: {error}")
        else:  # e.g. a pool process died
            result = HandlerResult(Verdict.FAIL, type(error).__name__, str(error))
        self._on_done(entry[0], result)

    def _listen(self) -> None:
        """Record which child runs which job (reported by the child as it starts one), and
        write the progress children report."""
        while True:
            started = self._started.get()
            if started is None:
                return
            if len(started) == 4:
                self._write_progress(*started)
                continue
            job, pid = started
            with self._lock:
                if job in self._pending:
                    self._pids[job] = pid
                    signal_now = job in self._aborted
                    limit = self._limits.get(job)
                    soft = self._soft.get(job)
                else:
                    signal_now, limit, soft = False, None, None
            if signal_now:  # the abort was asked before the child had said where it runs
                self._signal(job, signal.SIGUSR1)
            if limit is not None:
                self._later(limit, self._past_limit, job)
            if soft is not None:
                self._later(soft, self._past_soft_limit, job)

    def _write_progress(self, job: int, info: RunInfo, fraction: float, note: str | None) -> None:
        """Write a child's progress while its job runs. Under the pool's lock, which
        ``_finished`` takes before the result is settled: a late progress report never
        overwrites the record of the finished run."""
        with self._lock:
            if job not in self._pending:
                return
            try:
                report_progress(self._app, info, fraction, note)
            except TickworkError as err:
                log.warning("cannot keep the progress of %s: %s", info.message_id, err)

    def abort(self, item: W, grace_s: float | None = None) -> bool:
        with self._lock:
            job = self._job_of.get(id(item))
            if job is None or job in self._aborted:
                return job is not None
            self._aborted.add(job)
            future = self._pending[job][1]
        with self._aborting.get_lock():
            self._aborting[next(self._abort_slot) % _ABORT_SLOTS] = job
        if future.cancel():  # not started yet: it never runs
            self._on_done(item, aborted("aborted before it started"))
            with self._lock:
                self._pending.pop(job, None)
                self._job_of.pop(id(item), None)
                self._aborted.discard(job)
            return True
        if grace_s == 0:  # terminated (overlap terminate_other): no grace to stop on its own
            log.warning("terminating an aborted handler: killing its process")
            self._signal(job, signal.SIGKILL)
            return True
        self._signal(job, signal.SIGUSR1)
        self._later(self._abort_grace_s if grace_s is None else grace_s, self._kill_if_running, job)
        return True

    def _past_soft_limit(self, job: int) -> None:
        """``job`` ran past its soft time limit: raise ``SoftTimeLimitExceeded`` in it
        (``job + SOFT`` in the shared array, then the signal), if it still runs."""
        with self._lock:
            if job not in self._pending:
                return
        with self._aborting.get_lock():
            self._aborting[next(self._abort_slot) % _ABORT_SLOTS] = job + SOFT
        self._signal(job, signal.SIGUSR1)

    def _past_limit(self, job: int) -> None:
        """``job`` ran past its time limit: raise ``TimeLimitExceeded`` in it (its
        negative number in the shared array, then the signal), and kill its process if
        it has not stopped within the grace."""
        with self._lock:
            entry = self._pending.get(job)
            if entry is None or entry[1].done():
                return
            self._over_limit.add(job)
        with self._aborting.get_lock():
            self._aborting[next(self._abort_slot) % _ABORT_SLOTS] = -job
        self._signal(job, signal.SIGUSR1)
        self._later(self._time_limit_grace_s, self._kill_past_limit, job)

    def _kill_past_limit(self, job: int) -> None:
        with self._lock:
            entry = self._pending.get(job)
        if entry is not None and not entry[1].done():
            log.warning(
                "a handler did not stop within %.1f s of its time limit: killing its process",
                self._time_limit_grace_s,
            )
            self._signal(job, signal.SIGKILL)

    @staticmethod
    def _later(delay_s: float, action: Callable[[int], None], job: int) -> None:
        timer = threading.Timer(delay_s, action, (job,))
        timer.daemon = True
        timer.start()

    def _kill_if_running(self, job: int) -> None:
        with self._lock:
            entry = self._pending.get(job)
        if entry is not None and not entry[1].done():
            log.warning(
                "an aborted handler did not stop within %.1f s: killing its process",
                self._abort_grace_s,
            )
            self._signal(job, signal.SIGKILL)

    def _signal(self, job: int, signum: int) -> None:
        with self._lock:
            pid = self._pids.get(job)
        if pid is None:
            return  # not started in a child yet: the listener signals when it does
        with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
            os.kill(pid, signum)

    def unstarted(self) -> list[W]:
        with self._lock:
            entries = list(self._pending.values())
        return [item for item, future in entries if future.cancel()]

    def shutdown(self, wait: bool) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=True)
        self._started.put(None)
