"""The queues-and-limits page: paused queues (resume them) and bounded queues; each
concurrency and rate limit that a task declares, here or in a live worker, with how
full each of its keys is now and the capacity in force (change it live, or give back
the declared one: an admin's actions); the fair-share weights of the queues (set or
clear one: an admin's action); and a look-up of one key of a limit per key."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from tickwork.api.security import Guard, Refused
from tickwork.dashboard.plumbing import Form, action, page
from tickwork.scheduler import App, InvalidMessage
from tickwork.scheduler.backends.base import Capability
from tickwork.scheduler.limits.capacities import LimitKind
from tickwork.scheduler.limits.view import declared_limits, limit_usage, merged


def limits_routes(app: App, access: Guard) -> list[Route]:
    """The limits page and its actions, guarded by ``access``."""

    def capacity(path: dict[str, str], form: Form) -> str:
        kind: LimitKind = "rate" if path["kind"] == "rate" else "concurrency"
        name, verb, actor = path["name"], path["verb"], path.get("actor")
        if verb == "clear-capacity":
            cleared = app.limits.clear(name, kind=kind, actor=actor)
            return f"{name}: back to its declared capacity" if cleared else f"{name} was not set"
        if verb == "set-capacity":
            text = (form.get("amount") or "").strip()
            if not text.isdigit():
                raise InvalidMessage(f"limit {name}: amount must be a whole number, not {text!r}")
            view = app.limits.set(name, int(text), kind=kind, actor=actor)
            return f"{view.kind} limit {name}: {view.amount} for every worker"
        raise Refused(404, f"no limit action {verb!r}")

    def weigh(path: dict[str, str], form: Form) -> str:
        if path["verb"] != "weigh":
            raise Refused(404, f"no weight action {path['verb']!r}")
        queue, key = form.get("queue") or "", (form.get("key") or "").strip()
        text = (form.get("weight") or "").strip()
        if not text.isdigit():
            raise InvalidMessage(f"weight must be a whole number from 1 to 1000, not {text!r}")
        weight = int(text)
        app.queues.weigh(queue, key, weight, actor=path.get("actor"))
        return f"{queue}: {key} has weight {weight}"

    return [
        Route("/limits", page(access, "limits.html", lambda request: _gather(app, request))),
        Route("/limits/{kind}/{name}/{verb:str}", action(access, capacity), methods=["POST"]),
        Route("/weights/{verb:str}", action(access, weigh), methods=["POST"]),
    ]


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
    fair = Capability.FAIR_SHARE in backend.capabilities
    queues = app.queues.names() if fair else []
    weights = [(q, key, w) for q in queues for key, w in app.queues.weights(q).weights.items()]
    in_force = {(view.kind, view.name): view for view in app.limits.list()}
    return {
        "in_force": in_force,
        "title": "Queues and limits",
        "paused": app.queues.paused(),
        "bounds": sorted(bounds.items()),
        "fair_queues": queues,
        "weights": weights,
        "usage": limit_usage(backend, limits, held, asked),
        "held": held,
        "asked": asked[0] if asked else None,
        "per_key_names": sorted({limit.name for limit in limits if limit.per_key}),
        "lookup": {"limit": name, "value": value},
        "done": request.query_params.get("done"),
    }
