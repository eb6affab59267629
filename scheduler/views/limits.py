"""``app.limits``: the concurrency and rate limits of an app's deployment, and their
capacities changed at run time.

``app.limits.set("openai", 20_000)`` stores a capacity for limit ``openai`` in the
backend (``scheduler/limits/capacities.py``); every running worker obeys it within
``REFRESH_S`` seconds, in place of what the tasks declare, until ``app.limits.clear``
gives the declared one back. Each change is recorded in ``app.audit``. The limits known
are those this app's tasks declare and those live workers publish, so a dashboard or a
command line started without the tasks' module sees them too.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import OnConflict
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import InvalidMessage, LimitNotFound
from tickwork.scheduler.limits.capacities import (
    LIMITS_QUEUE,
    CapacitySetting,
    LimitKind,
    read_settings,
    setting_envelope,
    setting_key,
)
from tickwork.scheduler.limits.view import DeclaredLimit, declared_limits, merged
from tickwork.scheduler.schedules.actions import default_actor
from tickwork.scheduler.views.presence import live_workers

if TYPE_CHECKING:
    from tickwork.scheduler.model.registry import TaskRegistry
    from tickwork.scheduler.parts import AppParts

#: the largest capacity one may set (a guard against a typo's extra zeros)
MOST = 1_000_000_000


class LimitView(BaseModel):
    """A limit as the command line (``tickwork limits list --json``) and the API
    (``GET /api/v1/limits``) show it: what its tasks declare and what is in force now (a
    capacity set at run time, or the declared one)."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: LimitKind
    declared: int | None  # None: declared by no task known here (set for a later one)
    amount: int  # in force now
    period_s: float | None = None  # a rate limit's period
    per_key: bool = False
    tasks: tuple[str, ...] = ()
    set_at: datetime | None = None  # when a capacity was set at run time, if one is
    set_by: str | None = None
    note: str | None = None


class Limits:
    """The limits of an app's deployment (``app.limits``)."""

    def __init__(self, parts: AppParts, registry: TaskRegistry) -> None:
        self._parts = parts
        self._registry = registry

    def declared(self) -> list[DeclaredLimit]:
        """Every limit this app's tasks or a live worker's declare, sorted."""
        workers = [w for w in live_workers(self._parts.backend) if w.alive]
        return merged([*declared_limits(self._registry), *(d for w in workers for d in w.limits)])

    def list(self) -> list[LimitView]:
        """Every limit known, with the capacity in force now (two reads)."""
        settings = read_settings(self._parts.backend)
        views = []
        for limit in self.declared():
            kind: LimitKind = "rate" if limit.kind == "rate" else "concurrency"
            setting = settings.pop((kind, limit.name), None)
            views.append(_view(kind, limit.name, limit, setting))
        views += [_view(kind, name, None, setting) for (kind, name), setting in settings.items()]
        return sorted(views, key=lambda view: (view.kind, view.name))

    def set(
        self,
        name: str,
        amount: int,
        *,
        kind: LimitKind | None = None,
        actor: str | None = None,
        note: str | None = None,
    ) -> LimitView:
        """Set limit ``name``'s capacity to ``amount`` (runs at once, or starts per its
        declared period) for every worker, within ``REFRESH_S`` seconds, recorded in
        ``app.audit``. ``kind`` (``"concurrency"`` or ``"rate"``) may be left out when
        the name is declared by one kind only. ``InvalidMessage`` for an amount that is
        not a whole number from 1 to a billion; ``LimitNotFound`` for a name no task
        here or in a live worker declares, unless ``kind`` is given (a limit of tasks
        not deployed yet)."""
        if isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount <= MOST:
            raise InvalidMessage(
                f"limit {name}: amount must be a whole number from 1 to {MOST:,}, not {amount!r}"
            )
        known = self.declared()  # the workers' registry read once for the kind and the view
        kind = self._kind(name, kind, known)
        backend = self._parts.backend
        who = actor or default_actor()
        setting = CapacitySetting(
            kind=kind,
            name=name,
            amount=amount,
            at=to_datetime(backend.now_ms()),
            actor=who,
            note=note,
        )
        backend.messages.enqueue([setting_envelope(setting)], OnConflict.REPLACE)
        self._parts.audit.record(
            "limit.set", f"{kind} {name}", actor=who, outcome=f"{amount}", note=note
        )
        declared = {(d.kind, d.name): d for d in known}.get((kind, name))
        return _view(kind, name, declared, setting)

    def clear(
        self,
        name: str,
        *,
        kind: LimitKind | None = None,
        actor: str | None = None,
        note: str | None = None,
    ) -> bool:
        """Give limit ``name`` back the capacity its tasks declare (False if none was
        set), recorded in ``app.audit``."""
        kind = self._kind(name, kind, self.declared(), set_only=True)
        deleted = self._parts.backend.messages.delete_by_key(LIMITS_QUEUE, setting_key(kind, name))
        if deleted:
            self._parts.audit.record(
                "limit.clear", f"{kind} {name}", actor=actor, outcome="declared", note=note
            )
        return deleted

    def _kind(
        self,
        name: str,
        kind: LimitKind | None,
        known: builtins.list[DeclaredLimit],
        set_only: bool = False,
    ) -> LimitKind:
        """``kind``, or the one kind of limit ``name`` is (declared, or set)."""
        if kind is not None:
            if kind not in ("concurrency", "rate"):
                raise InvalidMessage(f"limit kind is 'concurrency' or 'rate', not {kind!r}")
            return kind
        kinds = {d.kind for d in known if d.name == name}
        if set_only or not kinds:
            kinds |= {k for k, n in read_settings(self._parts.backend) if n == name}
        if len(kinds) == 1:
            return "rate" if kinds.pop() == "rate" else "concurrency"
        if not kinds:
            raise LimitNotFound(
                f"no limit is named {name!r} here or in a live worker "
                "(give its kind to set one for tasks not deployed yet)"
            )
        raise InvalidMessage(
            f"{name!r} names a concurrency limit and a rate limit: say which (kind=)"
        )


def _view(
    kind: LimitKind,
    name: str,
    declared: DeclaredLimit | None,
    setting: CapacitySetting | None,
) -> LimitView:
    amount = setting.amount if setting is not None else (declared.amount if declared else 0)
    return LimitView(
        name=name,
        kind=kind,
        declared=None if declared is None else declared.amount,
        amount=amount,
        period_s=None if declared is None else declared.period_s,
        per_key=declared is not None and declared.per_key,
        tasks=() if declared is None else declared.tasks,
        set_at=None if setting is None else setting.at,
        set_by=None if setting is None else setting.actor,
        note=None if setting is None else setting.note,
    )
