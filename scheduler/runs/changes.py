"""What a live change says (``backend.changes``, ``GET /api/v1/stream``): a run started,
reported progress, or ended one way or another, on which worker and when; or an event
was emitted. Workers (and apps that emit) publish them as they happen; a stream hands on
those its filter matches."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic_core import from_json, to_json

#: what a change can say happened: a run ``started``, reported ``progress``, or how it
#: ended (the worker's outcomes: ``succeeded``, ``retried``, ``poisoned``, ``aborted``,
#: ``expired``, ...)
STARTED = "started"
PROGRESS = "progress"
#: an event was emitted (``app.emit``): its id, its event message's task and queue, its
#: key and ``name``; published by the app that emitted it (``worker``: that app)
EMITTED = "emitted"


@dataclass(frozen=True, slots=True)
class RunChange:
    """One change of one run."""

    #: ``started``, ``progress``, how the run ended (``succeeded``, ``poisoned``, ...), or
    #: ``emitted`` (an event)
    event: str
    #: the run's message id, task, queue and key
    id: str
    task: str
    queue: str
    key: str | None
    attempt: int
    #: when it happened (ms since the epoch, the backend's clock)
    at_ms: int
    #: the worker that ran it, and its count of the changes it published (unique together)
    worker: str
    seq: int
    #: how long the run took (s), once it ended
    run_s: float | None = None
    #: how far the run has come (0 to 1) and its note, in a ``progress`` change
    progress: float | None = None
    note: str | None = None
    #: the event's name, in an ``emitted`` change
    name: str | None = None

    def encode(self) -> bytes:
        """One line of JSON (a change holds no newline: backends pack them by line)."""
        return encoded(
            self.event, self.id, self.task, self.queue, self.key, self.attempt, self.at_ms,
            self.worker, self.seq, self.run_s, self.progress, self.note, self.name,
        )  # fmt: skip

    @classmethod
    def decode(cls, raw: bytes) -> RunChange:
        return cls(**from_json(raw))


def encoded(
    event: str,
    message_id: str,
    task: str,
    queue: str,
    key: str | None,
    attempt: int,
    at_ms: int,
    worker: str,
    seq: int,
    run_s: float | None,
    progress: float | None = None,
    note: str | None = None,
    name: str | None = None,
) -> bytes:
    """A ``RunChange`` of these fields as JSON, without making one (a worker encodes every
    change while a stream listens: 1 us this way, 14 through ``dataclasses.asdict``)."""
    return to_json(
        {
            "event": event,
            "id": message_id,
            "task": task,
            "queue": queue,
            "key": key,
            "attempt": attempt,
            "at_ms": at_ms,
            "worker": worker,
            "seq": seq,
            "run_s": run_s,
            "progress": progress,
            "note": note,
            "name": name,
        }
    )


@dataclass(frozen=True, slots=True)
class ChangeFilter:
    """Which changes a listener wants: those matching every field given."""

    run: str | None = None
    task: str | None = None
    queue: str | None = None
    key: str | None = None
    #: an event's name (only ``emitted`` changes have one)
    name: str | None = None

    def matches(self, change: RunChange) -> bool:
        return (
            (self.run is None or change.id == self.run)
            and (self.task is None or change.task == self.task)
            and (self.queue is None or change.queue == self.queue)
            and (self.key is None or change.key == self.key)
            and (self.name is None or change.name == self.name)
        )
