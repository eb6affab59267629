"""The schedule-steering part of ``App`` (a mixin): pause, resume, run now, backfill, list
schedules and the overdue ones. The logic is in ``scheduler.control``; these methods fill
in the default queue and the backend's clock."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from scheduler import control
from scheduler.clock import to_datetime
from scheduler.control import Backfill, Overdue, Resumed, ScheduleInfo
from triggers import Misfire

if TYPE_CHECKING:
    from scheduler.backends import Backend
    from scheduler.building import MessageBuilder
    from scheduler.settings import Settings


class ScheduleSteering:
    """Steering keyed recurring schedules (mixed into ``App``)."""

    settings: Settings
    builder: MessageBuilder

    if TYPE_CHECKING:

        @property
        def backend(self) -> Backend: ...

        def _now_ms(self) -> int: ...

    def pause_schedule(self, key: str, *, queue: str | None = None) -> bool:
        """Pause the recurring schedule ``key``: nothing of it runs until it is resumed
        (stored in the backend: every worker, restarts included). It can still be read,
        replaced, cancelled and previewed. False if it was paused already; raises
        ``ScheduleNotFound``."""
        queue = queue or self.settings.default_queue
        return control.pause_schedule(self.backend, self.builder, queue, key, self._now_ms())

    def resume_schedule(
        self,
        key: str,
        *,
        queue: str | None = None,
        misfire: Misfire | str = Misfire.SKIP,
        limit: int | None = None,
        spacing: timedelta = timedelta(0),
    ) -> Resumed | None:
        """Resume a paused schedule (None if it was not paused). What fell in the pause is
        skipped (``"skip"``, the default), run once now (``"coalesce"``), or run one by
        one (``"catch_up"``: at most ``limit``, ``spacing`` apart)."""
        queue = queue or self.settings.default_queue
        policy = Misfire(misfire)
        return control.resume_schedule(
            self.backend, self.builder, queue, key, self._now_ms(), policy, limit, spacing
        )

    def trigger_now(self, key: str, *, queue: str | None = None) -> str:
        """Run the schedule ``key``'s task once now, apart from its grid (which does not
        move); returns the run's message id (header ``tickwork-origin: manual``)."""
        queue = queue or self.settings.default_queue
        return control.trigger_now(self.backend, self.builder, queue, key, self._now_ms())

    def backfill(
        self,
        key: str,
        start: datetime,
        end: datetime,
        *,
        queue: str | None = None,
        limit: int = 1000,
        spacing: timedelta = timedelta(0),
        remember: timedelta = timedelta(days=30),
    ) -> Backfill:
        """Run the occurrences of schedule ``key`` from ``start`` to ``end`` (past ones):
        enqueued now, ``spacing`` apart, at most ``limit`` (else nothing, one error). Asked
        again within ``remember`` it enqueues none twice (see ``control.backfill``)."""
        queue = queue or self.settings.default_queue
        now = self._now_ms()
        span = (start, end)
        return control.backfill(
            self.backend, self.builder, queue, key, span, now, limit, spacing, remember
        )

    def schedules(self, queue: str | None = None) -> list[ScheduleInfo]:
        """Keyed recurring messages with their next run, last run and misfires."""
        return control.schedules(self.backend, queue)

    def overdue(self, max_late: timedelta, queue: str | None = None) -> list[Overdue]:
        """Schedules with no successful run within their period plus ``max_late``."""
        now = to_datetime(self._now_ms())
        return control.overdue(self.schedules(queue), now, max_late)
