"""The producer behind ``App``'s enqueue verbs: a call validated and built into its
message (``scheduler.producing.building``), then stored, one (``enqueue``), many
(``enqueue_many``) or from an event loop (``aenqueue``), within its queue's bound
(``scheduler.producing.backpressure``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tickwork.scheduler.backends import Envelope, OnConflict, Outcome
from tickwork.scheduler.backends.outcomes import WRITES
from tickwork.scheduler.clock import CorrectedClock, to_datetime
from tickwork.scheduler.errors import InvalidMessage, QueueFull
from tickwork.scheduler.model.tasks import Call, TaskFunction
from tickwork.scheduler.producing.backpressure import awrite_bounded, write_bounded
from tickwork.scheduler.producing.debounce import debounced
from tickwork.scheduler.producing.reports import EnqueueReport, conflict_mode
from tickwork.scheduler.runs.tracing import producer_span
from tickwork.scheduler.schedules.actions import ActionLog
from tickwork.scheduler.workflows.graphs import Workflow

if TYPE_CHECKING:
    from tickwork.scheduler.backends import Backend
    from tickwork.scheduler.parts import AppParts
    from tickwork.scheduler.workflows.service import Batches


class Producer:
    """Building and storing messages for an app; batches and groups go to its
    ``Batches``."""

    def __init__(self, parts: AppParts, batches: Batches) -> None:
        self._parts = parts
        self._batches = batches

    @property
    def backend(self) -> Backend:
        return self._parts.backend

    @property
    def backend_clock(self) -> CorrectedClock:
        return self._parts.backend_clock

    def build(
        self, call: Call, now_ms: int | None = None, now: datetime | None = None
    ) -> tuple[str, Envelope]:
        return self._parts.builder.build(call, now_ms, now)

    def enqueue(
        self,
        call: Call | Workflow,
        on_conflict: str | OnConflict = OnConflict.ERROR,
        *,
        block: bool = True,
        block_timeout: float | None = None,
    ) -> str:
        """``App.enqueue`` (its docstring is the contract), in a producer span when
        traced (``scheduler.runs.tracing``)."""
        if not isinstance(call, Call):
            return self._batches.enqueue(call, block=block, block_timeout=block_timeout)
        with producer_span(f"enqueue {call.task}") as sent:
            message_id, envelope = self._enqueue(call, on_conflict, block, block_timeout)
            sent(message_id, envelope.queue)
        return message_id

    def _enqueue(
        self,
        call: Call,
        on_conflict: str | OnConflict,
        block: bool,
        block_timeout: float | None,
    ) -> tuple[str, Envelope]:
        mode = conflict_mode(on_conflict)
        if (task := self._debounced_task(call)) is not None:
            call = debounced(call, task, self.backend, self.backend_clock.now_ms())
            mode = OnConflict.REPLACE
        message_id, envelope = self.build(call)
        outcomes, _ = write_bounded(
            self.backend, [envelope], mode, block=block, timeout_s=self._block_s(block_timeout)
        )
        if outcomes[0] is Outcome.REPLACED and call.trigger is not None:
            self._replaced(call, envelope)
        return message_id, envelope

    def enqueue_many(
        self,
        calls: Iterable[Call],
        on_conflict: str | OnConflict = OnConflict.ERROR,
        batch_size: int = 1000,
        *,
        block: bool = True,
        block_timeout: float | None = None,
    ) -> EnqueueReport:
        """``App.enqueue_many``: each batch built whole before any of it is written; one
        producer span when traced."""
        with producer_span("enqueue_many") as sent:
            report = self._enqueue_many(calls, on_conflict, batch_size, block, block_timeout)
            sent(None, None, len(report.ids))
        return report

    def _enqueue_many(
        self,
        calls: Iterable[Call],
        on_conflict: str | OnConflict,
        batch_size: int,
        block: bool,
        block_timeout: float | None,
    ) -> EnqueueReport:
        mode = conflict_mode(on_conflict)
        report = EnqueueReport()
        batch: list[Envelope] = []
        now_ms = self.backend_clock.now_ms()
        now = to_datetime(now_ms)
        timeout_s = self._block_s(block_timeout)
        written: list[str] = []

        def flush() -> None:
            try:
                outcomes, waited_s = write_bounded(
                    self.backend, batch, mode, block=block, timeout_s=timeout_s - report.waited_s
                )
            except QueueFull as err:
                err.add_written_before(written, report.waited_s)
                raise
            report.waited_s += waited_s
            for envelope, outcome in zip(batch, outcomes, strict=True):
                report.outcomes[outcome] = report.outcomes.get(outcome, 0) + 1
                if outcome in WRITES:
                    written.append(envelope.id)
            batch.clear()

        for call in calls:
            if self._debounced_task(call) is not None:
                raise InvalidMessage(
                    f"task {call.task!r} is debounced: enqueue its calls one at a time "
                    "(delay(), enqueue()), each after reading the call before it"
                )
            message_id, envelope = self.build(call, now_ms, now)
            report.ids.append(message_id)
            batch.append(envelope)
            if len(batch) >= batch_size:
                flush()
        if batch:
            flush()
        return report

    async def aenqueue(
        self,
        call: Call | Workflow,
        on_conflict: str | OnConflict = OnConflict.ERROR,
        *,
        block: bool = True,
        block_timeout: float | None = None,
    ) -> str:
        """``enqueue`` without blocking the event loop: the message is built on the loop
        and written through ``backend.messages.aenqueue`` (from the loop itself on Redis
        and on a caller's asynchronous PostgreSQL connection, in a thread elsewhere); a
        batch or a group goes to a thread whole, and so does a read of the backend's
        clock when one is due."""
        if not isinstance(call, Call):
            return await asyncio.to_thread(
                self.enqueue, call, on_conflict, block=block, block_timeout=block_timeout
            )
        with producer_span(f"enqueue {call.task}") as sent:
            message_id, envelope = await self._aenqueue(call, on_conflict, block, block_timeout)
            sent(message_id, envelope.queue)
        return message_id

    async def _aenqueue(
        self,
        call: Call,
        on_conflict: str | OnConflict,
        block: bool,
        block_timeout: float | None,
    ) -> tuple[str, Envelope]:
        if self.backend_clock.due():  # its read of the backend's clock, off the loop
            await asyncio.to_thread(self.backend_clock.now_ms)
        mode = conflict_mode(on_conflict)
        if (task := self._debounced_task(call)) is not None:  # its read, off the loop
            now_ms = self.backend_clock.now_ms()
            call = await asyncio.to_thread(debounced, call, task, self.backend, now_ms)
            mode = OnConflict.REPLACE
        message_id, envelope = self.build(call)
        outcomes, _ = await awrite_bounded(
            self.backend, [envelope], mode, block=block, timeout_s=self._block_s(block_timeout)
        )
        if outcomes[0] is Outcome.REPLACED and call.trigger is not None:
            await asyncio.to_thread(self._replaced, call, envelope)
        return message_id, envelope

    def _debounced_task(self, call: Call) -> TaskFunction[..., Any] | None:
        """``call``'s task when it is debounced (``scheduler/producing/debounce.py``)."""
        task = self._parts.builder.registry.tasks.get(call.task)
        return task if task is not None and task.options.debounce is not None else None

    def _replaced(self, call: Call, envelope: Envelope) -> None:
        """Record in the schedule's action log that it was replaced (by whom: this
        process's user and host), with what it is now."""
        assert call.trigger is not None and envelope.key is not None
        now = to_datetime(self.backend_clock.now_ms())
        log = ActionLog(self.backend, self._parts.settings)
        log.record(
            envelope.queue, envelope.key, "replace", now, None, None, call.trigger.describe()
        )

    def _block_s(self, block_timeout: float | None) -> float:
        settings = self._parts.settings
        return settings.enqueue_block_s if block_timeout is None else block_timeout
