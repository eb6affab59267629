"""The calendars page: each named calendar the schedules share, what it does, which
schedules use it, and who changed it lately."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from tickwork.api.security import Guard
from tickwork.dashboard.plumbing import page
from tickwork.scheduler import App

#: how many changes of each calendar the page shows
CHANGES_SHOWN = 5


def calendars_routes(app: App, access: Guard) -> list[Route]:
    """The calendars page, guarded by ``access`` (it only reads)."""
    return [
        Route("/calendars", page(access, "calendars.html", lambda request: _gather(app, request)))
    ]


def _gather(app: App, request: Request) -> dict[str, Any]:
    service = app.schedules.calendars
    rows = [
        {
            "name": name,
            "rules": rules.describe(),
            "users": service.users(name),
            "changes": service.history(name, CHANGES_SHOWN),
        }
        for name, rules in service.all().items()
    ]
    return {"title": "Calendars", "calendars": rows}
