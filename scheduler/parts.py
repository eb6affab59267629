"""What the app's services need of it: its settings, its message builder, the backend's
clock and the backend itself (opened on first use, so reached through a property). The
services (``app.schedules``, ``app.queues``, ``app.batches``, ``app.workers``) and the
producer hold an ``AppParts`` instead of the ``App``, so none of them imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tickwork.scheduler.backends import Backend
    from tickwork.scheduler.clock import CorrectedClock
    from tickwork.scheduler.producing.building import MessageBuilder
    from tickwork.scheduler.settings import Settings


class AppParts(Protocol):
    """The parts of an ``App`` its services share."""

    settings: Settings
    builder: MessageBuilder
    backend_clock: CorrectedClock

    @property
    def backend(self) -> Backend: ...
