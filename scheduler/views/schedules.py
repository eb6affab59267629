"""A keyed schedule as operators see it: ``ScheduleView``, the one shape of
``tickwork schedules --json`` and the HTTP API's ``GET /schedules``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.schedules.control import ScheduleInfo


class ScheduleView(BaseModel):
    """A keyed recurring schedule: its trigger as a person writes it (``trigger``) and as
    stored (``trigger_spec``), times in UTC (``timezone`` is the trigger's), and
    whether it is paused."""

    model_config = ConfigDict(frozen=True)

    queue: str
    key: str
    task: str
    trigger: str
    trigger_spec: dict[str, Any]
    timezone: str
    next_run: datetime
    last_run: datetime | None
    last_success: datetime | None
    last_outcome: str | None
    misfires: int
    state: str
    paused: bool
    paused_at: datetime | None

    @classmethod
    def of(cls, info: ScheduleInfo) -> ScheduleView:
        return cls(
            queue=info.queue,
            key=info.key,
            task=info.task,
            trigger=info.trigger.describe(),
            trigger_spec=info.trigger.model_dump(mode="json", exclude_defaults=True),
            timezone=info.trigger.zone,
            next_run=info.next_run,
            last_run=info.last_run,
            last_success=info.last_success,
            last_outcome=info.last_outcome,
            misfires=info.misfires,
            state="paused" if info.paused_at else str(info.state),
            paused=info.paused_at is not None,
            paused_at=info.paused_at,
        )
