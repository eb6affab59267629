"""Records the backend contract hands back besides messages: failures, queue
statistics, abort requests, the slots of concurrency limits, the starts of rate limits,
the members of batches and the entries of the occurrence ledger."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a message went to the poison queue."""

    reason: str  # "exception", "undecodable", "unknown_task"
    error_type: str
    message: str
    traceback: str = ""


@dataclass(frozen=True, slots=True)
class QueueStats:
    queue: str
    ready: int
    scheduled: int
    in_flight: int
    poison: int
    next_due_ms: int | None
    counters: dict[str, int] = field(default_factory=dict)
    shards: dict[int, int] = field(default_factory=dict)
    paused: bool = False
    max_pending: int | None = None  # the queue's bound, if it has one

    @property
    def pending(self) -> int:
        """Messages that count against the bound: waiting or leased."""
        return self.ready + self.scheduled + self.in_flight


@dataclass(frozen=True, slots=True)
class AbortRequest:
    """A request to stop a running message: workers holding it stop its handler. It lapses
    at ``expires_ms`` (a request outlives the run it targets, so a redelivery after a
    crash is stopped too; it must not outlive it for ever)."""

    message_id: str
    queue: str
    continue_chain: bool  # store the chain's next occurrence when the aborted run settles
    requested_ms: int
    expires_ms: int


@dataclass(frozen=True, slots=True)
class SlotRequest:
    """Ask for one of ``capacity`` slots of the concurrency limit ``limit`` (a limit key,
    global to the backend) for the run of ``message_id``, leased for ``lease_ms`` on the
    backend's clock. ``queue`` and ``key`` locate the message when it has to wait."""

    limit: str
    capacity: int
    message_id: str
    queue: str
    key: str | None
    lease_ms: int


class RateRequest(NamedTuple):
    """Ask for a start of the rate limit ``limit`` (a limit key, global to the backend):
    at most ``starts`` units in any ``period_ms`` on the backend's clock, this start
    counting ``units`` of them (its cost, 1 to ``starts``). ``member`` names the start
    (message id and attempt), so asking again finds the same reservation. ``reserve``
    False: a start that cannot be now is not recorded at all (a throttle that drops).
    (A named tuple: one is built per rate-limited run.)"""

    limit: str
    starts: int
    period_ms: int
    member: str
    units: int = 1
    reserve: bool = True


class Waiter(NamedTuple):
    """A message waiting for a slot of the concurrency limit ``limit``, as
    ``Limits.release`` hands it back to be woken."""

    limit: str
    queue: str
    key: str | None
    message_id: str


class MemberOutcome(NamedTuple):
    """How member ``member`` (its index in the group) of batch ``batch`` settled: its
    outcome record (what it returned, or why it failed for good), whether it ``failed``,
    and when the batch's records expire (epoch ms, backend clock)."""

    batch: str
    member: int
    failed: bool
    outcome: bytes
    expires_ms: int


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """A batch as stored: the description given when it was opened (None if it was never
    opened or expired), how many members settled and how many of those failed, and the
    outcome of each settled member by index (when asked for)."""

    description: bytes | None
    settled: int
    failed: int
    outcomes: dict[int, bytes] = field(default_factory=dict)


class LedgerEntry(NamedTuple):
    """Records to append to the ledger (the history) of ``subject`` in ``queue``, oldest
    first: the backend keeps the newest ``keep`` records of each subject and none older
    than ``ttl_ms`` (backend clock). Records are opaque bytes (``scheduler.schedules.ledger``).
    (A named tuple: one is built per settled run of a recurring schedule.)"""

    queue: str
    subject: str
    records: tuple[bytes, ...]
    keep: int
    ttl_ms: int


#: Counter names every backend keeps per queue.
COUNTERS = (
    "enqueued",
    "claimed",
    "acked",
    "redelivered",
    "retried",
    "poisoned",
    "aborted",
    "empty_polls",
)
