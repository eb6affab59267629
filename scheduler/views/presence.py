"""The worker registry as read by producers and operators: each worker stores a record of
itself in the backend (``workers/reporting/presence.py`` writes it every ``interval_s``); a record
not refreshed for three intervals says the worker is gone, and one not refreshed for ten
is dropped by the backend. ``app.workers.live()`` and ``tickwork workers`` list them."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.limits.view import DeclaredLimit

if TYPE_CHECKING:
    from tickwork.scheduler.parts import AppParts

#: a record not refreshed for this many intervals says its worker is gone
GONE_AFTER = 3
#: and the backend drops it after this many
KEPT_FOR = 10


class WorkerInfo(BaseModel):
    """One worker's record in the registry."""

    model_config = ConfigDict(frozen=True)

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    pool: str
    async_concurrency: int | None = None
    started_at: datetime
    last_seen: datetime
    interval_s: float
    held: int = 0
    stats: dict[str, int] = {}
    limits: list[DeclaredLimit] = []  # the limits it enforces (its tasks declare)
    holding: dict[str, int] = {}  # concurrency limit key -> runs of it running here now
    alive: bool = True  # set when read: seen within GONE_AFTER intervals


def live_workers(backend: Backend) -> list[WorkerInfo]:
    """The workers in the registry, oldest first, each marked alive or gone."""
    now = to_datetime(backend.now_ms())
    found = []
    for body in backend.registry.records().values():
        info = WorkerInfo.model_validate_json(body)
        late = (now - info.last_seen).total_seconds() > GONE_AFTER * info.interval_s
        found.append(info.model_copy(update={"alive": not late}))
    return sorted(found, key=lambda w: (w.started_at, w.id))


class Workers:
    """``app.workers``: the workers of an app's deployment, as their registry shows them."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts

    def live(self) -> list[WorkerInfo]:
        """The workers in the backend's registry, oldest first, each alive or gone."""
        return live_workers(self._parts.backend)
