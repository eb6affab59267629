"""One exception tree, split by what the caller can do about it."""

from __future__ import annotations


class TickworkError(Exception):
    """Root of every error tickwork raises on purpose."""


class ConfigurationError(TickworkError):
    """A setting, URL or missing optional dependency: fix the configuration."""


class InvalidMessage(TickworkError):
    """The producer asked for something that cannot be enqueued; nothing was written."""


class ScheduleNotFound(InvalidMessage):
    """No recurring schedule holds that key."""


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


class DecodeError(TickworkError):
    """Stored bytes are not a valid message (sent to the poison queue by workers)."""


class BackendError(TickworkError):
    """The storage failed; the operation may or may not have been applied."""


class BackendUnavailable(BackendError):
    """The storage cannot be reached; retrying later may succeed."""
