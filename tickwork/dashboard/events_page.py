"""The events page: the subscriptions stored in the backend (which task gets which
events) and the events delivered lately, with whom each reached."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from tickwork.api.security import Guard
from tickwork.dashboard.plumbing import page
from tickwork.scheduler import App

#: how many recent events the page shows
SHOWN = 100


def events_routes(app: App, access: Guard) -> list[Route]:
    """The events page, guarded by ``access`` (it only reads)."""
    return [Route("/events", page(access, "events.html", lambda request: _gather(app, request)))]


def _gather(app: App, request: Request) -> dict[str, Any]:
    name = request.query_params.get("name") or ""
    recent = app.events.recent(SHOWN)
    if name:
        recent = [d for d in recent if d.event.name == name]
    return {
        "title": "Events",
        "subscriptions": app.events.subscriptions(),
        "recent": recent,
        "name": name,
    }
