"""Batched tasks (``batch_size=``): their calls gathered into one run.

A pool around the worker's pool. Work of a batched task does not run when admitted: it
waits in a group (one per task and ``batch_key`` value) until the group holds
``batch_size`` calls or its first call has waited ``batch_timeout``; then the group runs
as one handler call on the pool, under its first call's work (the *lead*), with the
calls as its one argument. What the run returns, one outcome per call
(``scheduler/model/batching.py``), is split into one ``HandlerResult`` per call, which
the settler writes as for any run: each call acked, retried or poisoned by its own
outcome; a run that raised gives every call its failure (each retried by its attempts).

Every call is a claimed message, held (its lease kept alive by the heartbeat) while it
waits. A waiting call gives its permit back, so the consumer claims enough to fill a
batch larger than the worker's prefetch (up to twice the largest ``batch_size`` wait
without permits; more keep theirs, so a worker does not hoard); the run itself holds one
permit. Shutdown releases waiting calls (``unstarted``). An abort takes a call out while it
waits; once its batch runs, the call ends with the batch. A worker killed during a batch
leaves every call's lease to expire: each is delivered again, as any message is.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tickwork.scheduler import InvalidMessage
from tickwork.scheduler.model.batching import (
    FAILED,
    RETRIED,
    SUCCEEDED,
    Batching,
    batch_value,
    outcomes_of,
)
from tickwork.scheduler.runs.context import RunInfo
from tickwork.scheduler.runs.results import encode_value
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict, aborted
from tickwork.workers.pools.pool import Done, HandlerPool

log = logging.getLogger("tickwork.worker")


@dataclass(slots=True)
class _Call:
    """One call waiting for (or running in) its batch: what its handler would be given."""

    work: Work
    args: list[Any]
    kwargs: dict[str, Any]
    info: RunInfo


@dataclass(slots=True)
class _Group:
    """Calls of one task and batch key, gathered since ``since`` (monotonic seconds)."""

    task: str
    key: str | None
    since: float
    calls: list[_Call] = field(default_factory=list)


class Gathering(HandlerPool[Work]):
    """Gathers batched tasks' calls and runs each batch on ``inner`` (set once the worker
    made its pool); passes any other work through. ``finished`` is the inner pool's
    callback: it splits a batch's result and tells ``done`` of each call."""

    def __init__(
        self, context: WorkerContext, batched: dict[str, Batching], done: Done[Work]
    ) -> None:
        self._batched = batched
        self._done = done
        self._permits = context.permits
        self._app = context.app
        self._max_bytes = context.app.settings.max_payload_bytes
        self._without_permits = 2 * max(batching.size for batching in batched.values())
        self.inner: HandlerPool[Work] | None = None
        self._groups: dict[tuple[str, str | None], _Group] = {}
        self._running: dict[tuple[str, str], list[_Call]] = {}
        self._waiting = 0  # calls waiting that gave their permit back
        self._lock = threading.Condition()

    @classmethod
    def of(cls, context: WorkerContext, done: Done[Work]) -> Gathering | None:
        """The gathering for the app's batched tasks (None: it has none)."""
        batched = {
            name: task.options.batch
            for name, task in context.app.registry.tasks.items()  # aliases too
            if task.options.batch is not None
        }
        return cls(context, batched, done) if batched else None

    # -- the pool interface ---------------------------------------------------------------

    def submit(
        self, item: Work, task: str, args: list[Any], kwargs: dict[str, Any], info: RunInfo
    ) -> None:
        batching = self._batched.get(task)
        inner = self.inner
        assert inner is not None
        if batching is None:
            inner.submit(item, task, args, kwargs, info)
            return
        try:
            key = batch_value(task, batching, args, kwargs)
        except InvalidMessage as err:
            self._done(item, HandlerResult(Verdict.POISON, type(err).__name__, str(err)))
            return
        full: _Group | None = None
        give = 0
        with self._lock:
            group = self._groups.get((task, key))
            if group is None:
                group = self._groups[task, key] = _Group(task, key, time.monotonic())
                self._lock.notify()  # a new deadline for the timer
            group.calls.append(_Call(item, args, kwargs, info))
            if item.holds_permit and self._waiting < self._without_permits:
                item.holds_permit = False
                self._waiting += 1
                give = 1
            if len(group.calls) >= batching.size:
                full = self._groups.pop((task, key))
                self._started(full)
        self._permits.give(give)
        if full is not None:
            self._run(full)

    def abort(self, item: Work, grace_s: float | None = None) -> bool:
        with self._lock:
            taken = self._take_waiting(item)
            in_a_batch = not taken and any(
                item is call.work for calls in self._running.values() for call in calls
            )
        if taken:
            why = f"message {item.claim.id} aborted while it waited for its batch"
            self._done(item, aborted(why))
            return True
        if in_a_batch:
            return False  # it ends with its batch, which runs other calls too
        inner = self.inner
        assert inner is not None
        return inner.abort(item, grace_s)

    def _take_waiting(self, item: Work) -> bool:
        """Take ``item`` out of its group if it waits in one (under the lock)."""
        for group in self._groups.values():
            for index, call in enumerate(group.calls):
                if call.work is item:
                    del group.calls[index]
                    self._waiting -= not item.holds_permit
                    if not group.calls:
                        del self._groups[group.task, group.key]
                    return True
        return False

    def unstarted(self) -> list[Work]:
        inner = self.inner
        assert inner is not None
        taken: list[Work] = []
        with self._lock:
            for item in inner.unstarted():  # a batch not started: every call of it
                calls = self._running.pop(item.handle, None)
                taken.extend([item] if calls is None else [call.work for call in calls])
            for group in self._groups.values():
                taken.extend(call.work for call in group.calls)
                self._waiting -= sum(not call.work.holds_permit for call in group.calls)
            self._groups.clear()
        return taken

    def shutdown(self, wait: bool) -> None:
        inner = self.inner
        assert inner is not None
        with self._lock:
            self._lock.notify()
        inner.shutdown(wait)

    # -- the timer ------------------------------------------------------------------------

    def run(self, until: threading.Event) -> None:
        """Start each group whose first call waited its task's ``batch_timeout`` (the
        worker's ``gathering`` thread)."""
        while not until.is_set():
            due: list[_Group] = []
            with self._lock:
                now = time.monotonic()
                wait_s = 0.5
                for (task, key), group in list(self._groups.items()):
                    left = group.since + self._batched[task].timeout_s - now
                    if left <= 0:
                        due.append(self._groups.pop((task, key)))
                        self._started(due[-1])
                    else:
                        wait_s = min(wait_s, left)
                if not due:
                    self._lock.wait(wait_s)
            for group in due:
                self._run(group)

    # -- a batch's run --------------------------------------------------------------------

    def _started(self, group: _Group) -> None:
        """``group`` leaves the waiting ones (under the lock): its lead holds the run's
        permit, taken now if it gave its own back."""
        lead = group.calls[0].work
        self._waiting -= sum(not call.work.holds_permit for call in group.calls)
        if not lead.holds_permit:
            self._permits.force(1)
            lead.holds_permit = True
        self._running[lead.handle] = group.calls

    def _run(self, group: _Group) -> None:
        inner = self.inner
        assert inner is not None
        lead = group.calls[0]
        payload = [
            {
                "id": call.work.claim.id,
                "args": call.args,
                "kwargs": call.kwargs,
                "attempt": call.work.claim.attempt,
                "key": group.key,
            }
            for call in group.calls
        ]
        info = lead.info._replace(keep_value=True, key=group.key)  # its report is needed
        if log.isEnabledFor(logging.DEBUG):
            log.debug("batch of %d call(s) of %s (key %s)", len(payload), group.task, group.key)
        inner.submit(lead.work, group.task, [payload], {}, info)

    def finished(self, item: Work, result: HandlerResult) -> None:
        """The inner pool's callback: a batch's result split into its calls' (any thread)."""
        with self._lock:
            calls = self._running.pop(item.handle, None)
        if calls is None:
            self._done(item, result)
            return
        for call, outcome in zip(calls, self._split(item, result, calls), strict=True):
            self._done(call.work, outcome)

    def _split(self, lead: Work, result: HandlerResult, calls: list[_Call]) -> list[HandlerResult]:
        """Each call's result: its outcome in the batch's report, or the batch's own
        result (it raised, was aborted or snoozed) for every call."""
        share = result.duration_ms / len(calls)
        if result.verdict is not Verdict.ACK or result.value is None:
            return [result._replace(duration_ms=share)] * len(calls)
        outcomes = outcomes_of(json.loads(result.value))
        if outcomes is None or len(outcomes) != len(calls):
            why = f"the run of batched task {lead.message.task!r} gave no outcome per call"
            return [HandlerResult(Verdict.FAIL, "TickworkError", why, duration_ms=share)] * len(
                calls
            )
        task = self._app.registry.tasks.get(lead.message.task)
        keeps = task is not None and task.options.result_retention is not None
        return [
            self._outcome(outcome, share, keeps or call.info.keep_value)
            for call, outcome in zip(calls, outcomes, strict=True)
        ]

    def _outcome(self, outcome: list[Any], share: float, keep: bool) -> HandlerResult:
        kind = outcome[0]
        if kind == SUCCEEDED:
            try:
                value = encode_value(outcome[1], self._max_bytes) if keep else None
            except (TypeError, ValueError) as err:  # over max_payload_bytes
                return HandlerResult(Verdict.FAIL, type(err).__name__, str(err), "", share)
            return HandlerResult(Verdict.ACK, duration_ms=share, value=value)
        if kind == RETRIED:
            _, error_type, error, rule, delay_s = outcome
            return HandlerResult(
                Verdict.FAIL, error_type, error, "", share, snooze_s=delay_s or 0.0, rule=rule
            )
        if kind == FAILED:
            return HandlerResult(Verdict.POISON, outcome[1], outcome[2], "", share)
        return HandlerResult(Verdict.FAIL, "TickworkError", f"unknown outcome {kind!r}", "", share)
