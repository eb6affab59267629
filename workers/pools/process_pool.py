"""Handlers in child processes (``--pool process``): one supervised child per slot, as
Celery's prefork pool and Dramatiq's worker processes have.

Why not ``concurrent.futures.ProcessPoolExecutor``: when one of its children dies (a
handler that calls ``os.abort()``, a segfault in C code, the OOM killer), the executor
breaks as a whole and fails every future in it, so the messages running beside the dead
one were charged an attempt for nothing, and it cannot say which child ran which job. A
slot here is one child with its own pipe and a thread reading it; the parent knows which
job each child runs, so a death costs only that job (retried or poisoned by its task's
policy, with "the process running it died (signal SIGABRT)"), the slot gets a fresh child
at once, and the other children never notice. Deaths are counted (``crashed`` in the
worker's metrics and the activity log).

Abort: the parent notes the job number in a small shared array, then sends ``SIGUSR1``
to the child running it; the child raises ``Aborted`` in the handler if it still runs
that job (``child.py``), and the run ends as aborted. A handler that does not stop within
``abort_grace_s`` has its process killed: only its slot is replaced. Time limits work the
same way with the job's negative number (``TimeLimitExceeded``), then a kill after
``time_limit_grace_s``.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import SynchronizedArray
from typing import Any

from tickwork.scheduler import TickworkError
from tickwork.scheduler.runs.context import RunInfo
from tickwork.workers.pools.child import SOFT, serve
from tickwork.workers.pools.execution import HandlerResult, Verdict, aborted
from tickwork.workers.pools.pool import Done, HandlerPool, PoolSpec, W
from tickwork.workers.pools.process_slots import Children, Job, Slot
from tickwork.workers.pools.remote_durable import ParentAnswers, answered
from tickwork.workers.pools.services import RunServices

log = logging.getLogger("tickwork.worker")

_ABORT_SLOTS = 64  # job numbers of the latest aborts, shared with every child
#: the error type of a run whose process died under it
PROCESS_DIED = "ProcessDied"


class ProcessPool(HandlerPool[W]):
    """Handlers in supervised child processes, one per slot; aborts by signal, then by
    kill after a grace; a child that dies costs only its own job."""

    def __init__(
        self, spec: PoolSpec, app_reference: str, on_done: Done[W], children: Children
    ) -> None:
        """``spec``: the app, the pool's size, what writes the progress and charges the
        children report (``services``), who is told of a run whose process died
        (``on_crash``); ``children``: the graces before a child is killed, and when one
        is recycled."""
        app = self._app = spec.app
        size = spec.size
        self._services = spec.services or RunServices.of(app)
        self._reference = app_reference
        self._on_done = on_done
        self._children = children
        self._answers = ParentAnswers(app, lambda: app.builder.clock.now_ms())
        self._abort_grace_s = self._children.abort_grace_s
        self._time_limit_grace_s = self._children.time_limit_grace_s
        self._on_crash = spec.on_crash
        self._context = multiprocessing.get_context()
        self._aborting: SynchronizedArray[int] = self._context.Array("q", _ABORT_SLOTS)
        self._abort_slot = itertools.count()
        self._jobs = itertools.count(1)
        self._lock = threading.Lock()
        self._by_item: dict[int, Job[W]] = {}  # id(item) -> its job, waiting or running
        self._waiting: deque[Job[W]] = deque()
        self._free: list[Slot] = []
        self._closing = False
        self._slots: list[Slot] = []
        # a pool never shut down (an error before the worker stopped) still stops its
        # children when the interpreter exits (registered after multiprocessing's own exit
        # function, which joins them, so it runs first)
        atexit.register(_stop_all, self._slots)
        with self._lock:
            for index in range(max(size, 1)):
                self._slots.append(self._new_slot(index))
            self._free.extend(self._slots)

    # -- slots --------------------------------------------------------------------------

    def _new_slot(self, index: int) -> Slot:
        slot = Slot(index, self._start_child)
        reader = threading.Thread(
            target=self._read, args=(slot,), name=f"tickwork-child-{index}", daemon=True
        )
        reader.start()
        return slot

    def _start_child(self, pipe: Connection) -> BaseProcess:
        process = self._context.Process(
            target=serve, args=(self._reference, pipe, self._aborting), name="tickwork-child"
        )
        process.start()
        return process

    def _read(self, slot: Slot) -> None:
        """What ``slot``'s child sends, until its pipe closes (it exited or died)."""
        while True:
            try:
                message = slot.pipe.recv()
            except (EOFError, OSError):
                break
            if message[0] == "done":
                self._done(slot, message[1], message[2], message[3])
            elif message[0] == "durable":  # ("durable", question, args): a durable run asks
                with contextlib.suppress(OSError):
                    slot.pipe.send(answered(self._answers, message[1], message[2]))
            elif message[0] == "ready":
                slot.ready = True
            elif message[0] == "charge":  # ("charge", job, info, units)
                self._charge(message[2], message[3])
            else:  # ("progress", job, info, fraction, note)
                self._write_progress(*message[1:])
        self._died(slot)

    def _dispatch(self) -> None:
        """Hand waiting jobs to free slots (under the lock)."""
        while self._waiting and self._free:
            job = self._waiting.popleft()
            slot = self._free.pop()
            try:
                slot.pipe.send(job.call)
            except OSError:  # the child just died: its reader replaces it
                self._waiting.appendleft(job)
                continue
            job.slot, slot.job = slot, job
            info = job.call[4]
            if info.time_limit_s is not None:
                _later(info.time_limit_s, self._past_limit, job)
            if info.soft_time_limit_s is not None:
                _later(info.soft_time_limit_s, self._past_soft_limit, job)

    def _done(self, slot: Slot, number: int, result: HandlerResult, rss_kb: int) -> None:
        with self._lock:
            job = slot.job
            if job is None or job.number != number:
                return
            slot.job = job.slot = None
            self._by_item.pop(id(job.item), None)
            slot.jobs += 1
            slot.retired = self._children.spent(slot.jobs, rss_kb)
            if slot.retired is not None:
                with contextlib.suppress(OSError):
                    slot.pipe.send(None)  # it exits; its reader gives the slot a fresh one
            elif not slot.dead:
                self._free.append(slot)
            self._dispatch()
        self._on_done(job.item, result)

    def _died(self, slot: Slot) -> None:
        """``slot``'s child exited: charge its job alone, give the slot a fresh child."""
        with self._lock:
            slot.dead = True
            job, slot.job = slot.job, None
            if slot in self._free:
                self._free.remove(slot)
            if self._closing:
                return
        how = slot.how_it_died()
        if slot.retired is not None:
            log.info("recycled a pool process %s (%s)", slot.retired, how)
        elif not slot.ready:  # it died importing the app: do not restart it in a hot loop
            log.error("a pool process could not start (%s); trying again in 1 s", how)
            time.sleep(1.0)
        fresh = self._new_slot(slot.index)
        with self._lock:
            self._slots[slot.index] = fresh
            if self._closed():  # shut down while the fresh child started
                _stop_all([fresh])
                return
            self._free.append(fresh)
            if job is not None:
                job.slot = None
                self._by_item.pop(id(job.item), None)
            self._dispatch()
        if job is None:
            if slot.retired is None:
                log.warning("a pool process died while idle (%s); started another", how)
            return
        message = job.call[4]
        log.warning(
            "the process running %s (%s) died (%s); started another",
            message.task,
            message.message_id,
            how,
        )
        if job.aborted:  # killed by us: it did not stop within its abort grace
            result = aborted(f"its process was killed ({how})")
        elif job.over_limit:
            result = _past_limit_result()
        else:
            result = HandlerResult(
                Verdict.FAIL, PROCESS_DIED, f"the process running it died ({how})"
            )
            if self._on_crash is not None:
                self._on_crash(job.item)
        self._on_done(job.item, result)

    # -- the pool -------------------------------------------------------------------------

    def submit(
        self, item: W, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        number = next(self._jobs)
        job = Job(number, item, (number, task, args, kwargs, info))
        with self._lock:
            self._by_item[id(item)] = job
            self._waiting.append(job)
            self._dispatch()

    def _closed(self) -> bool:
        return self._closing

    def _write_progress(
        self, number: int, info: RunInfo, fraction: float, note: str | None
    ) -> None:
        """Write a child's progress while its job runs. Under the pool's lock, which
        ``_done`` takes before the result is settled: a late progress report never
        overwrites the record of the finished run."""
        with self._lock:
            if not any(slot.job is not None and slot.job.number == number for slot in self._slots):
                return
            try:
                self._services.report(info, fraction, note)
            except TickworkError as err:
                log.warning("cannot keep the progress of %s: %s", info.message_id, err)

    def _charge(self, info: RunInfo, units: int) -> None:
        """Count the units a child's run charged to its rate limit."""
        try:
            self._services.charge(info, units)
        except TickworkError as err:
            log.warning("cannot count the charge of %s: %s", info.message_id, err)

    def abort(self, item: W, grace_s: float | None = None) -> bool:
        with self._lock:
            job = self._by_item.get(id(item))
            if job is None or job.aborted:
                return job is not None
            job.aborted = True
            if job.slot is None:  # not started yet: it never runs
                self._waiting.remove(job)
                self._by_item.pop(id(item), None)
                unstarted = True
            else:
                unstarted = False
        if unstarted:
            self._on_done(item, aborted("aborted before it started"))
            return True
        self._name(job.number)
        if grace_s == 0:  # terminated (overlap terminate_other): no grace to stop on its own
            log.warning("terminating an aborted handler: killing its process")
            self._signal(job, signal.SIGKILL)
            return True
        self._signal(job, signal.SIGUSR1)
        _later(self._abort_grace_s if grace_s is None else grace_s, self._kill_if_running, job)
        return True

    def _name(self, number: int) -> None:
        """Put ``number`` in the shared array the children read when signalled."""
        with self._aborting.get_lock():
            self._aborting[next(self._abort_slot) % _ABORT_SLOTS] = number

    def _running(self, job: Job[W]) -> bool:
        slot = job.slot
        return slot is not None and slot.job is job

    def _past_soft_limit(self, job: Job[W]) -> None:
        """``job`` ran past its soft time limit: raise ``SoftTimeLimitExceeded`` in it."""
        if self._running(job):
            self._name(job.number + SOFT)
            self._signal(job, signal.SIGUSR1)

    def _past_limit(self, job: Job[W]) -> None:
        """``job`` ran past its time limit: raise ``TimeLimitExceeded`` in it, and kill its
        process if it has not stopped within the grace."""
        with self._lock:
            if not self._running(job):
                return
            job.over_limit = True
        self._name(-job.number)
        self._signal(job, signal.SIGUSR1)
        _later(self._time_limit_grace_s, self._kill_past_limit, job)

    def _kill_past_limit(self, job: Job[W]) -> None:
        if self._running(job):
            log.warning(
                "a handler did not stop within %.1f s of its time limit: killing its process",
                self._time_limit_grace_s,
            )
            self._signal(job, signal.SIGKILL)

    def _kill_if_running(self, job: Job[W]) -> None:
        if self._running(job):
            log.warning(
                "an aborted handler did not stop within %.1f s: killing its process",
                self._abort_grace_s,
            )
            self._signal(job, signal.SIGKILL)

    def _signal(self, job: Job[W], signum: int) -> None:
        with self._lock:
            slot = job.slot
            pid = slot.process.pid if slot is not None and slot.job is job else None
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.kill(pid, signum)

    def unstarted(self) -> list[W]:
        with self._lock:
            jobs = list(self._waiting)
            self._waiting.clear()
            for job in jobs:
                self._by_item.pop(id(job.item), None)
        return [job.item for job in jobs]

    def shutdown(self, wait: bool) -> None:
        """Stop the children: after their running handlers return (``wait``), or at once
        (killed: their leases expire and the messages run again)."""
        with self._lock:
            self._closing = True
            slots = list(self._slots)
        if not wait:
            _stop_all(slots)
            return
        for slot in slots:
            with contextlib.suppress(OSError):
                slot.pipe.send(None)
        for slot in slots:
            slot.process.join()


def _stop_all(slots: list[Slot]) -> None:
    """Kill every child of ``slots`` still running (and reap it)."""
    for slot in slots:
        process = slot.process
        if process.exitcode is None:
            with contextlib.suppress(OSError, ValueError):
                process.kill()
                process.join(timeout=5)


def _past_limit_result() -> HandlerResult:
    return HandlerResult(
        Verdict.FAIL,
        "TimeLimitExceeded",
        "the handler ran past its time limit and did not stop: its process was killed",
    )


def _later(delay_s: float, action: Callable[[Any], None], job: Any) -> None:
    timer = threading.Timer(delay_s, action, (job,))
    timer.daemon = True
    timer.start()
