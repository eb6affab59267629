"""The queues-and-limits page: paused queues (resume them) and bounded queues; each
concurrency and rate limit that a task declares, here or in a live worker, with how
full each of its keys is now; and a look-up of one key of a limit per key."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from tickwork.api.security import Guard
from tickwork.dashboard.plumbing import page
from tickwork.scheduler import App
from tickwork.scheduler.limits.view import declared_limits, limit_usage, merged


def limits_routes(app: App, access: Guard) -> list[Route]:
    """The limits page, guarded by ``access`` (its actions are the queues' own)."""
    return [Route("/limits", page(access, "limits.html", lambda request: _gather(app, request)))]


def _gather(app: App, request: Request) -> dict[str, Any]:
    backend = app.backend
    workers = [w for w in app.workers.live() if w.alive]
    limits = merged([*declared_limits(app.registry), *(d for w in workers for d in w.limits)])
    held: dict[str, int] = {}
    for worker in workers:
        for key, count in worker.holding.items():
            held[key] = held.get(key, 0) + count
    name, value = request.query_params.get("limit") or "", request.query_params.get("value") or ""
    asked = [f"{name}:{value}"] if name and value else []
    bounds = app.queues.bounds()
    return {
        "title": "Queues and limits",
        "paused": app.queues.paused(),
        "bounds": sorted(bounds.items()),
        "usage": limit_usage(backend, limits, held, asked),
        "held": held,
        "asked": asked[0] if asked else None,
        "per_key_names": sorted({limit.name for limit in limits if limit.per_key}),
        "lookup": {"limit": name, "value": value},
        "done": request.query_params.get("done"),
    }
