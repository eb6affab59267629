"""Flow control (Pulsar's permits) and the worker's local counters."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

#: runs awaiting their ack whose permits went back early, per permit, at most (4 did as
#: well as no bound at all and better than 1: ``bench/NOTES.md``)
LENT_PER_PERMIT = 4


class Permits:
    """How many more messages this worker may hold: idle pool slots plus a small prefetch.

    A consumer takes permits before it claims and gives back what it did not use; every
    path that removes a message from the worker (ack, retry, poison, release, redeliver)
    gives its permit back, so credit cannot leak. A run that finished lends its permit
    back at once, before its ack is written (``lend``), so the ack's round trip is not
    part of the next claim's wait; at most ``LENT_PER_PERMIT`` x ``total`` are lent (runs
    awaiting their ack), so a slow backend still holds the worker back, and each is
    repaid when its message leaves the worker.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self._lent = 0
        self._need = 1  # free permits the (one) consumer waits for: it is woken then only
        self._waiting = False  # whether the consumer waits in ``take`` (read under the lock)
        self._condition = threading.Condition()

    def take(self, wanted: int, timeout_s: float, linger_s: float = 0.0) -> int:
        """Take up to ``wanted`` permits, waiting up to ``timeout_s`` for at least one.

        As in Pulsar's flow control, it prefers to refill in bulk: it waits up to
        ``linger_s`` for half of all permits (or ``wanted``) to be free before settling for
        fewer, so a busy worker claims a few large batches instead of many tiny ones.
        """
        bulk = min(wanted, max(1, self.total // 2))
        with self._condition:
            self._waiting = True
            try:
                if not self._condition.wait_for(lambda: self._free > 0, timeout_s):
                    return 0
                if self._free < bulk and linger_s > 0:
                    self._need = bulk
                    self._condition.wait_for(lambda: self._free >= bulk, linger_s)
                    self._need = 1
            finally:
                self._waiting = False
            taken = min(wanted, self._free)
            self._free -= taken
            return taken

    def force(self, count: int) -> None:
        """Take ``count`` permits now, even into debt (a timer fired: it must run)."""
        with self._condition:
            self._free -= count

    def give(self, count: int) -> None:
        if count:
            with self._condition:
                self._free += count
                if self._free >= self._need:
                    self._condition.notify_all()

    def resize(self, total: int) -> None:
        """Change how many permits there are (those held stay held: fewer may go into
        debt, repaid as messages leave)."""
        with self._condition:
            self._free += total - self.total
            self.total = total
            if self._free >= self._need:
                self._condition.notify_all()

    def lend(self) -> bool:
        """Give back the permit of a run that finished and awaits its ack, unless as many
        as may be are lent already; True when it was given back."""
        with self._condition:
            if self._lent >= LENT_PER_PERMIT * self.total:
                return False
            self._lent += 1
            self._free += 1
            if self._waiting and self._free >= self._need:
                self._condition.notify_all()
            return True

    def repaid(self, count: int) -> None:
        """``count`` lent permits' messages have left the worker."""
        if count:
            with self._condition:
                self._lent -= count


class Pace:
    """The prefetch of a worker that was given none, adapted to its handlers' pace: as
    many claimed messages beyond the running ones as its handlers get through in about
    ``BACKLOG_S`` plus a claim's round trip, between 2 x and ``HIGH`` x the concurrency
    (at least ``FLOOR``). Fast handlers then get large claims (fewer round trips per
    message), and a slow network larger ones still (the next claim comes back a round
    trip later: 0.2 s at 100 ms each way); slow handlers keep the prefetch at 2 x
    concurrency, so a worker does not hoard work others could run."""

    BACKLOG_S = 0.02
    HIGH = 12
    FLOOR = 100
    EVERY = 64  # runs between two looks at the pace

    def __init__(self, permits: Permits, concurrency: int, runners: int) -> None:
        """``permits`` start with a prefetch of 2 x ``concurrency`` (threads); ``runners``
        is how many handlers run at once (threads and ``async def`` coroutines)."""
        self._permits = permits
        self._runners = runners
        self._low = 2 * concurrency
        self._high = max(self.HIGH * concurrency, self.FLOOR, self._low)
        self._base = permits.total - self._low  # the permits of running work
        self.prefetch = self._low
        self._runs = 0
        self._run_ms = 0.0
        self._claim_s = 0.0  # a claim's round trip, smoothed

    def claimed(self, duration_s: float) -> None:
        """A claim took ``duration_s`` (the consumer's thread)."""
        self._claim_s += (duration_s - self._claim_s) / 8

    def ran(self, duration_ms: float) -> None:
        """A handler ran for ``duration_ms`` (any thread; a lost update only delays the
        next look)."""
        self._runs += 1
        self._run_ms += duration_ms
        if self._runs >= self.EVERY:
            runs, run_ms = self._runs, self._run_ms
            self._runs, self._run_ms = 0, 0.0
            self._adapt(run_ms / runs / 1000)

    def _adapt(self, mean_run_s: float) -> None:
        wanted = self._runners * (self.BACKLOG_S + self._claim_s) / max(mean_run_s, 1e-6)
        prefetch = min(self._high, max(self._low, round(wanted)))
        if abs(prefetch - self.prefetch) * 8 >= self.prefetch:  # moves of 1/8 or more
            self.prefetch = prefetch
            self._permits.resize(self._base + prefetch)


@dataclass
class WorkerStats:
    """What one worker did since it started (``Worker.stats``)."""

    claimed: int = 0
    acked: int = 0
    stale: int = 0  # an ack/retry/poison refused because the lease was lost
    redelivered: int = 0  # handler returned False
    retried: int = 0
    poisoned: int = 0
    aborted: int = 0
    expired: int = 0  # not started before it expired: never run
    snoozed: int = 0  # the handler returned Snooze: given back, due again later
    missed: int = 0  # an occurrence older than its catch_up_window: never run
    throttled: int = 0  # over its task's throttle (which drops the excess): never run
    deferred: int = 0  # its task is unknown here: given back for a worker that knows it
    released: int = 0
    limited: int = 0  # sent back to storage to wait for a slot of its concurrency limit
    rate_limited: int = 0  # sent back to storage to wait for the start its rate limit reserved
    empty_polls: int = 0
    backend_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Counters:
    """Thread-safe increments on a ``WorkerStats``."""

    def __init__(self) -> None:
        self._stats = WorkerStats()
        self._lock = threading.Lock()

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            setattr(self._stats, name, getattr(self._stats, name) + count)

    def snapshot(self) -> WorkerStats:
        with self._lock:
            return WorkerStats(**asdict(self._stats))
