"""What the workers did, minute by minute: the data of the dashboard's throughput and
lateness charts (``app.queues.activity``).

Every worker appends, every ``activity_interval_s`` (15 s) in which it settled or claimed
anything, one record per queue to that queue's activity log: its counts of the interval
(claimed, succeeded, retried, poisoned, redelivered, aborted) and the histograms of
lateness (due time to start) and run time. The log is an occurrence ledger of its own
(subject ``a:activity``), kept ``ACTIVITY_KEEP`` records and ``ACTIVITY_AGE_MS`` long, so
it is written and trimmed by the same contract operations on every backend, and lives in
the backend: it survives the worker that wrote it, and every dashboard reads the same.

Reading adds up each minute's records from every worker. Sixteen workers writing every
15 s fill the log in an hour; with more, the oldest minutes of the hour drop out first
(a longer ``activity_interval_s`` keeps the hour).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

from pydantic_core import from_json, to_json

from tickwork.scheduler.backends import Backend, LedgerEntry

#: seconds; from "on time" to an hour late (Prometheus' buckets for lateness too)
LATENESS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 3600.0)
#: seconds; from a no-op to a long job
RUN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0)
#: what a run can end as, counted per interval
OUTCOMES = (
    "succeeded",
    "retried",
    "poisoned",
    "redelivered",
    "aborted",
    "expired",
    "snoozed",
    "missed",
    "deferred",
    "throttled",
)
#: what a worker counts per interval: claims, how runs ended, and runs whose process died
#: under them (a process pool's child killed or crashed; the run itself is then also
#: counted by how it ended, retried or poisoned)
COUNTS = ("claimed", *OUTCOMES, "crashed")

ACTIVITY_SUBJECT = "a:activity"
ACTIVITY_KEEP = 4_000
ACTIVITY_AGE_MS = 2 * 3600 * 1000
MINUTE_MS = 60_000


@dataclass(slots=True)
class Interval:
    """What one worker did in one queue between ``from_ms`` and ``to_ms``: counts, and
    lateness and run time as bucket counts (``LATENESS_BUCKETS``, ``RUN_BUCKETS``, the
    last bucket +Inf) with their sums in seconds."""

    worker: str
    from_ms: int
    to_ms: int
    counts: dict[str, int]
    lateness: list[int]
    lateness_sum: float
    run: list[int]
    run_sum: float

    def encode(self) -> bytes:
        return to_json(
            {
                "w": self.worker,
                "f": self.from_ms,
                "t": self.to_ms,
                "c": {name: count for name, count in self.counts.items() if count},
                "l": self.lateness,
                "ls": round(self.lateness_sum, 6),
                "r": self.run,
                "rs": round(self.run_sum, 6),
            }
        )

    @classmethod
    def decode(cls, record: bytes) -> Interval | None:
        """The interval a record holds; None for one that is not (skipped, never raised)."""
        try:
            data = from_json(record)
            lateness, run = [int(n) for n in data["l"]], [int(n) for n in data["r"]]
            if len(lateness) != len(LATENESS_BUCKETS) + 1 or len(run) != len(RUN_BUCKETS) + 1:
                return None
            return cls(
                str(data["w"]),
                int(data["f"]),
                int(data["t"]),
                {str(name): int(n) for name, n in dict(data["c"]).items()},
                lateness,
                float(data["ls"]),
                run,
                float(data["rs"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


def activity_entry(queue: str, intervals: list[Interval]) -> LedgerEntry:
    """The ledger entry appending ``intervals`` to ``queue``'s activity log."""
    records = tuple(interval.encode() for interval in intervals)
    return LedgerEntry(queue, ACTIVITY_SUBJECT, records, ACTIVITY_KEEP, ACTIVITY_AGE_MS)


@dataclass(slots=True)
class Minute:
    """One minute of one queue (or of all): the counts, and the lateness and run time
    histograms, of every worker's intervals that ended in it."""

    start_ms: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    lateness: list[int] = field(default_factory=lambda: [0] * (len(LATENESS_BUCKETS) + 1))
    run: list[int] = field(default_factory=lambda: [0] * (len(RUN_BUCKETS) + 1))
    workers: set[str] = field(default_factory=set)

    def add(self, interval: Interval) -> None:
        for name, count in interval.counts.items():
            if name in self.counts:
                self.counts[name] += count
        self.lateness = [a + b for a, b in zip(self.lateness, interval.lateness, strict=True)]
        self.run = [a + b for a, b in zip(self.run, interval.run, strict=True)]
        self.workers.add(interval.worker)

    @property
    def finished(self) -> int:
        """Runs that ended (succeeded, retried, poisoned, aborted)."""
        return sum(self.counts[name] for name in ("succeeded", "retried", "poisoned", "aborted"))

    @property
    def failed(self) -> int:
        return self.counts["retried"] + self.counts["poisoned"] + self.counts["aborted"]

    def lateness_quantile(self, q: float) -> float | None:
        """Seconds, interpolated inside its bucket as Prometheus' ``histogram_quantile``
        does; None without a start in the minute."""
        return quantile(self.lateness, LATENESS_BUCKETS, q)


def quantile(counts: list[int], bounds: tuple[float, ...], q: float) -> float | None:
    """The ``q`` quantile of a histogram (bucket counts, the last one +Inf); a value in
    the +Inf bucket reads as the highest bound."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    for index, seen in enumerate(accumulate(counts)):
        if seen >= rank:
            if index >= len(bounds):
                return bounds[-1]
            lower = bounds[index - 1] if index else 0.0
            before = seen - counts[index]
            share = (rank - before) / counts[index] if counts[index] else 1.0
            return lower + (bounds[index] - lower) * share
    return bounds[-1]


@dataclass(frozen=True, slots=True)
class Activity:
    """The last ``minutes`` minutes of every queue asked for, oldest minute first (each
    list as long, minutes without a record left at zero), and their sum as ``total``."""

    minutes: int
    queues: dict[str, list[Minute]]
    total: list[Minute]


def read_activity(backend: Backend, queues: list[str], now_ms: int, minutes: int = 60) -> Activity:
    """Each queue's activity log, added up per minute over the last ``minutes`` minutes
    (the current minute last), in one backend call."""
    first = (now_ms // MINUTE_MS - minutes + 1) * MINUTE_MS
    logs = backend.ledger.read_many([(queue, ACTIVITY_SUBJECT) for queue in queues], ACTIVITY_KEEP)
    total = [Minute(first + i * MINUTE_MS) for i in range(minutes)]
    per_queue: dict[str, list[Minute]] = {}
    for queue, records in zip(queues, logs, strict=True):
        series = [Minute(first + i * MINUTE_MS) for i in range(minutes)]
        for record in records:
            interval = Interval.decode(record)
            if interval is None or not first <= interval.to_ms < first + minutes * MINUTE_MS:
                continue
            index = (interval.to_ms - first) // MINUTE_MS
            series[index].add(interval)
            total[index].add(interval)
        per_queue[queue] = series
    return Activity(minutes, per_queue, total)
