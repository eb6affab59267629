"""Runs as operators read them: ``app.runs.journal(id)``, a durable run's journal step by
step (what each step, sleep, wait and recorded value gave, its attempts and timing) and
what the run waits for now; ``tickwork workflow show``, the dashboard and the API show
it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.model.handles import RunStatus
from tickwork.scheduler.runs.journal import JournalEntry, JournalStore
from tickwork.scheduler.runs.results import read

if TYPE_CHECKING:
    from tickwork.scheduler.parts import AppParts


class JournalStep(BaseModel):
    """One entry of a durable run's journal."""

    model_config = ConfigDict(frozen=True)

    position: int  # from 1
    kind: str  # step, sleep, wait, value, patch
    name: str
    state: str  # done, failed, retrying, waiting
    attempts: int
    started_at: datetime | None = None
    duration_ms: int | None = None
    value: Any = None
    error: str | None = None
    until: datetime | None = None  # a sleep's wake-up, a waiting wait's timeout

    def facts(self) -> list[str]:
        """What a listing shows of the entry, in short."""
        shown = [self.state]
        if self.attempts > 1:
            shown.append(f"{self.attempts} attempts")
        if self.duration_ms is not None:
            shown.append(f"{self.duration_ms} ms")
        if self.until is not None:
            shown.append(f"until {self.until:%Y-%m-%d %H:%M:%S}")
        if self.error:
            shown.append(self.error)
        elif self.kind in ("step", "wait", "value") and self.state == "done":
            shown.append(f"-> {self.value!r}"[:80])
        return shown


class RunJournal(BaseModel):
    """A durable run: its status, its journal, and what it waits for (None: nothing)."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: RunStatus
    steps: list[JournalStep]
    waiting_for: str | None = None


def _step(position: int, entry: JournalEntry) -> JournalStep:
    ended = entry.ended_ms if entry.ended_ms and entry.started_ms else None
    return JournalStep(
        position=position,
        kind=entry.kind,
        name=entry.name,
        state=entry.state,
        attempts=entry.attempts,
        started_at=to_datetime(entry.started_ms) if entry.started_ms else None,
        duration_ms=None if ended is None else max(0, ended - entry.started_ms),
        value=entry.value,
        error=f"{entry.error_type}: {entry.error}" if entry.error_type else None,
        until=to_datetime(entry.until_ms) if entry.until_ms else None,
    )


class Runs:
    """``app.runs``: runs as operators read them."""

    def __init__(self, parts: AppParts) -> None:
        self._parts = parts

    def journal(self, run_id: str) -> RunJournal | None:
        """The journal of durable run ``run_id`` (None: it has none: not a durable run,
        not started yet, or its journal expired)."""
        backend = self._parts.backend
        entries = JournalStore(backend.results).read(run_id)
        if not entries:
            return None
        status = read(backend, run_id).status
        steps = [_step(n, entry) for n, entry in enumerate(entries, 1)]
        return RunJournal(
            id=run_id, status=status, steps=steps, waiting_for=_waiting(status, steps)
        )


def _waiting(status: RunStatus, steps: list[JournalStep]) -> str | None:
    """What a stored (not running, not finished) durable run waits for: its last entry's
    wake-up, event or step retry."""
    if status is not RunStatus.SCHEDULED or not steps:
        return None
    last = steps[-1]
    until = f"{last.until:%Y-%m-%d %H:%M:%S} UTC" if last.until is not None else "its due time"
    if last.kind == "sleep":
        return f"a sleep until {until}"
    if last.kind == "wait" and last.state == "waiting":
        return f"event {last.name!r} until {until}"
    if last.state == "retrying":
        return f"the retry of step {last.name!r}"
    return None
