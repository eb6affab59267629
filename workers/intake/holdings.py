"""Work owned by this worker process: every claim it holds and the lease deadline of each.

A claim enters when the consumer accepts it and leaves when the settler acks, retries,
poisons or releases it. The heartbeat reads the deadlines to extend leases before they
run out; shutdown waits until nothing is held.

Thread-safety: every method takes the one lock; ``Work`` objects are shared, but each
field is written by one thread at a time (the consumer, then the timer or pool, then the
settler).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tickwork.scheduler.backends import AbortRequest, Claim
from tickwork.scheduler.hooks import Hooks
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.runs.context import RunInfo


@dataclass(slots=True)
class Work:
    """One claimed message on its way through the worker."""

    claim: Claim
    message: Message
    started_ms: int = 0
    holds_permit: bool = True  # parked in the timing wheel: no permit until it fires
    lent: bool = False  # finished: its permit went back before it was settled
    abort: AbortRequest | None = None  # set when an abort of this run was read
    slot: str | None = None  # the concurrency limit it holds a slot of, while it runs
    info: RunInfo | None = None  # what its handler was given, once it started
    retried: bool = False  # its failed run is due again (not poisoned)

    def run_info(self) -> RunInfo:
        """What its handler was (or would have been) given: for the hooks."""
        if self.info is not None:
            return self.info
        message = self.message
        return RunInfo(message.id, message.task, message.queue, message.key, self.claim.attempt)

    @property
    def lateness_ms(self) -> int:
        """From the message's due time to its start (0 before it started, or if early)."""
        return max(0, self.started_ms - self.claim.due_ms) if self.started_ms else 0

    @property
    def handle(self) -> tuple[str, str]:
        return self.claim.id, self.claim.token


class Holdings:
    """The claims this process holds, with their lease deadlines."""

    def __init__(self) -> None:
        self._works: dict[tuple[str, str], Work] = {}
        self._deadlines: dict[tuple[str, str], int] = {}
        self._lost: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def add(self, work: Work) -> None:
        handle = work.handle
        with self._lock:
            self._works[handle] = work
            self._deadlines[handle] = work.claim.deadline_ms

    def remove(self, works: Iterable[Work]) -> None:
        handles = [work.handle for work in works]
        with self._lock:
            for handle in handles:
                self._works.pop(handle, None)
                self._deadlines.pop(handle, None)
            if self._lost:
                self._lost.difference_update(handles)

    def count(self) -> int:
        """How many claims are held (read without the lock: a moment's answer)."""
        return len(self._works)

    def empty(self) -> bool:
        with self._lock:
            return not self._works

    def all(self) -> list[Work]:
        with self._lock:
            return list(self._works.values())

    def expiring(self, now_ms: int, margin_ms: float = 0.0) -> list[Work]:
        """Work whose lease has less than half of its length left, or less than
        ``margin_ms`` (and is not lost)."""
        with self._lock:
            return [
                work
                for handle, work in self._works.items()
                if handle not in self._lost
                and self._deadlines.get(handle, 0) - now_ms
                < max(work.claim.timeout_ms / 2, margin_ms)
            ]

    def extended(self, works: Sequence[Work], deadline_ms: int) -> None:
        """Record new deadlines for ``works`` whose leases were extended (and still held)."""
        with self._lock:
            for work in works:
                if work.handle in self._deadlines:
                    self._deadlines[work.handle] = deadline_ms

    def still_held(self, works: Iterable[Work]) -> list[Work]:
        """Those of ``works`` not settled yet."""
        with self._lock:
            return [work for work in works if work.handle in self._works]

    def lost(self, works: Sequence[Work]) -> None:
        """Record that the leases of ``works`` are no longer held: no more extending them."""
        with self._lock:
            self._lost.update(work.handle for work in works if work.handle in self._works)

    def deadline(self, work: Work) -> int | None:
        with self._lock:
            return self._deadlines.get(work.handle)


def log_fields(work: Work) -> dict[str, object]:
    """The fields a log line about ``work`` carries for structured (JSON) logs: message id,
    task, queue, key, attempt, and lateness (due time to start; None before it started)."""
    return {
        "message_id": work.claim.id,
        "task": work.message.task,
        "queue": work.claim.queue,
        "key": work.claim.key,
        "attempt": work.claim.attempt,
        "lateness_ms": work.lateness_ms if work.started_ms else None,
    }


def logged_error(hooks: Hooks, text: str | None) -> str | None:
    """An error text as a log line may show it: not at all when ``hooks`` keep error texts
    encrypted at rest (the log would hold them in clear)."""
    return "(not logged: error texts are encrypted)" if hooks.has_data_codec else text
