"""Limit capacities set at run time (``app.limits.set``), stored in the backend for every
worker: a concurrency limit's runs at once, or a rate limit's starts per its period, in
place of what the tasks declare.

A capacity set is a parked message (never due) in the queue ``LIMITS_QUEUE``, keyed
``{kind}:{name}``, whose one argument is its ``CapacitySetting``, as the named calendars
are kept (``scheduler/schedules/calendars.py``): every backend stores, reads and lists it
with the verbs it has. Workers read them all every ``REFRESH_S`` seconds
(``workers/admission/live_limits.py``), so a change is obeyed within that time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import Backend, Envelope
from tickwork.scheduler.errors import DecodeError
from tickwork.scheduler.model.message import Message, kept_record

#: the queue holding the capacities set at run time (nothing in it is ever due)
LIMITS_QUEUE = "tickwork.limits"

#: the task name of a stored capacity's message
CAPACITY_TASK = "tickwork.limit"

#: how long a worker enforces the capacities it read before it reads them again
REFRESH_S = 2.0

LimitKind = Literal["concurrency", "rate"]


class CapacitySetting(BaseModel):
    """A capacity set at run time for the limit ``name`` of ``kind``: ``amount`` runs at
    once (concurrency) or starts per the declared period (rate), set ``at`` by
    ``actor``."""

    model_config = ConfigDict(frozen=True)

    kind: LimitKind
    name: str
    amount: int
    at: datetime
    actor: str
    note: str | None = None


def setting_key(kind: LimitKind, name: str) -> str:
    """The key a capacity of limit ``name`` of ``kind`` is stored under."""
    return f"{kind}:{name}"


def setting_envelope(setting: CapacitySetting) -> Envelope:
    """The parked message that stores ``setting`` (replacing the one before it)."""
    key = setting_key(setting.kind, setting.name)
    record = setting.model_dump(mode="json", exclude_none=True)
    return kept_record(LIMITS_QUEUE, CAPACITY_TASK, key, record, setting.at)


def read_settings(backend: Backend) -> dict[tuple[LimitKind, str], CapacitySetting]:
    """Every capacity set at run time, by (kind, name): one read. A stored record that
    does not read as one is passed over."""
    found: dict[tuple[LimitKind, str], CapacitySetting] = {}
    for stored in backend.messages.keyed(LIMITS_QUEUE):
        try:
            (raw,) = Message.decode(stored.envelope.body).args
            setting = CapacitySetting.model_validate(raw)
        except (DecodeError, ValidationError, ValueError):
            continue
        found[(setting.kind, setting.name)] = setting
    return found
