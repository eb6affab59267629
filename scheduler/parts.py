"""What the app's services need of it: its settings, its message builder, the backend's
clock, the backend itself (opened on first use, so reached through a property) and the
audit log its operator verbs write to. The services (``app.schedules``, ``app.queues``,
``app.poison``, ``app.batches``, ``app.workers``) and the producer hold an ``AppParts``
instead of the ``App``, so none of them imports it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tickwork.scheduler.backends import Backend
    from tickwork.scheduler.clock import CorrectedClock
    from tickwork.scheduler.producing.building import MessageBuilder
    from tickwork.scheduler.settings import Settings


class AuditLog(Protocol):
    """Where an operator verb records itself (``app.audit``)."""

    def record(
        self,
        action: str,
        target: str,
        *,
        actor: str | None = None,
        outcome: str = "",
        note: str | None = None,
    ) -> None: ...


class AppParts(Protocol):
    """The parts of an ``App`` its services share."""

    settings: Settings
    builder: MessageBuilder
    backend_clock: CorrectedClock

    @property
    def audit(self) -> AuditLog: ...

    @property
    def backend(self) -> Backend: ...
