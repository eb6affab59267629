"""The settler's plan: each finished run as a ``Settled`` item (how it is written, and
what rides along with the write), grouped by write. Outcomes (``outcomes.py``) make the
items; riders (``riders.py``) add their writes to them; ``settler.py`` writes them.

Both are plug-ins in an ordered list (``workers/registered.py``): a new way for a run to
end, or a new write that rides along, is a class in a module of its own and one line that
adds it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import Enum

from tickwork.scheduler import TickworkError
from tickwork.scheduler.backends import Envelope, Failure, LedgerEntry, MemberOutcome
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.intake.holdings import Work
from tickwork.workers.pools.execution import HandlerResult
from tickwork.workers.settling.ledger import RunLedger

log = logging.getLogger("tickwork.worker")

#: a result record to keep: (message id, record, how long in ms), as ``Results.put`` takes
Kept = tuple[str, bytes, int]


class Write(Enum):
    """How the backend is told a run ended (one lease call each)."""

    ACK = "ack"  # done: acked with its chain's next occurrence
    REDELIVER = "redeliver"  # nothing written: due again when its lease ends
    RETRY = "retry"  # due again at ``due_ms``, the attempt counted
    SNOOZE = "snooze"  # due again at ``due_ms``, the attempt not counted
    POISON = "poison"  # to the poison store with ``failure``, its chain going on


class Settled:
    """One finished run: how it ended (``name``, one of the counted outcomes of
    ``scheduler.views.activity.OUTCOMES``, as the hooks' ``after_run`` and the metrics
    call it; ``recorded`` in its ledger, if it keeps one), how it is written, and the
    writes riding along (next occurrence, ledger entry, result record, batch member),
    filled in by the riders.

    A plain class, not a dataclass: one is made per run, and a field an outcome does not
    set is read from the class (a made-up ``Settled`` of 18 fields costs a plain
    acked run a microsecond). An outcome sets the fields its write needs after making it
    (``outcomes.py``)."""

    why: str | None = None  # the ledger's error or note
    failure: Failure | None = None  # POISON: why, as the poison store keeps it
    due_ms: int = 0  # RETRY, SNOOZE: due again then
    delay_s: float = 0.0  # RETRY: the backoff
    max_attempts: int = 0  # RETRY: of the task's policy (for the log line)
    continues: bool = True  # its chain goes on (False: an abort that ended the chain)
    #: ACK: False when it never ran (missed): its chain's last success stays, its next
    #: step is not taken
    ran: bool = True
    nxt: Envelope | None = None
    dropped: int = 0  # grid occurrences before ``nxt`` its misfire policy dropped
    entry: LedgerEntry | None = None
    kept: Kept | None = None
    member: MemberOutcome | None = None

    def __init__(
        self,
        work: Work,
        result: HandlerResult,
        name: str,
        write: Write,
        recorded: RunOutcome | None = None,
    ) -> None:
        self.work = work
        self.result = result
        self.name = name
        self.write = write
        self.recorded = recorded

    def poisoned(self, failure: Failure, why: str) -> Settled:
        """This item, to the poison store with ``failure`` (``why`` in its ledger)."""
        self.failure = failure
        self.why = why
        return self

    @property
    def error(self) -> tuple[str, str] | None:
        """POISON: the failure's type and text, as a kept result and a batch member
        record them."""
        failure = self.failure
        return None if failure is None else (failure.error_type, failure.message)


@dataclass(slots=True)
class Plan:
    """What one batch of finished runs asks the backend to do, by write."""

    acked: list[Settled] = field(default_factory=list)
    redelivered: list[Settled] = field(default_factory=list)
    retried: list[Settled] = field(default_factory=list)
    snoozed: list[Settled] = field(default_factory=list)
    poisoned: list[Settled] = field(default_factory=list)
    #: the acked that never ran (missed): counted and logged by their name
    unrun: list[Settled] = field(default_factory=list)
    #: the items that are not plain: the followers of acks are told of these
    followed: list[Settled] = field(default_factory=list)

    by_write: dict[Write, list[Settled]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_write = {
            Write.ACK: self.acked,
            Write.REDELIVER: self.redelivered,
            Write.RETRY: self.retried,
            Write.SNOOZE: self.snoozed,
            Write.POISON: self.poisoned,
        }

    def add(self, item: Settled) -> None:
        self.by_write[item.write].append(item)
        if not item.ran:  # only a missed occurrence, acked without running
            self.unrun.append(item)

    def outcomes(self) -> list[tuple[Work, HandlerResult, str]]:
        """Each run with how it ended, as the hooks' ``after_run`` names it."""
        items = self.acked + self.redelivered + self.retried + self.poisoned + self.snoozed
        return [(item.work, item.result, item.name) for item in items]


class Planning:
    """What outcomes and riders read: the app's tasks and builder, the run ledger."""

    def __init__(self, app: WorkerApp) -> None:
        self.app = app
        self.ledger = RunLedger(app)

    def next(
        self, work: Work, now: int, succeeded: bool, value: bytes | None = None
    ) -> tuple[Envelope | None, int]:
        """The next occurrence (or step) of ``work``'s chain (written from its stored
        body), and how many grid occurrences before it the misfire policy dropped."""
        build = self.app.builder.following_run
        try:
            return build(work.message, now, succeeded, value, body=work.claim.body)
        except TickworkError as err:
            log.error("cannot schedule the next occurrence of %s: %s", work.message.id, err)
            return None, 0
