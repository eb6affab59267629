"""The queue-control part of ``App`` (a mixin): pause and resume a queue, and bound it.
Both are stored in the backend, so every worker and producer of the deployment agrees."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.errors import ConfigurationError

if TYPE_CHECKING:
    from scheduler.backends import Backend
    from scheduler.settings import Settings


class QueueControl:
    """Pausing and bounding queues (mixed into ``App``)."""

    settings: Settings

    if TYPE_CHECKING:

        @property
        def backend(self) -> Backend: ...

    def pause(self, queue: str | None = None) -> bool:
        """Stop every worker claiming from ``queue`` (default: the default queue) within
        its poll interval; enqueueing goes on and due messages wait. False if it was
        already paused."""
        return self.backend.queues.pause(queue or self.settings.default_queue)

    def resume(self, queue: str | None = None) -> bool:
        """Let workers claim from ``queue`` again. False if it was not paused."""
        return self.backend.queues.resume(queue or self.settings.default_queue)

    def paused(self) -> list[str]:
        """The paused queues, sorted."""
        return self.backend.queues.paused()

    def configure_queue(self, queue: str, *, max_pending: int | None) -> None:
        """Bound ``queue`` to ``max_pending`` messages waiting or leased (poisoned ones do
        not count), or remove its bound with None. While it is full, ``delay``,
        ``schedule`` and ``enqueue_many`` wait for room (``QueueFull`` after their
        timeout); retries, replays and a recurring chain's next occurrence always pass."""
        if max_pending is not None and (isinstance(max_pending, bool) or max_pending < 1):
            raise ConfigurationError(
                f"max_pending must be a whole number >= 1, not {max_pending!r}"
            )
        self.backend.queues.set_bound(queue, max_pending)

    def queue_bounds(self) -> dict[str, int]:
        """``max_pending`` of every bounded queue."""
        return self.backend.queues.bounds()
