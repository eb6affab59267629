"""The poison queue page: what failed (reason, attempts, error, traceback), filtered by
queue, reason, task or a piece of the error; replay or purge one message, the ticked
ones, everything the filter matches, or a whole queue."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from tickwork.api.security import Guard, Refused
from tickwork.dashboard.plumbing import Form, action, page
from tickwork.scheduler import App
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.views import poison as poisoned

#: records the page lists at most (a filter narrows them; actions on a filter reach further)
SHOWN = 200
FILTER_FIELDS = ("queue", "reason", "task", "text")
_DONE = {"replay": "replayed", "purge": "purged"}


def poison_routes(app: App, access: Guard) -> list[Route]:
    """The poison page and its actions, guarded by ``access``."""
    views = _PoisonViews(app)
    post = ["POST"]
    return [
        Route("/poison", page(access, "poison.html", views.page)),
        Route("/poison-queue/{queue}/{verb:str}", action(access, views.queue_action), methods=post),
        Route("/poison-selection/{verb:str}", action(access, views.selection_action), methods=post),
        Route("/poison/{id}/{verb:str}", action(access, views.one_action), methods=post),
    ]


def _filter(fields: Any) -> poisoned.PoisonFilter:
    return poisoned.PoisonFilter(**{name: fields.get(name) or None for name in FILTER_FIELDS})


class _PoisonViews:
    def __init__(self, app: App) -> None:
        self.app = app

    def page(self, request: Request) -> dict[str, Any]:
        chosen = _filter(request.query_params)
        limit = SHOWN if chosen.empty else poisoned.MAX_SELECTED  # what an action would take
        records = poisoned.select(self.app.backend, chosen, limit)
        rows = [(r, to_datetime(r.failed_at_ms), poisoned.task_of(r)) for r in records[:SHOWN]]
        queues = [s for s in self.app.queues.stats() if s.poison]
        return {
            "title": "Poison queue",
            "records": rows,
            "matched": len(records),
            "queues": queues,
            "filter": {name: getattr(chosen, name) or "" for name in FILTER_FIELDS},
            "filtered": not chosen.empty,
            "done": request.query_params.get("done"),
        }

    def one_action(self, path: dict[str, str], form: Form) -> str:
        message_id, verb, actor = path["id"], path["verb"], path.get("actor")
        if verb == "replay":
            count = self.app.poison.replay([message_id], actor=actor)
            return f"replayed {message_id}" if count else f"{message_id} was not replayed"
        if verb == "purge":
            count = self.app.poison.purge([message_id], actor=actor)
            return f"purged {message_id}" if count else f"{message_id} was not poisoned"
        raise Refused(404, f"no poison action {verb!r}")

    def queue_action(self, path: dict[str, str], form: Form) -> str:
        """Everything poisoned in one queue: replay it all, or purge it all."""
        queue, verb, actor = path["queue"], path["verb"], path.get("actor")
        chosen = poisoned.PoisonFilter(queue=queue)
        if verb == "replay":
            return f"replayed {self.app.poison.replay(chosen=chosen, actor=actor)} of {queue}"
        if verb == "purge":
            return f"purged {self.app.poison.purge(chosen=chosen, actor=actor)} of {queue}"
        raise Refused(404, f"no poison queue action {verb!r}")

    def selection_action(self, path: dict[str, str], form: Form) -> str:
        """``replay`` or ``purge`` of the ticked messages (``id`` fields), or with
        ``matching=1`` of everything the filter in the form matches."""
        verb, actor = path["verb"], path.get("actor")
        if verb not in ("replay", "purge"):
            raise Refused(404, f"no poison selection action {verb!r}")
        service, done = self.app.poison, _DONE[verb]
        act = service.replay if verb == "replay" else service.purge
        if form.get("matching"):
            chosen = _filter(form)
            if chosen.empty:
                raise Refused(400, "give a filter, or use a queue's replay all / purge all")
            return f"{done} {act(chosen=chosen, actor=actor)} matching the filter"
        ids = form.getlist("id")
        if not ids:
            return "nothing was ticked"
        count = act(ids, actor=actor)
        return f"{done} {count} of {len(ids)} ticked"
