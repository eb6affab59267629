"""The settler thread: turns handler results into backend writes.

Pools report ``(work, result)`` here (``finished``, from any thread). The thread drains
them in batches of up to 1,000 and settles each by its verdict: a returned handler is
acked, with its chain's next occurrence and its ledger record (a schedule's run, or one
of a task with ``history=True``: ``workers/ledger.py``) in the same atomic step; a retry
and a poison carry their record too; ``False`` leaves it for redelivery after its lease;
an exception retries with backoff or poisons, as ``scheduler.retry.decide`` says. An
aborted run (``app.abort``, or a handler that raised ``Aborted``) is never retried: it
goes to the poison store with reason ``aborted``, with its chain's next occurrence
unless the abort asked to end the chain. Every path gives the permit back and forgets
the work. An occurrence of a schedule with ``overlap="allow"`` never runs here:
``fire_ticker`` enqueues its run, then acks it. Backend writes are retried until they
succeed or the worker is forced to stop: no result is dropped for a backend's blink.
"""

from __future__ import annotations

import logging
import queue as queue_module
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from scheduler import App, BackendError, TickworkError
from scheduler.backends import (
    Backend,
    Claim,
    Envelope,
    Failure,
    LedgerEntry,
    MemberOutcome,
    OnConflict,
)
from scheduler.context import RunInfo
from scheduler.hooks import notify
from scheduler.ledger import RunOutcome
from scheduler.message import Message
from scheduler.overlap import run_of
from scheduler.results import failed_record, succeeded_record
from scheduler.retry import GiveUp, decide
from workers.execution import HandlerResult, Verdict
from workers.fanin import FanIn, member_outcome
from workers.flow import Counters, Permits
from workers.holdings import Holdings, Work, log_fields
from workers.ledger import RunLedger
from workers.limits import LimitGate
from workers.metrics import NoMetrics

log = logging.getLogger("tickwork.worker")

_BATCH = 1000  # results settled per backend round trip, at most

#: how a run settled by its verdict, as the hooks' ``after_run`` names it (a failed run:
#: retried or poisoned, as decided)
_OUTCOMES = {
    Verdict.ACK: "succeeded",
    Verdict.REDELIVER: "redelivered",
    Verdict.ABORTED: "aborted",
    Verdict.FAIL: "poisoned",
    Verdict.POISON: "poisoned",
}


class Settler:
    """Acks, retries, poisons and releases the work this process holds."""

    def __init__(
        self,
        app: App,
        backend: Backend,
        holdings: Holdings,
        permits: Permits,
        counters: Counters,
        now_ms: Callable[[], int],
        forced: threading.Event,
        limits: LimitGate,
        metrics: NoMetrics,
        nudge: Callable[[], None] = lambda: None,
    ) -> None:
        self._nudge = nudge  # a chain's next step or a batch's callback is due: claim now
        self._limits = limits
        self._metrics = metrics
        self._app = app
        self._backend = backend
        self._holdings = holdings
        self._permits = permits
        self._counters = counters
        self._now_ms = now_ms
        self._forced = forced
        self._results: queue_module.SimpleQueue[tuple[Work, HandlerResult]] = (
            queue_module.SimpleQueue()
        )
        self._fanin = FanIn(backend, self._with_retries, nudge)
        self._ledger = RunLedger(app)
        self._hooks = app.hooks

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
        while len(batch) < _BATCH:
            try:
                batch.append(self._results.get_nowait())
            except queue_module.Empty:
                break
        return batch

    # -- settling ------------------------------------------------------------------------

    def settle(self, batch: list[tuple[Work, HandlerResult]]) -> None:
        """Write the outcome of each finished handler: acks in one call, the rest one by one."""
        now = self._now_ms()
        acks: list[tuple[Claim, Envelope | None]] = []
        entries: list[LedgerEntry | None] = []  # each ack's ledger entry, in ack order
        done: list[Work] = []
        aborts: list[str] = []  # abort requests to drop: their runs are settled
        aborted: dict[str, int] = {}  # queue -> runs settled as aborted
        kept: list[tuple[str, bytes, int]] = []  # results to keep, written before the acks
        members: list[tuple[Work, MemberOutcome]] = []  # batch members, counted before too
        for work, result in batch:
            message = work.message
            done.append(work)
            if work.abort is not None:
                aborts.append(work.claim.id)
            run_s = result.duration_ms / 1000 if work.started_ms else None
            if result.verdict is Verdict.ABORTED or (
                work.abort is not None and result.verdict in (Verdict.FAIL, Verdict.REDELIVER)
            ):
                self._metrics.settled(work, "aborted", run_s)
                if self._abort(work, result, now):
                    aborted[work.claim.queue] = aborted.get(work.claim.queue, 0) + 1
            elif result.verdict is Verdict.ACK:
                self._metrics.settled(work, "succeeded", run_s)
                retention = self._app.result_retention_ms(message.task)
                if result.value is not None and retention is not None:
                    record = succeeded_record(result.value, work.claim.attempt, now)
                    kept.append((work.claim.id, record, retention))
                nxt, dropped = self._next(work, now, succeeded=True, value=result.value)
                acks.append((work.claim, nxt))
                entries.append(self._ledger.entry(work, RunOutcome.SUCCEEDED, now, None, dropped))
                if (outcome := member_outcome(work, now, result.value)) is not None:
                    members.append((work, outcome))
                if log.isEnabledFor(logging.INFO):
                    log.info(
                        "done %s id=%s in %.1fms",
                        message.task,
                        message.id,
                        result.duration_ms,
                        extra={**log_fields(work), "run_ms": round(result.duration_ms, 3)},
                    )
            elif result.verdict is Verdict.REDELIVER:
                log.info(
                    "%s id=%s returned False: due again when its lease ends",
                    message.task,
                    message.id,
                    extra=log_fields(work),
                )
                self._counters.add("redelivered")
                self._metrics.settled(work, "redelivered", run_s)
            else:
                self._fail(work, result, now, run_s)
        # the slots of this batch's runs go back with the acks (one round trip where the
        # backend can); forget() then finds none left to give back
        if kept:  # a record that says "succeeded" never outlives a lost ack's run: before
            self._with_retries(lambda: self._backend.results.put(kept))
        if members and not self._fanin.settle(members):  # forced stop: leave them to
            unsettled = {work.claim.id for work, _ in members}  # be redelivered
            kept_acks = [i for i, ack in enumerate(acks) if ack[0].id not in unsettled]
            acks, entries = [acks[i] for i in kept_acks], [entries[i] for i in kept_acks]
        held = self._limits.take_slots(done)
        if acks:
            self._ack(acks, held, entries if any(entries) else ())
        elif held:
            self._limits.release(held)
        if aborts:
            self._clear_aborts(aborts)
        for queue, count in aborted.items():  # one counter write per queue and batch
            try:
                self._backend.queues.add_counters(queue, {"aborted": count})
            except BackendError as err:
                log.warning("cannot count %d aborted run(s) of %s: %s", count, queue, err)
        if self._hooks.after_run:
            self._after_run(batch)
        self.forget(done)

    def _after_run(self, batch: list[tuple[Work, HandlerResult]]) -> None:
        """The hooks' ``after_run`` for each run of ``batch``, by how it was settled."""
        for work, result in batch:
            outcome = _OUTCOMES.get(result.verdict, "poisoned")
            if work.abort is not None and result.verdict in (Verdict.FAIL, Verdict.REDELIVER):
                outcome = "aborted"
            elif result.verdict is Verdict.FAIL and work.retried:
                outcome = "retried"
            notify(self._hooks.after_run, work.run_info(), outcome, result.duration_ms)

    def _ack(
        self,
        acks: list[tuple[Claim, Envelope | None]],
        slots: list[tuple[str, str]],
        entries: Sequence[LedgerEntry | None],
    ) -> None:
        settled = self._with_retries(
            lambda: self._backend.leases.ack_releasing(acks, slots, entries)
        )
        if settled is None:
            return
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

    def _next(
        self, work: Work, now: int, succeeded: bool, value: bytes | None = None
    ) -> tuple[Envelope | None, int]:
        """The next occurrence (or step) of ``work``'s chain (written from its stored
        body), and how many grid occurrences before it the misfire policy dropped."""
        build = self._app.builder.following_run
        try:
            return build(work.message, now, succeeded, value, body=work.claim.body)
        except TickworkError as err:
            log.error("cannot schedule the next occurrence of %s: %s", work.message.id, err)
            return None, 0

    def _fail(self, work: Work, result: HandlerResult, now: int, run_s: float | None) -> None:
        """A handler raised (or can never run): retry it or poison it, one decision."""
        claim, message = work.claim, work.message
        task = self._app.tasks.get(message.task)
        decision = (
            decide(task.options.retry, claim.attempt, result.verdict is Verdict.FAIL)
            if task is not None
            else GiveUp("not_retryable")
        )
        if isinstance(decision, GiveUp):
            self._metrics.settled(work, "poisoned", run_s)
            self._poison(work, result, now)
            return
        self._metrics.settled(work, "retried", run_s)
        log.warning(
            "%s id=%s failed (attempt %d of %d): %s: %s; retrying in %.2fs",
            message.task,
            message.id,
            claim.attempt,
            task.options.retry.max_attempts if task is not None else claim.attempt,
            result.error_type,
            result.error,
            decision.delay_s,
            extra=log_fields(work),
        )
        error = f"{result.error_type}: {result.error}"
        due_ms = now + int(decision.delay_s * 1000)
        work.retried = True
        if self._hooks.on_retry:
            notify(self._hooks.on_retry, work.run_info(), error, decision.delay_s)
        entry = self._ledger.entry(work, RunOutcome.RETRIED, now, error)
        ok = self._with_retries(lambda: self._backend.leases.retry(claim, due_ms, error, entry))
        self._counters.add("retried" if ok else "stale")

    def _abort(self, work: Work, result: HandlerResult, now: int) -> bool:
        """An aborted run: no retry; to the poison store with reason ``aborted``, and the
        chain's next occurrence unless the abort ended the chain. True if written."""
        claim, message = work.claim, work.message
        continue_chain = work.abort.continue_chain if work.abort is not None else True
        log.warning(
            "%s id=%s was aborted%s",
            message.task,
            message.id,
            "" if continue_chain or message.trigger is None else "; its chain ends",
            extra=log_fields(work),
        )
        why = (
            result.error
            if result.verdict is Verdict.ABORTED
            else f"{result.error_type}: {result.error}"
        )
        failure = Failure("aborted", "Aborted", why, result.traceback)
        if self._hooks.on_poison:
            notify(self._hooks.on_poison, work.run_info(), failure)
        self._keep_failure(work, "Aborted", why, now)
        if not self._settle_member(work, now, ("Aborted", why)):
            return False
        nxt, dropped = self._next(work, now, succeeded=False) if continue_chain else (None, 0)
        entry = self._ledger.entry(work, RunOutcome.ABORTED, now, why, dropped)
        ok = bool(
            self._with_retries(lambda: self._backend.leases.poison(claim, failure, nxt, entry))
        )
        self._counters.add("aborted" if ok else "stale")
        return ok

    def _clear_aborts(self, message_ids: list[str]) -> None:
        try:
            self._backend.aborts.clear(message_ids)
        except BackendError as err:
            log.warning("cannot drop settled abort requests (they lapse on their own): %s", err)

    def _poison(self, work: Work, result: HandlerResult, now: int) -> None:
        claim, message = work.claim, work.message
        reason = "exception" if result.verdict is Verdict.FAIL else "invalid"
        log.error(
            "%s id=%s goes to the poison queue after %d attempt(s): %s: %s",
            message.task,
            message.id,
            claim.attempt,
            result.error_type,
            result.error,
            extra=log_fields(work),
        )
        failure = Failure(reason, result.error_type, result.error, result.traceback)
        if self._hooks.on_poison:
            notify(self._hooks.on_poison, work.run_info(), failure)
        self._keep_failure(work, result.error_type, result.error, now)
        if not self._settle_member(work, now, (result.error_type, result.error)):
            return
        nxt, dropped = self._next(work, now, succeeded=False)
        error = f"{result.error_type}: {result.error}"
        entry = self._ledger.entry(work, RunOutcome.POISONED, now, error, dropped)
        ok = self._with_retries(lambda: self._backend.leases.poison(claim, failure, nxt, entry))
        self._counters.add("poisoned" if ok else "stale")

    def _keep_failure(self, work: Work, error_type: str, error: str, now: int) -> None:
        """Keep the record of a run that failed for good, if its task keeps results."""
        retention = self._app.result_retention_ms(work.message.task)
        if retention is not None:
            record = failed_record(error_type, error, work.claim.attempt, now)
            item = (work.claim.id, record, retention)
            self._with_retries(lambda: self._backend.results.put([item]))

    def _settle_member(self, work: Work, now: int, error: tuple[str, str]) -> bool:
        """Count a batch member that failed for good (before it is poisoned); False if
        that could not be written (forced stop: it is left to be redelivered)."""
        outcome = member_outcome(work, now, error=error)
        return outcome is None or self._fanin.settle([(work, outcome)])

    def poison_now(self, claim: Claim, failure: Failure, message: Message | None = None) -> None:
        """Poison a claim that can never run (undecodable, unknown task) at once; a batch
        member among them (``message`` decoded) counts as failed."""
        log.error("poisoning %s: %s", claim.id, failure.message)
        if self._hooks.on_poison:
            task = message.task if message is not None else ""
            info = RunInfo(claim.id, task, claim.queue, claim.key, claim.attempt)
            notify(self._hooks.on_poison, info, failure)
        if message is not None and message.member is not None:
            work = Work(claim, message, holds_permit=False)
            if not self._settle_member(work, self._now_ms(), (failure.error_type, failure.message)):
                self._permits.give(1)
                return
        try:
            done = self._backend.leases.poison(claim, failure)
        except BackendError as err:
            log.warning("poison of %s failed (its lease will expire): %s", claim.id, err)
            done = False
        self._counters.add("poisoned" if done else "stale")
        self._permits.give(1)

    def fire_ticker(self, claim: Claim, message: Message) -> None:
        """An occurrence of a schedule with ``overlap="allow"`` is due: enqueue its run,
        then ack it with its next occurrence (``scheduler.overlap``)."""
        now = self._now_ms()
        run = run_of(self._app.builder, message, claim.due_ms, now)
        enqueued = self._with_retries(
            lambda: self._backend.messages.enqueue([run], OnConflict.IGNORE)
        )
        nxt, dropped = self._next(Work(claim, message, holds_permit=False), now, succeeded=False)
        if enqueued is not None:  # else a forced stop: the ticker is delivered again
            entry = self._ledger.not_run(message, dropped, now)
            self._with_retries(lambda: self._backend.leases.ack([(claim, nxt)], [entry]))
            self._nudge()  # the run is due now, or soon: the consumer need not wait a poll
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

    def release(self, works: list[Work]) -> None:
        """Give back claims that never started: due again at once, attempt not counted."""
        if not works:
            return
        try:
            released = self._backend.leases.release([w.claim for w in works])
        except BackendError as err:
            log.warning("release failed (leases will expire instead): %s", err)
            released = 0
        self._counters.add("released", released)
        self.forget(works)

    def forget(self, works: list[Work]) -> None:
        """Work has left this process: give back its concurrency slots (waking waiters),
        drop it and give its permits back."""
        self._limits.settled(works)
        self._holdings.remove(works)
        self._permits.give(sum(work.holds_permit for work in works))
        self._permits.repaid(sum(work.lent for work in works))

    def _with_retries(self, operation: Callable[[], Any]) -> Any:
        """Run a backend write, retrying on backend errors until it works or we are forced."""
        delay = 0.05
        while True:
            try:
                return operation()
            except BackendError as err:
                self._counters.add("backend_errors")
                if self._forced.is_set():
                    log.error("giving up a backend write on forced stop: %s", err)
                    return None
                log.warning("backend write failed, retrying in %.2fs: %s", delay, err)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
