"""The fan-in of batches, worker side (see ``scheduler.workflows.batches``): a member's outcome is
recorded and counted before its message is acked or poisoned, and the settle that sees
its batch complete wakes the callbacks that apply and deletes the others. Each step is
idempotent, so a crash anywhere before the ack only repeats it on redelivery.

A callback made with ``.s()`` takes the batch's outcome first: ``callback_args`` reads it
when the callback starts."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from tickwork.scheduler.backends import Backend, MemberOutcome, Waiter
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.runs.results import failed_record, succeeded_record
from tickwork.scheduler.workflows.batches import BatchDescription, CallbackPlace
from tickwork.scheduler.workflows.status import callback_argument
from tickwork.workers.intake.holdings import Work
from tickwork.workers.workflows.graph_fanin import GraphFanIn

log = logging.getLogger("tickwork.worker")


def member_outcome(
    work: Work, now_ms: int, value: bytes | None = None, error: tuple[str, str] | None = None
) -> MemberOutcome | None:
    """The outcome of ``work``'s run if it is a batch member: succeeded with ``value``
    (JSON), or failed for good with ``error`` (type, message). None for other messages."""
    member = work.message.member
    if member is None:
        return None
    attempt = work.claim.attempt
    if error is None:
        record = succeeded_record(value if value is not None else b"null", attempt, now_ms)
    else:
        record = failed_record(error[0], error[1], attempt, now_ms)
    return MemberOutcome(member.batch, member.index, error is not None, record, member.expires_ms)


def callback_args(backend: Backend, message: Message) -> list[Any]:
    """The arguments a callback runs with: the batch's outcome first if it takes it."""
    callback = message.callback
    if callback is None or not callback.takes_result:
        return message.args
    return [callback_argument(backend, callback.batch, callback.when), *message.args]


def run_args(backend: Backend, graphs: GraphFanIn, message: Message) -> list[Any]:
    """The arguments a run starts with: a callback's batch outcome or a graph step's
    parents' results first, when it takes them. Raises ``Held`` (a step of a stopped
    graph) and ``BackendError`` (the records cannot be read: it is due again)."""
    if message.node is not None:
        return graphs.start_args(message)
    if message.callback is not None:
        return callback_args(backend, message)
    return message.args


def value_needed(message: Message) -> bool:
    """Whether what ``message``'s handler returns is needed after it: by the next step
    of its chain (made with ``.s()``), its batch's callbacks, or the steps of its graph."""
    return (
        bool(message.then and message.then[0].takes_result)
        or message.member is not None
        or message.node is not None
    )


class FanIn:
    """Records members' outcomes and fires the callbacks of the batches they complete."""

    def __init__(
        self,
        backend: Backend,
        with_retries: Callable[[Callable[[], Any]], Any],
        nudge: Callable[[], None],
    ) -> None:
        self._backend = backend
        self._with_retries = with_retries
        self._nudge = nudge  # a callback was woken: the consumer need not wait a poll

    def settle(self, outcomes: list[tuple[Work, MemberOutcome]]) -> bool:
        """Record ``outcomes`` (before their messages are acked or poisoned), then fire
        the callbacks of each batch they completed. False if that could not be written
        (a forced stop): the caller must then leave those messages to be redelivered."""
        if not outcomes:
            return True
        counts = self._with_retries(lambda: self._backend.batches.settle([o for _, o in outcomes]))
        if counts is None:
            return False
        completed: dict[str, int] = {}
        for (work, outcome), (settled, failed) in zip(outcomes, counts, strict=True):
            member = work.message.member
            if member is not None and settled >= member.size:
                completed[outcome.batch] = failed
        return all(self._fire(batch, failed) for batch, failed in completed.items())

    def _fire(self, batch_id: str, failed: int) -> bool:
        found = self._with_retries(lambda: (self._backend.batches.read(batch_id, outcomes=False),))
        if found is None:
            return False
        record = found[0]
        if record is None or record.description is None:
            log.error("batch %s settled but its description expired: no callback", batch_id)
            return True
        description = BatchDescription.decode(record.description)
        wake: list[CallbackPlace] = []
        drop: list[CallbackPlace] = []
        for when, place in description.callbacks.items():
            applies = when == "complete" or (when == "failure") == (failed > 0)
            (wake if applies else drop).append(place)
        if wake:
            waiters = [Waiter("", p.queue, None, p.id) for p in wake]
            if self._with_retries(lambda: self._backend.limits.wake(waiters)) is None:
                return False
            self._nudge()
        delete = self._backend.messages.delete
        for place in drop:
            if self._with_retries(partial(delete, place.id, place.queue)) is None:
                return False
        log.info(
            "batch %s settled: %d of %d member(s) failed; callbacks fired: %s",
            batch_id,
            failed,
            description.size,
            ", ".join(p.id for p in wake) or "none",
        )
        return True
