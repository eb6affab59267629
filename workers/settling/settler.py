"""The settler thread: writes what ``workers/settling/verdicts.py`` decides for finished runs.

Pools report ``(work, result)`` here (``finished``, from any thread). The thread drains
them in batches of up to 1,000, asks the ``Decider`` for the plan (ack, redeliver,
retry or poison each run, with its next occurrence and ledger entry built) and writes
it: the result records to keep and the batch members' outcomes first, then the acks in
one call (each with its chain's next occurrence and ledger record in the same atomic
step, and the slots of the batch's runs given back), then each retry and poison (which
carry their record too). Every path gives the permit back and forgets the work. An
occurrence of a schedule with ``overlap="allow"`` never runs here: ``fire_ticker``
enqueues its run, then acks it. Backend writes are retried until they succeed or the
worker is forced to stop: no result is dropped for a backend's blink.
"""

from __future__ import annotations

import logging
import queue as queue_module
import time
from collections.abc import Callable, Sequence

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import (
    Claim,
    Envelope,
    Failure,
    LedgerEntry,
)
from tickwork.scheduler.hooks import notify
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.runs.context import RunInfo
from tickwork.scheduler.workflows.graph_records import PARKED_MS
from tickwork.workers.admission.limits import LimitGate
from tickwork.workers.context import WorkerContext
from tickwork.workers.intake.holdings import Work, logged_error
from tickwork.workers.pools.execution import HandlerResult
from tickwork.workers.settling import said
from tickwork.workers.settling.followers import AFTER_ACK, AFTER_POISON
from tickwork.workers.settling.plan import Settled, Write
from tickwork.workers.settling.retrying import Retrying
from tickwork.workers.settling.tickers import Tickers
from tickwork.workers.settling.verdicts import Decider
from tickwork.workers.workflows.workflow_counts import WorkflowCounts

log = logging.getLogger("tickwork.worker")

_BATCH = 1000  # results settled per backend round trip, at most
#: while more of the work held is still running, the settler waits up to LINGER_S after
#: a batch's first result for it to reach LINGER_BATCH (as a producer's linger does):
#: fewer, larger acks for fast handlers; with nothing else held, an ack never waits
LINGER_S = 0.001
LINGER_BATCH = 64


def _run_s(work: Work, result: HandlerResult) -> float | None:
    """How long the run took, in seconds (None for one that never started)."""
    return result.duration_ms / 1000 if work.started_ms else None


class Settler:
    """Acks, retries, poisons and releases the work this process holds."""

    def __init__(self, context: WorkerContext, limits: LimitGate) -> None:
        # a chain's next step or a batch's callback is due: the consumer claims now
        self._nudge = context.nudge
        self._limits = limits
        self._metrics = context.counting  # None: nothing counts, no call per run
        self._app = context.app
        self._after_poison = tuple(AFTER_POISON)  # what follows a written poison
        self._after_ack = tuple(AFTER_ACK)  # ... and written acks (not the plain ones)
        self._backend = backend = context.backend
        self._holdings = context.holdings
        self._permits = context.permits
        self._counters = context.counters
        self._now_ms = context.now_ms
        #: a backend write retried until it is written (or the worker is forced to stop)
        self._with_retries = Retrying(context.counters, context.forced)
        self._results: queue_module.SimpleQueue[tuple[Work, HandlerResult]] = (
            queue_module.SimpleQueue()
        )
        self.counts = WorkflowCounts(backend, self._with_retries, self._nudge, self._now_ms)
        self._decider = Decider(context.app)
        self.tickers = Tickers(context, self._decider, self._with_retries)
        self._hooks = context.hooks

    def finished(self, work: Work, result: HandlerResult) -> None:
        """A pool's callback (any thread): the permit is lent back now, before the ack."""
        if work.holds_permit and self._permits.lend():
            work.holds_permit, work.lent = False, True
        self._results.put((work, result))

    def run(self, may_stop: Callable[[], bool]) -> None:
        """Settle results until there are none and ``may_stop()`` says shutdown is done."""
        while True:
            batch = self._drain()
            if batch:
                self.settle(batch)
            elif may_stop():
                return

    def _drain(self) -> list[tuple[Work, HandlerResult]]:
        try:
            first = self._results.get(timeout=0.05)
        except queue_module.Empty:
            return []
        batch = [first]
        linger_until = None
        while len(batch) < _BATCH:
            try:
                batch.append(self._results.get_nowait())
                continue
            except queue_module.Empty:
                pass
            if len(batch) >= LINGER_BATCH or self._holdings.count() <= len(batch):
                break  # large enough, or nothing else is running to wait for
            now = time.monotonic()
            if linger_until is None:
                linger_until = now + LINGER_S
            elif now >= linger_until:
                break
            try:
                batch.append(self._results.get(timeout=linger_until - now))
            except queue_module.Empty:
                break
        return batch

    # -- settling: the plan (``workers/settling/verdicts.py``) written ---------------------------

    def settle(self, batch: list[tuple[Work, HandlerResult]]) -> None:
        """Write the outcome of each finished handler: what to keep and the batch members
        first, then the acks in one call (with the slots of the batch's runs), then each
        retry and poison."""
        now = self._now_ms()
        plan = self._decider.plan(batch, now)
        done = [work for work, _ in batch]
        if self._metrics is not None:
            for item in plan.acked:
                self._metrics.settled(item.work, item.name, _run_s(item.work, item.result))
        if log.isEnabledFor(logging.DEBUG):
            for item in plan.acked:
                said.done(item)
        for item in plan.unrun:
            said.unrun(item)
            self._counters.add(item.name)
        for item in plan.redelivered:
            work = item.work
            said.redelivered(item)
            self._counters.add("redelivered")
            if self._metrics is not None:
                self._metrics.settled(work, "redelivered", _run_s(work, item.result))
        kept = [item.kept for item in plan.acked if item.kept is not None]
        if kept:  # a record that says "succeeded" never outlives a lost ack's run: before
            self._with_retries(lambda: self._backend.results.put(kept))
        acked = self.counts.acked(plan.acked)
        # the slots of this batch's runs go back with the acks (one round trip where the
        # backend can); forget() then finds none left to give back
        held = self._limits.take_slots(done) if any(w.slot is not None for w in done) else []
        if acked:
            acks = [(item.work.claim, item.nxt) for item in acked]
            entries = [item.entry for item in acked]
            landed = self._ack(acks, held, entries if any(entries) else ())
            if plan.followed and landed and self._after_ack:
                self._follow_acked(plan.followed, acked, landed)
        elif held:
            self._limits.release(held)
        for retried in plan.retried:
            self._retry(retried)
        for snoozed in plan.snoozed:
            self._snooze(snoozed)
        # (queue, "aborted" or "expired") -> runs so settled, counted besides "poisoned"
        counted: dict[tuple[str, str], int] = {}
        for poisoned in plan.poisoned:
            queue, outcome = poisoned.work.claim.queue, poisoned.name
            if self._metrics is not None:
                self._metrics.settled(
                    poisoned.work, outcome, _run_s(poisoned.work, poisoned.result)
                )
            if self._poison(poisoned) and outcome != "poisoned":
                counted[(queue, outcome)] = counted.get((queue, outcome), 0) + 1
        aborts = [work.claim.id for work in done if work.abort is not None]
        if aborts:  # their runs are settled: drop the requests
            self._clear_aborts(aborts)
        for (queue, outcome), count in counted.items():  # one write per queue and outcome
            try:
                self._backend.queues.add_counters(queue, {outcome: count})
            except BackendError as err:
                log.warning("cannot count %d %s run(s) of %s: %s", count, outcome, queue, err)
        if self._hooks.after_run:
            for work, result, outcome in plan.outcomes():
                notify(self._hooks.after_run, work.run_info(), outcome, result.duration_ms)
        self.forget(done)

    def _ack(
        self,
        acks: list[tuple[Claim, Envelope | None]],
        slots: list[tuple[str, str]],
        entries: Sequence[LedgerEntry | None],
    ) -> list[bool]:
        """Write the acks; for each, whether it landed (none when the stop was forced)."""
        settled = self._with_retries(
            lambda: self._backend.leases.ack_releasing(acks, slots, entries)
        )
        if settled is None:
            return []
        results, waiters = settled
        self._limits.wake(waiters)
        now = self._now_ms()
        if any(nxt is not None and nxt.due_ms <= now for _, nxt in acks):
            self._nudge()  # a chain's next step is due: the consumer need not wait a poll
        held = sum(results)
        self._counters.add("acked", held)
        self._counters.add("stale", len(results) - held)
        for (claim, _), ok in zip(acks, results, strict=True):
            if not ok:
                log.warning(
                    "ack of %s refused: its lease was lost (it ran again elsewhere "
                    "or was cancelled); no next occurrence from this run",
                    claim.id,
                )
        return list(results)

    def _follow_acked(
        self, followed: list[Settled], acked: list[Settled], landed: list[bool]
    ) -> None:
        """Tell the followers of acks of the items that are not plain whose ack landed."""
        ids = {item.work.claim.id for item, ok in zip(acked, landed, strict=True) if ok}
        items = [item for item in followed if item.write is Write.ACK and item.work.claim.id in ids]
        if items and any([f.follow_acked(items, self._app) for f in self._after_ack]):
            self._nudge()  # a parent run was woken: the consumer need not wait a poll

    def _retry(self, retried: Settled) -> None:
        work, result = retried.work, retried.result
        if self._metrics is not None:
            self._metrics.settled(work, "retried", _run_s(work, result))
        said.retried(retried, self._hooks)
        error = retried.why or f"{result.error_type}: {result.error}"
        if self._hooks.on_retry:
            notify(self._hooks.on_retry, work.run_info(), error, retried.delay_s)
        claim, due_ms, entry = work.claim, retried.due_ms, retried.entry
        ok = self._with_retries(lambda: self._backend.leases.retry(claim, due_ms, error, entry))
        self._counters.add("retried" if ok else "stale")

    def _snooze(self, snoozed: Settled) -> None:
        """Give a snoozed (or deferred) run back, due again after its delay, attempt not
        counted; its
        ledger entry after (a lost entry loses a line of history, never the message)."""
        work, name = snoozed.work, snoozed.name  # "snoozed", or "deferred" (unknown task)
        if self._metrics is not None:
            self._metrics.settled(work, name, _run_s(work, snoozed.result))
        said.snoozed(snoozed)
        claim, due_ms = work.claim, snoozed.due_ms
        released = self._with_retries(lambda: self._backend.leases.release([claim], due_ms))
        self._counters.add(name if released else "stale")
        entry = snoozed.entry
        if released and entry is not None:
            self._with_retries(lambda: self._backend.ledger.append([entry]))

    def _poison(self, poisoned: Settled) -> bool:
        """To the poison store, after keeping its record and counting it as a batch
        member; True if written."""
        work, failure = poisoned.work, poisoned.failure
        assert failure is not None
        message = work.message
        said.poisoned(poisoned, self._hooks)
        if self._hooks.on_poison:
            notify(self._hooks.on_poison, work.run_info(), failure)
        if poisoned.kept is not None:
            kept = [poisoned.kept]
            self._with_retries(lambda: self._backend.results.put(kept))
        error = (failure.error_type, failure.message)
        if (poisoned.member is not None or message.node is not None) and not self.counts.failed(
            work, error, poisoned.member
        ):
            return False  # forced stop: it is left to be redelivered
        claim, nxt, entry = work.claim, poisoned.nxt, poisoned.entry
        ok = bool(
            self._with_retries(lambda: self._backend.leases.poison(claim, failure, nxt, entry))
        )
        self._counters.add(poisoned.name if ok else "stale")
        if ok and any([follower.follow(poisoned, self._app) for follower in self._after_poison]):
            self._nudge()  # a follower made work due now (a durable parent woken)
        return ok

    def _clear_aborts(self, message_ids: list[str]) -> None:
        try:
            self._backend.aborts.clear(message_ids)
        except BackendError as err:
            log.warning("cannot drop settled abort requests (they lapse on their own): %s", err)

    def poison_now(self, claim: Claim, failure: Failure, message: Message | None = None) -> None:
        """Poison a claim that can never run (undecodable, unknown task) at once; a batch
        member or graph step among them (``message`` decoded) counts as failed."""
        log.error("poisoning %s: %s", claim.id, logged_error(self._hooks, failure.message))
        if self._hooks.on_poison:
            task = message.task if message is not None else ""
            info = RunInfo(claim.id, task, claim.queue, claim.key, claim.attempt)
            notify(self._hooks.on_poison, info, failure)
        if message is not None and (message.member is not None or message.node is not None):
            work = Work(claim, message, holds_permit=False)
            if not self.counts.failed(work, (failure.error_type, failure.message)):
                self._permits.give(1)
                return
        try:
            done = self._backend.leases.poison(claim, failure)
        except BackendError as err:
            log.warning("poison of %s failed (its lease will expire): %s", claim.id, err)
            done = False
        self._counters.add("poisoned" if done else "stale")
        self._permits.give(1)

    def close_window(self, claim: Claim) -> None:
        """Drop a ``unique_for`` window that came due (its key is free again)."""
        try:
            self._backend.leases.ack([(claim, None)])
        except BackendError as err:
            log.warning(
                "closing the unique window %s failed (it comes due again): %s", claim.id, err
            )
        self._permits.give(1)

    def hold(self, work: Work) -> None:
        """A step of a stopped graph that was about to start: parked again, its attempt
        not counted, until the graph resumes (``workers/workflows/graph_fanin.py``)."""
        log.info("%s id=%s is held: its graph is stopped", work.message.task, work.message.id)
        self.release([work], PARKED_MS)

    def release(self, works: list[Work], due_ms: int | None = None) -> None:
        """Give back claims that never started: due again at once (or at ``due_ms``),
        attempt not counted."""
        if not works:
            return
        try:
            released = self._backend.leases.release([w.claim for w in works], due_ms)
        except BackendError as err:
            log.warning("release failed (leases will expire instead): %s", err)
            released = 0
        self._counters.add("released", released)
        self.forget(works)

    def forget(self, works: list[Work]) -> None:
        """Work has left this process: give back its concurrency slots (waking waiters),
        drop it and give its permits back."""
        if any(work.slot is not None for work in works):
            self._limits.settled(works)
        self._holdings.remove(works)
        self._permits.give(sum(work.holds_permit for work in works))
        self._permits.repaid(sum(work.lent for work in works))
