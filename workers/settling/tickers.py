"""A due occurrence of a schedule whose runs are messages of their own (every overlap
policy but ``serial``, ``scheduler.schedules.overlap``): its run enqueued (or, by its
policy, the run before it aborted first, or the occurrence skipped), then the ticker
acked with its next occurrence, which remembers the run it enqueued."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from tickwork.scheduler import TickworkError
from tickwork.scheduler.backends import Claim, OnConflict, StoredMessage
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.schedules import control
from tickwork.scheduler.schedules.overlap import last_runs, run_of, with_last_run
from tickwork.scheduler.workflows.graph_records import GraphDescription, halted
from tickwork.scheduler.workflows.graph_schedules import (
    instance_id,
    live_instance,
    stored_graph,
    with_live_instance,
)
from tickwork.triggers import Overlap
from tickwork.workers.context import WorkerContext
from tickwork.workers.settling.verdicts import Decider

log = logging.getLogger("tickwork.worker")


class Tickers:
    """Fires the due occurrences of overlapping schedules for a worker's settler."""

    def __init__(
        self,
        context: WorkerContext,
        decider: Decider,
        with_retries: Callable[[Callable[[], Any]], Any],
    ) -> None:
        self._app = context.app
        self._backend = context.backend
        self._decider = decider
        self._with_retries = with_retries
        self._permits = context.permits
        self._nudge = context.nudge
        self._now_ms = context.now_ms

    def fire(self, claim: Claim, message: Message) -> None:
        """Enqueue the run of ``message``'s occurrence as its policy says, then ack the
        ticker with its next occurrence (a forced stop between the two: the ticker is
        delivered again, and the run, named by its occurrence, is not enqueued twice)."""
        now = self._now_ms()
        assert message.trigger is not None
        policy = message.trigger.overlap
        run = run_of(self._app.builder, message, claim.due_ms, now)
        skip = self._before(policy, message, now)
        if skip is None:  # a forced stop
            self._permits.give(1)
            return
        if not skip:
            enqueue = partial(self._backend.messages.enqueue, [run], OnConflict.IGNORE)
            if self._with_retries(enqueue) is None:
                self._permits.give(1)
                return
        ticker = message if policy is Overlap.ALLOW or skip else with_last_run(message, run.id)
        build = self._app.builder.following_run
        try:
            nxt, dropped = build(ticker, now, False)
        except TickworkError as err:  # a trigger that cannot plan: the schedule ends here
            log.error("cannot schedule the next occurrence of %s: %s", message.id, err)
            nxt, dropped = None, 0
        why = "a run of the schedule waits already (overlap buffer_one)" if skip else None
        entry = self._decider.ledger.not_run(message, dropped, now, skipped=why)
        self._with_retries(lambda: self._backend.leases.ack([(claim, nxt)], [entry]))
        if not skip:
            self._nudge()  # the run is due now, or soon: the consumer need not wait a poll
        self._permits.give(1)

    def start_graph(self, claim: Claim, message: Message) -> None:
        """A scheduled graph's occurrence is due: start its run (named by the occurrence,
        so a schedule delivered twice starts it once), unless the run before it is still
        going (skipped, ``skipped_overlap``), then ack the schedule with its next
        occurrence, which remembers the run. A run that cannot be stored (its queue full,
        the backend failing) is skipped too, with an error logged."""
        now = self._now_ms()
        graph_id = instance_id(message, message.scheduled_at)
        previous = live_instance(message)
        going = previous is not None and previous != graph_id and self._going(previous)
        if going is None:
            self._permits.give(1)
            return
        if not going and not self._started(graph_id):
            try:
                spec = stored_graph(message).graph()
                self._app.batches.start_run(spec, graph_id, claim.due_ms)
                log.info("%s: started graph %s", message.key, graph_id)
                self._nudge()
            except TickworkError as err:
                log.error("%s: graph run %s not started (skipped): %s", message.key, graph_id, err)
                going = True
        remembered = previous if going and previous is not None else graph_id
        try:
            nxt, dropped = self._app.builder.following_run(
                with_live_instance(message, remembered), now, True
            )
        except TickworkError as err:
            log.error("cannot schedule the next occurrence of %s: %s", message.id, err)
            nxt, dropped = None, 0
        why = f"the graph's run {remembered} is still going" if going else None
        entry = self._decider.ledger.not_run(message, dropped, now, skipped=why)
        self._with_retries(lambda: self._backend.leases.ack([(claim, nxt)], [entry]))
        self._permits.give(1)

    def _going(self, graph_id: str) -> bool | None:
        """Whether graph run ``graph_id`` is still going: stored, not complete, neither
        cancelled nor stopped at a failure (None on a forced stop)."""
        read = partial(self._backend.batches.read, graph_id, False)
        found = self._with_retries(lambda: (read(),))
        if found is None:
            return None
        record = found[0]
        if record is None or record.description is None:
            return False
        size = len(GraphDescription.decode(record.description).steps)
        if record.settled - record.failed >= size:
            return False
        if not record.failed:
            return True
        full = self._with_retries(lambda: (self._backend.batches.read(graph_id),))
        if full is None:
            return None
        return full[0] is not None and not halted(full[0])

    def _started(self, graph_id: str) -> bool:
        """Whether run ``graph_id`` was stored already (a schedule delivered again)."""
        read = partial(self._backend.batches.read, graph_id, False)
        found = self._with_retries(lambda: (read(),))
        return found is None or found[0] is not None

    def _before(self, policy: Overlap, message: Message, now: int) -> bool | None:
        """What the runs before this one mean for it, by ``policy``: True to skip this
        occurrence (``buffer_one``: the run before the last one is still stored, so the
        last one waits behind it), False to enqueue it (after aborting the runs before for
        ``cancel_other`` and ``terminate_other``); None on a forced stop."""
        if policy in (Overlap.ALLOW, Overlap.BUFFER_ALL):
            return False
        before = last_runs(message)
        if policy is Overlap.BUFFER_ONE:
            if len(before) < 2:
                return False
            found = self._read(before[0], message.queue)
            return None if found is None else found[0] is not None
        for run_id in before:
            found = self._read(run_id, message.queue)
            if found is None:
                return None
            stored = found[0]
            if stored is None:
                continue
            done = partial(control.abort, self._backend, stored, True, now)
            aborted = self._with_retries(done)
            if aborted is None:
                return None
            log.info(
                "%s: the occurrence at %s %s the run before it (%s: %s)",
                message.key or message.chain,
                message.scheduled_at.isoformat(),
                "cancels" if policy is Overlap.CANCEL_OTHER else "terminates",
                run_id,
                aborted,
            )
        return False

    def _read(self, run_id: str, queue: str) -> tuple[StoredMessage | None] | None:
        """``(the stored run or None,)``, or None on a forced stop."""
        get = partial(self._backend.messages.get, run_id, queue)
        found: tuple[StoredMessage | None] | None = self._with_retries(lambda: (get(),))
        return found
