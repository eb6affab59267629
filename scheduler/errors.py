"""One exception tree, split by what the caller can do about it. Its root,
``TickworkError``, and ``InvalidTrigger`` sit in ``triggers.errors`` (the bottom of the
package: a bad trigger is a ``TickworkError`` too)."""

from __future__ import annotations

from tickwork.triggers.errors import InvalidTrigger as InvalidTrigger
from tickwork.triggers.errors import TickworkError as TickworkError


class Aborted(TickworkError):
    """Raised in a handler whose run was aborted. Raising it yourself ends the run as
    aborted too: no retry, and the message goes to the poison store with reason
    ``aborted``."""


class ConfigurationError(TickworkError):
    """A setting, URL or missing optional dependency: fix the configuration."""


class InvalidMessage(TickworkError):
    """The producer asked for something that cannot be enqueued; nothing was written."""


class ScheduleNotFound(InvalidMessage):
    """No recurring schedule holds that key."""


class CalendarNotFound(InvalidMessage):
    """No named calendar is stored under that name."""


class QueueNotFound(InvalidMessage):
    """No queue has that name: nothing was written to it and no task names it."""


class ConditionFailed(TickworkError):
    """A graph step's condition could not be asked (not found in the worker, or it
    raised): the step is poisoned, naming the condition."""


class LimitNotFound(InvalidMessage):
    """No limit of that name is declared by the app's tasks or a live worker's."""


class WorkflowNotFound(TickworkError):
    """No batch or chain is stored under that id (a wrong id, or its records expired)."""


class BatchNotFound(WorkflowNotFound):
    """Nothing is stored of the batch (a wrong id, or its records expired)."""


class UnknownTask(InvalidMessage):
    """The task name is not registered with the app."""


class KeyConflict(InvalidMessage):
    """``on_conflict="error"`` and a message with the same key is already scheduled."""

    def __init__(self, queue: str, keys: list[str]) -> None:
        self.queue = queue
        self.keys = keys
        shown = ", ".join(repr(k) for k in keys[:5]) + (" ..." if len(keys) > 5 else "")
        super().__init__(
            f"queue {queue!r} already has a message with key {shown}; "
            "use on_conflict='replace' or 'ignore'"
        )


class QueueFull(TickworkError):
    """A bounded queue stayed full: ``written`` messages of the call were stored (ids in
    ``written_ids``), the others were not, after waiting ``waited_s`` seconds."""

    def __init__(
        self,
        queue: str,
        max_pending: int | None,
        written_ids: list[str],
        refused: int,
        waited_s: float,
    ) -> None:
        self.queue = queue
        self.max_pending = max_pending
        self.written_ids = written_ids
        self.written = len(written_ids)
        self.refused = refused
        self.waited_s = waited_s
        super().__init__(self._describe())

    def _describe(self) -> str:
        bound = f" (max_pending {self.max_pending})" if self.max_pending is not None else ""
        return (
            f"queue {self.queue!r} is full{bound}: {self.refused} message(s) not written "
            f"after waiting {self.waited_s:.1f} s; {self.written} of this call were written"
        )

    def add_written_before(self, written_ids: list[str], waited_s: float) -> None:
        """Count what earlier batches of the same call wrote and waited (``enqueue_many``)."""
        self.written_ids = written_ids + self.written_ids
        self.written = len(self.written_ids)
        self.waited_s += waited_s
        self.args = (self._describe(),)


class DecodeError(TickworkError):
    """Stored bytes are not a valid message (sent to the poison queue by workers)."""


class BackendError(TickworkError):
    """The storage failed; the operation may or may not have been applied."""


class BackendFull(BackendError):
    """The storage refused a write for lack of space (Redis at its ``maxmemory``); the
    write was not applied. Retrying once space is freed may succeed."""


class BackendUnavailable(BackendError):
    """The storage cannot be reached; retrying later may succeed."""


class ReplicaTimeout(BackendUnavailable):
    """A Redis write is applied on the master but fewer replicas than ``wait_replicas``
    acknowledged it in time: a failover now could lose it."""
