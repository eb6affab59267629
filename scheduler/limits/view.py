"""The limits as an operator sees them (the dashboard's limits page):
each concurrency and rate limit that a task declares, here or in a live worker (every
worker publishes the limits it enforces in its registry record, so a dashboard started
without the tasks' module still sees them), how full it is now, and each limit key a
running message holds.

A limit without a ``limit_key`` has one key, its name: its usage is always shown. A
limit per key has a key per value; the backends do not list those, so the view shows
the keys that running messages hold now (from the workers' records) and any key asked
for by value."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.model.registry import TaskRegistry


class DeclaredLimit(BaseModel):
    """A limit as a task declares it: ``kind`` ``concurrency`` (``amount`` runs at once)
    or ``rate`` (``amount`` starts per ``period_s``), one per value of the limit key when
    ``per_key``."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    amount: int
    period_s: float | None = None
    per_key: bool = False
    tasks: tuple[str, ...] = ()


def declared_limits(registry: TaskRegistry) -> list[DeclaredLimit]:
    """Every limit the registered tasks declare, merged by (kind, name), sorted."""
    found = []
    for name, task in registry.tasks.items():
        if name in registry.aliases:
            continue
        options = task.options
        per_key = options.limit_key is not None
        tasks = (options.name,)
        if (limit := options.concurrency_limit) is not None:
            found.append(
                DeclaredLimit(
                    name=limit.name, kind="concurrency", amount=limit.capacity,
                    per_key=per_key, tasks=tasks,
                )
            )  # fmt: skip
        if (rate := options.rate_limit) is not None:
            found.append(
                DeclaredLimit(
                    name=rate.name, kind="rate", amount=rate.count,
                    period_s=rate.period.total_seconds(), per_key=per_key, tasks=tasks,
                )
            )  # fmt: skip
    return merged(found)


def merged(limits: Iterable[DeclaredLimit]) -> list[DeclaredLimit]:
    """One limit per (kind, name) with the tasks of all (the first one's figures),
    sorted: the same limit as several tasks, or several workers, declare it."""
    found: dict[tuple[str, str], DeclaredLimit] = {}
    for limit in limits:
        known = found.get((limit.kind, limit.name))
        if known is not None:
            tasks = tuple(sorted({*known.tasks, *limit.tasks}))
            per_key = known.per_key or limit.per_key
            limit = known.model_copy(update={"tasks": tasks, "per_key": per_key})
        found[(limit.kind, limit.name)] = limit
    return sorted(found.values(), key=lambda d: (d.kind, d.name))


@dataclass(frozen=True, slots=True)
class KeyUsage:
    """One key of a limit now: ``used`` (slots held under a live lease, or starts in the
    last period) and ``waiting`` (messages waiting for a slot, or starts reserved ahead)."""

    key: str
    used: int
    waiting: int


@dataclass(frozen=True, slots=True)
class LimitUsage:
    limit: DeclaredLimit
    keys: list[KeyUsage]


def limit_usage(
    backend: Backend, limits: list[DeclaredLimit], held: dict[str, int], asked: list[str]
) -> list[LimitUsage]:
    """Each limit with the usage of its keys: its name for a limit without a limit key;
    for one per key, the keys in ``held`` (limit keys of running messages) and ``asked``
    (keys ``NAME:VALUE`` someone looked up). One backend call for every concurrency limit
    together, and one per rate limit (each has its own period)."""
    wanted: dict[DeclaredLimit, list[str]] = {}
    for limit in limits:
        prefix = f"{limit.name}:"
        per_key = sorted({key for key in [*held, *asked] if key.startswith(prefix)})
        wanted[limit] = per_key if limit.per_key else [limit.name]
    concurrency_keys = [
        key for limit in limits if limit.kind == "concurrency" for key in wanted[limit]
    ]
    slots = backend.limits.usage(concurrency_keys) if concurrency_keys else {}
    result = []
    for limit in limits:
        keys = wanted[limit]
        if limit.kind == "concurrency":
            usage = {key: slots.get(key, (0, 0)) for key in keys}
        else:
            period_ms = int((limit.period_s or 0) * 1000)
            usage = backend.rates.usage(keys, period_ms) if keys else {}
        result.append(LimitUsage(limit, [KeyUsage(key, *usage.get(key, (0, 0))) for key in keys]))
    return result
