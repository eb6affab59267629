"""The settler's decision: from finished runs to a plan of writes, writing nothing.

For each run, by its verdict (``workers/pools/execution.py``):

- returned: acked, with the result record to keep (a task that keeps results), its
  chain's next occurrence, its ledger entry and, for a batch member, its outcome;
- returned ``False``: left for redelivery after its lease;
- raised: retried after the delay ``scheduler.model.retry.decide`` gives while attempts
  remain, else poisoned; a message that can never run (unknown task, arguments no longer
  valid) is poisoned at once;
- aborted (``app.abort``, or a handler that raised ``Aborted``; also a run that failed
  after its abort was asked): never retried, to the poison store as ``aborted``, with
  its chain's next occurrence unless the abort ended the chain;
- expired (not started before its ``expires``): never run, to the poison store as
  ``expired`` (a replay runs it after all), its chain going on;
- returned ``Snooze``: given back, due again after its delay, its attempt not counted,
  with a ledger entry (``snoozed``) for a message that keeps history.

Each planned item carries everything its write needs (the next occurrence built, the
ledger entry, the records), so ``workers/settling/settler.py`` only writes, in its order.

A plain message (``Decider.plain``: a one-off without key, steps, batch or schedule of
its own, of a task that keeps no results and no history) goes through none of the
optional steps: no next occurrence is looked for, no ledger entry, result record or
batch outcome is built.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from tickwork.scheduler import TickworkError
from tickwork.scheduler.backends import Envelope, Failure, LedgerEntry, MemberOutcome
from tickwork.scheduler.model.headers import SCHEDULE
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.retry import GiveUp, decide
from tickwork.scheduler.runs.results import failed_record, succeeded_record
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult, Verdict
from tickwork.workers.settling.ledger import RunLedger
from tickwork.workers.workflows.fanin import member_outcome

log = logging.getLogger("tickwork.worker")

#: a result record to keep: (message id, record, how long in ms), as ``Results.put`` takes
Kept = tuple[str, bytes, int]


@dataclass(slots=True)
class Acked:
    """A run that returned: ack it (with ``nxt`` and ``entry``) after keeping ``kept``
    and counting ``member``."""

    work: Work
    result: HandlerResult
    nxt: Envelope | None
    entry: LedgerEntry | None
    kept: Kept | None  # the result record, for a task that keeps results
    member: MemberOutcome | None  # the outcome of a batch member


@dataclass(slots=True)
class Retried:
    """A run that failed with attempts left: due again at ``due_ms``."""

    work: Work
    result: HandlerResult
    delay_s: float
    due_ms: int
    error: str
    entry: LedgerEntry | None
    max_attempts: int


@dataclass(slots=True)
class Snoozed:
    """A run that returned ``Snooze``: due again at ``due_ms``, attempt not counted."""

    work: Work
    result: HandlerResult
    due_ms: int
    entry: LedgerEntry | None


@dataclass(slots=True)
class Poisoned:
    """A run that failed for good, or was aborted: to the poison store with ``failure``,
    its chain going on with ``nxt``, after keeping ``kept`` and counting ``member``."""

    work: Work
    result: HandlerResult
    failure: Failure
    nxt: Envelope | None
    entry: LedgerEntry | None
    kept: Kept | None  # the failure's record, for a task that keeps results
    member: MemberOutcome | None
    ends_chain: bool = False  # an abort that asked to end the chain

    @property
    def aborted(self) -> bool:
        return self.failure.reason == "aborted"

    @property
    def outcome(self) -> str:
        """How the run is counted: ``aborted``, ``expired`` or ``poisoned``."""
        reason = self.failure.reason
        return reason if reason in ("aborted", "expired") else "poisoned"


@dataclass(slots=True)
class Plan:
    """What one batch of finished runs asks the backend to do."""

    acked: list[Acked] = field(default_factory=list)
    redelivered: list[tuple[Work, HandlerResult]] = field(default_factory=list)
    retried: list[Retried] = field(default_factory=list)
    poisoned: list[Poisoned] = field(default_factory=list)
    snoozed: list[Snoozed] = field(default_factory=list)

    def outcomes(self) -> list[tuple[Work, HandlerResult, str]]:
        """Each run with how it was settled, as the hooks' ``after_run`` names it."""
        return (
            [(a.work, a.result, "succeeded") for a in self.acked]
            + [(work, result, "redelivered") for work, result in self.redelivered]
            + [(r.work, r.result, "retried") for r in self.retried]
            + [(p.work, p.result, p.outcome) for p in self.poisoned]
            + [(s.work, s.result, "snoozed") for s in self.snoozed]
        )


class Decider:
    """Plans the settling of finished runs for an app (its tasks' options, its builder)."""

    def __init__(self, app: WorkerApp) -> None:
        self._app = app
        self._ledger = RunLedger(app)
        self._plain_tasks: dict[str, bool] = {}  # task name -> it keeps no results or history

    def plain(self, message: Message) -> bool:
        """Whether ``message`` uses no optional feature: settling it is an ack, a retry
        or a poison and nothing else."""
        if (
            message.trigger is not None
            or message.key is not None
            or message.then
            or message.member is not None
            or message.callback is not None
            or message.node is not None
            or SCHEDULE in message.headers
        ):
            return False
        plain = self._plain_tasks.get(message.task)
        if plain is None:
            task = self._app.registry.tasks.get(message.task)
            plain = task is not None and (
                task.options.result_retention is None and not task.options.history
            )
            self._plain_tasks[message.task] = plain
        return plain

    @property
    def ledger(self) -> RunLedger:
        return self._ledger

    def plan(self, batch: list[tuple[Work, HandlerResult]], now: int) -> Plan:
        plan = Plan()
        for work, result in batch:
            if result.verdict is Verdict.EXPIRED:
                plan.poisoned.append(self._expired(work, result, now))
            elif result.verdict is Verdict.ABORTED or (
                work.abort is not None
                and result.verdict in (Verdict.FAIL, Verdict.REDELIVER, Verdict.SNOOZED)
            ):
                plan.poisoned.append(self._aborted(work, result, now))
            elif result.verdict is Verdict.ACK:
                plan.acked.append(self._acked(work, result, now))
            elif result.verdict is Verdict.REDELIVER:
                plan.redelivered.append((work, result))
            elif result.verdict is Verdict.SNOOZED:
                plan.snoozed.append(self._snoozed(work, result, now))
            else:
                failed = self._failed(work, result, now)
                if isinstance(failed, Retried):
                    plan.retried.append(failed)
                else:
                    plan.poisoned.append(failed)
        return plan

    def _acked(self, work: Work, result: HandlerResult, now: int) -> Acked:
        if self.plain(work.message):
            return Acked(work, result, None, None, None, None)
        retention = self._app.result_retention_ms(work.message.task)
        kept = (
            (work.claim.id, succeeded_record(result.value, work.claim.attempt, now), retention)
            if result.value is not None and retention is not None
            else None
        )
        nxt, dropped = self.next(work, now, succeeded=True, value=result.value)
        entry = self._ledger.entry(work, RunOutcome.SUCCEEDED, now, None, dropped)
        return Acked(work, result, nxt, entry, kept, member_outcome(work, now, result.value))

    def _failed(self, work: Work, result: HandlerResult, now: int) -> Retried | Poisoned:
        """A handler raised (or can never run): retry it or poison it, one decision."""
        claim, message = work.claim, work.message
        task = self._app.registry.tasks.get(message.task)
        decision = (
            decide(task.options.retry, claim.attempt, result.verdict is Verdict.FAIL)
            if task is not None
            else GiveUp("not_retryable")
        )
        error = f"{result.error_type}: {result.error}"
        plain = self.plain(message)
        if isinstance(decision, GiveUp):
            reason = "exception" if result.verdict is Verdict.FAIL else "invalid"
            failure = Failure(reason, result.error_type, result.error, result.traceback)
            if plain:
                return Poisoned(work, result, failure, None, None, None, None)
            nxt, dropped = self.next(work, now, succeeded=False)
            entry = self._ledger.entry(work, RunOutcome.POISONED, now, error, dropped)
            kept = self._failure_record(work, result.error_type, result.error, now)
            member = member_outcome(work, now, error=(result.error_type, result.error))
            return Poisoned(work, result, failure, nxt, entry, kept, member)
        due_ms = now + int(decision.delay_s * 1000)
        entry = None if plain else self._ledger.entry(work, RunOutcome.RETRIED, now, error)
        max_attempts = task.options.retry.max_attempts if task is not None else claim.attempt
        return Retried(work, result, decision.delay_s, due_ms, error, entry, max_attempts)

    def _snoozed(self, work: Work, result: HandlerResult, now: int) -> Snoozed:
        due_ms = now + math.ceil(result.snooze_s * 1000)
        why = f"snoozed for {result.snooze_s:g} s"
        entry = (
            None
            if self.plain(work.message)
            else self._ledger.entry(work, RunOutcome.SNOOZED, now, why)
        )
        return Snoozed(work, result, due_ms, entry)

    def _aborted(self, work: Work, result: HandlerResult, now: int) -> Poisoned:
        continue_chain = work.abort.continue_chain if work.abort is not None else True
        why = (
            result.error
            if result.verdict is Verdict.ABORTED
            else f"{result.error_type}: {result.error}"
        )
        failure = Failure("aborted", "Aborted", why, result.traceback)
        if self.plain(work.message):
            return Poisoned(work, result, failure, None, None, None, None, not continue_chain)
        nxt, dropped = self.next(work, now, succeeded=False) if continue_chain else (None, 0)
        entry = self._ledger.entry(work, RunOutcome.ABORTED, now, why, dropped)
        kept = self._failure_record(work, "Aborted", why, now)
        member = member_outcome(work, now, error=("Aborted", why))
        return Poisoned(work, result, failure, nxt, entry, kept, member, not continue_chain)

    def _expired(self, work: Work, result: HandlerResult, now: int) -> Poisoned:
        failure = Failure("expired", result.error_type, result.error)
        if self.plain(work.message):
            return Poisoned(work, result, failure, None, None, None, None)
        nxt, dropped = self.next(work, now, succeeded=False)
        entry = self._ledger.entry(work, RunOutcome.EXPIRED, now, result.error, dropped)
        kept = self._failure_record(work, result.error_type, result.error, now)
        member = member_outcome(work, now, error=(result.error_type, result.error))
        return Poisoned(work, result, failure, nxt, entry, kept, member)

    def _failure_record(self, work: Work, error_type: str, error: str, now: int) -> Kept | None:
        """The record of a run that failed for good, if its task keeps results."""
        retention = self._app.result_retention_ms(work.message.task)
        if retention is None:
            return None
        record = failed_record(error_type, error, work.claim.attempt, now)
        return work.claim.id, record, retention

    def next(
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
