"""The kinds of handler pool a worker can run, by name (``WorkerConfig.pool``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tickwork.scheduler import ConfigurationError
from tickwork.workers.pools.pool import Done, HandlerPool, PoolSpec, W
from tickwork.workers.pools.process_pool import ProcessPool
from tickwork.workers.pools.process_slots import Children
from tickwork.workers.pools.thread_pool import ThreadPool


def _thread_pool(spec: PoolSpec, on_done: Done[Any]) -> HandlerPool[Any]:
    return ThreadPool(
        spec.app,
        spec.size,
        on_done,
        spec.time_limit_grace_s,
        spec.adaptive_threads,
        services=spec.services,
    )


def _process_pool(spec: PoolSpec, on_done: Done[Any]) -> HandlerPool[Any]:
    if not spec.app_reference:
        raise ConfigurationError("the process pool needs app_reference ('module' or 'module:app')")
    children = Children(
        spec.abort_grace_s,
        spec.time_limit_grace_s,
        spec.max_tasks_per_child,
        spec.max_memory_per_child_mb,
    )
    return ProcessPool(spec, spec.app_reference, on_done, children)


#: pool kind (``WorkerConfig.pool``) -> factory
POOL_KINDS: dict[str, Callable[[PoolSpec, Done[Any]], HandlerPool[Any]]] = {
    "thread": _thread_pool,
    "process": _process_pool,
}


def make_pool(kind: str, spec: PoolSpec, on_done: Done[W]) -> HandlerPool[W]:
    """A pool of the kind named ``kind``."""
    try:
        factory = POOL_KINDS[kind]
    except KeyError:
        known = ", ".join(sorted(POOL_KINDS))
        raise ConfigurationError(f"unknown pool kind {kind!r}; known: {known}") from None
    pool: HandlerPool[W] = factory(spec, on_done)
    return pool
