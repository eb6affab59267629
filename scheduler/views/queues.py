"""``app.queues``: pause and resume a queue, bound it, and read what its workers did.
Pauses and bounds are stored in the backend, so every worker and producer of the
deployment agrees."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends.fair_turns import MAX_WEIGHT
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import ConfigurationError, InvalidMessage, QueueNotFound
from tickwork.scheduler.views.activity import Activity, read_activity

if TYPE_CHECKING:
    from collections.abc import Callable

    from tickwork.scheduler.backends import QueueStats
    from tickwork.scheduler.parts import AppParts


class QueueView(BaseModel):
    """A queue as the command line (``tickwork queues list --json``, ``tickwork stats
    --json``) and the API (``GET /api/v1/queues``) show it: what it holds by state, its
    poisoned messages, its bound, whether it is paused, when it next has something due,
    and its counters."""

    model_config = ConfigDict(frozen=True)

    queue: str
    paused: bool
    ready: int
    scheduled: int
    in_flight: int
    poisoned: int
    pending: int  # what counts against its bound: ready, scheduled and in flight
    max_pending: int | None
    next_due: datetime | None
    counters: dict[str, int]

    @classmethod
    def of(cls, stats: QueueStats) -> QueueView:
        due = stats.next_due_ms
        return cls(
            queue=stats.queue,
            paused=stats.paused,
            ready=stats.ready,
            scheduled=stats.scheduled,
            in_flight=stats.in_flight,
            poisoned=stats.poison,
            pending=stats.pending,
            max_pending=stats.max_pending,
            next_due=None if due is None else to_datetime(due),
            counters=dict(stats.counters),
        )


class QueueWeights(BaseModel):
    """The fair-share weights set in a queue: each key listed takes that many turns for
    one of a key not listed (weight 1)."""

    model_config = ConfigDict(frozen=True)

    queue: str
    weights: dict[str, int]


class Queues:
    """The queues of an app's deployment. A queue is known once a message was written to
    it, a task of the app names it, or it is the default queue; steering one that is not
    known raises ``QueueNotFound`` (a typo would otherwise pause nothing, silently)."""

    def __init__(self, parts: AppParts, declared: Callable[[], set[str]]) -> None:
        """``declared`` gives the queues the app's tasks name."""
        self._parts = parts
        self._declared = declared

    def names(self) -> list[str]:
        """Every known queue, sorted."""
        known = set(self._parts.backend.queues.names()) | self._declared()
        return sorted(known | {self._parts.settings.default_queue})

    def _known(self, queue: str | None) -> str:
        name = queue or self._parts.settings.default_queue
        if name in self._declared() or name == self._parts.settings.default_queue:
            return name
        if name not in self._parts.backend.queues.names():
            raise QueueNotFound(
                f"no queue is named {name!r}: no message was written to it and no task "
                "of this app names it"
            )
        return name

    def pause(self, queue: str | None = None, *, actor: str | None = None) -> bool:
        """Stop every worker claiming from ``queue`` (default: the default queue) within
        its poll interval; enqueueing goes on and due messages wait. False if it was
        already paused; raises ``QueueNotFound``. Recorded in ``app.audit``."""
        name = self._known(queue)
        paused = self._parts.backend.queues.pause(name)
        outcome = "paused" if paused else "already paused"
        self._parts.audit.record("queue.pause", name, actor=actor, outcome=outcome)
        return paused

    def resume(self, queue: str | None = None, *, actor: str | None = None) -> bool:
        """Let workers claim from ``queue`` again. False if it was not paused; raises
        ``QueueNotFound``. Recorded in ``app.audit``."""
        name = self._known(queue)
        resumed = self._parts.backend.queues.resume(name)
        outcome = "resumed" if resumed else "was not paused"
        self._parts.audit.record("queue.resume", name, actor=actor, outcome=outcome)
        return resumed

    def paused(self) -> list[str]:
        """The paused queues, sorted."""
        return self._parts.backend.queues.paused()

    def configure(self, queue: str, *, max_pending: int | None, actor: str | None = None) -> None:
        """Bound ``queue`` to ``max_pending`` messages waiting or leased (poisoned ones do
        not count), or remove its bound with None. While it is full, ``delay``,
        ``schedule`` and ``enqueue_many`` wait for room (``QueueFull`` after their
        timeout); retries, replays and a recurring chain's next occurrence always pass.
        A queue may be bounded before anything was written to it. Recorded in
        ``app.audit``."""
        if max_pending is not None and (isinstance(max_pending, bool) or max_pending < 1):
            raise ConfigurationError(
                f"max_pending must be a whole number >= 1, not {max_pending!r}"
            )
        self._parts.backend.queues.set_bound(queue, max_pending)
        bound = "unbounded" if max_pending is None else f"max_pending {max_pending}"
        self._parts.audit.record("queue.bound", queue, actor=actor, outcome=bound)

    def weigh(
        self, queue: str | None, key: str, weight: int | None, *, actor: str | None = None
    ) -> QueueWeights:
        """Give the fair-share key ``key`` of ``queue`` (default: the default queue)
        ``weight`` turns for one of a key of weight 1 (None or 1: back to even), from the
        next messages made ready on; returns the queue's weights. A whole number from 1 to
        1000, else ``InvalidMessage``; raises ``QueueNotFound``, and ``ConfigurationError``
        on a backend without fair share. Recorded in ``app.audit``."""
        name = self._known(queue)
        if not isinstance(key, str) or not key:
            raise InvalidMessage(f"a fair-share key is a non-empty string, not {key!r}")
        if weight is not None and (
            isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= MAX_WEIGHT
        ):
            raise InvalidMessage(
                f"weight must be a whole number from 1 to {MAX_WEIGHT}, not {weight!r}"
            )
        self._parts.backend.queues.set_fair_weight(name, key, weight)
        shown = "weight 1" if weight is None else f"weight {weight}"
        self._parts.audit.record("queue.weigh", f"{name}/{key}", actor=actor, outcome=shown)
        return self.weights(name)

    def weights(self, queue: str | None = None) -> QueueWeights:
        """The fair-share weights set in ``queue`` (default: the default queue; keys not
        listed have weight 1)."""
        name = self._known(queue)
        return QueueWeights(queue=name, weights=self._parts.backend.queues.fair_weights(name))

    def bounds(self) -> dict[str, int]:
        """``max_pending`` of every bounded queue."""
        return self._parts.backend.queues.bounds()

    def stats(self, queue: str | None = None) -> builtins.list[QueueStats]:
        """Per queue (``queue`` only, or every one the backend knows): messages by state,
        poisoned ones, counters, and whether it is paused."""
        return self._parts.backend.queues.stats(None if queue is None else self._known(queue))

    def list(self, queue: str | None = None) -> builtins.list[QueueView]:
        """``stats`` as the view every surface shows (``QueueView``)."""
        return [QueueView.of(stats) for stats in self.stats(queue)]

    def activity(self, minutes: int = 60, queue: str | None = None) -> Activity:
        """What the workers did per minute over the last ``minutes`` (counts, lateness
        and run time), in ``queue`` or in every queue, from the activity log they write."""
        backend = self._parts.backend
        queues = [queue] if queue is not None else backend.queues.names()
        return read_activity(backend, queues, self._parts.backend_clock.now_ms(), minutes)
