"""The dashboard's pages and actions. Each page reads through the ``App`` (never the
backend's internals); each action is a POST that passes ``Access.allow_action`` (token,
read-only mode, CSRF) and redirects back to the page it came from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from scheduler import App, TickworkError
from scheduler.clock import to_datetime
from tickwork.dashboard.security import CSRF_COOKIE, Access, Refused, csrf_token

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def _in_zone(moment: datetime | None, trigger: Any = None, timespec: str = "minutes") -> str:
    """A time as the schedule's owner reads it: in the trigger's timezone if it has one
    (to the minute, or as ``timespec`` says), else in UTC to the second."""
    if moment is None:
        return ""
    zone = getattr(trigger, "tz", None)
    if zone:
        return f"{moment.astimezone(ZoneInfo(zone)).isoformat(timespec=timespec)} {zone}"
    return moment.isoformat(timespec="seconds")


def _ms_time(epoch_ms: int | None) -> str:
    return "" if epoch_ms is None else to_datetime(epoch_ms).isoformat(timespec="seconds")


TEMPLATES.env.filters["in_zone"] = _in_zone
TEMPLATES.env.filters["ms_time"] = _ms_time
Handler = Callable[[Request], Awaitable[Response]]


def create_dashboard(app: App, access: Access | None = None) -> Starlette:
    """The dashboard of ``app``'s backend, guarded by ``access`` (default: no token,
    actions allowed: bind it to loopback only, as ``tickwork dashboard`` does)."""
    guard = access or Access()
    views = _Views(app, guard)
    routes = [
        Route("/", views.page("overview.html", views.overview)),
        Route("/schedules", views.page("schedules.html", views.schedules)),
        Route("/history", views.page("history.html", views.history)),
        Route("/workers", views.page("workers.html", views.workers)),
        Route("/poison", views.page("poison.html", views.poison)),
        Route("/message", views.page("message.html", views.message)),
        Route("/workflow", views.page("workflow.html", views.workflow)),
        Route("/queues/{queue}/{verb:str}", views.action(views.queue_action), methods=["POST"]),
        Route(
            "/schedules/{queue}/{key}/{verb:str}",
            views.action(views.schedule_action),
            methods=["POST"],
        ),
        Route(
            "/poison-queue/{queue}/{verb:str}",
            views.action(views.poison_queue_action),
            methods=["POST"],
        ),
        Route("/poison/{id}/{verb:str}", views.action(views.poison_action), methods=["POST"]),
        Route("/messages/{id}/{verb:str}", views.action(views.message_action), methods=["POST"]),
    ]
    return Starlette(routes=routes)


class _Views:
    def __init__(self, app: App, access: Access) -> None:
        self.app = app
        self.access = access

    # -- plumbing ------------------------------------------------------------------------

    def page(self, template: str, gather: Callable[[Request], dict[str, Any]]) -> Handler:
        async def handler(request: Request) -> Response:
            try:
                self.access.authenticate(request)
            except Refused as refused:
                return _refusal(refused)
            context = await run_in_threadpool(gather, request)
            token = csrf_token(request)
            context.update(csrf=token, read_only=self.access.read_only, path=request.url.path)
            response = TEMPLATES.TemplateResponse(request, template, context)
            response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict")
            return response

        return handler

    def action(self, act: Callable[[dict[str, str], dict[str, str]], str]) -> Handler:
        async def handler(request: Request) -> Response:
            form = {k: str(v) for k, v in (await request.form()).items()}
            try:
                self.access.allow_action(request, form.get("csrf"))
                done = await run_in_threadpool(act, dict(request.path_params), form)
            except Refused as refused:
                return _refusal(refused)
            except TickworkError as err:
                done = f"error: {err}"
            back = form.get("next", "/")
            if not back.startswith("/") or back.startswith("//"):
                back = "/"  # only pages of this dashboard
            separator = "&" if "?" in back else "?"
            return RedirectResponse(f"{back}{separator}done={_quote(done)}", status_code=303)

        return handler

    # -- pages ---------------------------------------------------------------------------

    def overview(self, request: Request) -> dict[str, Any]:
        stats = self.app.backend.stats()
        return {"title": "Queues", "queues": stats, "done": request.query_params.get("done")}

    def schedules(self, request: Request) -> dict[str, Any]:
        return {
            "title": "Schedules",
            "schedules": self.app.schedules(),
            "done": request.query_params.get("done"),
        }

    def history(self, request: Request) -> dict[str, Any]:
        """A schedule's occurrence ledger (``?key=``), or a one-off message's (``?id=``)."""
        params = request.query_params
        key, message_id = params.get("key") or None, params.get("id") or None
        queue = params.get("queue") or None
        entries, trigger = [], None
        if key:
            entries = self.app.history(key, queue=queue)
            found = self.app.get(key=key, queue=queue)
            trigger = found.message.trigger if found is not None else None
        elif message_id:
            entries = self.app.run_history(message_id, queue=queue)
        return {
            "title": "History",
            "entries": entries,
            "trigger": trigger,
            "asked": key or message_id,
            "key": key,
            "queue": queue or "",
        }

    def workers(self, request: Request) -> dict[str, Any]:
        return {"title": "Workers", "workers": self.app.workers()}

    def poison(self, request: Request) -> dict[str, Any]:
        records = self.app.backend.poison_list(limit=200)
        rows = [(r, to_datetime(r.failed_at_ms)) for r in records]
        queues = [s for s in self.app.backend.stats() if s.poison]
        return {
            "title": "Poison queue",
            "records": rows,
            "queues": queues,
            "done": request.query_params.get("done"),
        }

    def message(self, request: Request) -> dict[str, Any]:
        params = request.query_params
        message_id, key = params.get("id") or None, params.get("key") or None
        found = None
        if message_id or key:
            found = self.app.get(
                id=message_id, key=None if message_id else key, queue=params.get("queue") or None
            )
        info = self.app.result(message_id) if message_id else None
        return {
            "title": "Message",
            "found": found,
            "info": info,
            "asked": message_id or key,
            "done": params.get("done"),
        }

    def workflow(self, request: Request) -> dict[str, Any]:
        params = request.query_params
        view, error = None, None
        wanted, key = params.get("id") or None, params.get("key") or None
        if wanted or key:
            try:
                view = self.app.workflow(wanted, key=key, queue=params.get("queue") or None)
            except TickworkError as err:
                error = str(err)
        return {"title": "Workflow", "view": view, "error": error, "asked": wanted or key}

    # -- actions -------------------------------------------------------------------------

    def queue_action(self, path: dict[str, str], form: dict[str, str]) -> str:
        queue, verb = path["queue"], path["verb"]
        if verb == "pause":
            return f"paused {queue}" if self.app.pause(queue) else f"{queue} was paused"
        if verb == "resume":
            return f"resumed {queue}" if self.app.resume(queue) else f"{queue} was not paused"
        raise Refused(404, f"no queue action {verb!r}")

    def schedule_action(self, path: dict[str, str], form: dict[str, str]) -> str:
        queue, key, verb = path["queue"], path["key"], path["verb"]
        if verb == "pause":
            done = self.app.pause_schedule(key, queue=queue)
            return f"paused {key}" if done else f"{key} was paused"
        if verb == "resume":
            resumed = self.app.resume_schedule(
                key, queue=queue, misfire=form.get("misfire", "skip")
            )
            return f"resumed {key}" if resumed is not None else f"{key} was not paused"
        if verb == "run":
            return f"{key} runs now as {self.app.trigger_now(key, queue=queue)}"
        raise Refused(404, f"no schedule action {verb!r}")

    def poison_action(self, path: dict[str, str], form: dict[str, str]) -> str:
        message_id, verb = path["id"], path["verb"]
        if verb == "replay":
            count = self.app.backend.poison_replay([message_id])
            return f"replayed {message_id}" if count else f"{message_id} was not replayed"
        raise Refused(404, f"no poison action {verb!r}")

    def poison_queue_action(self, path: dict[str, str], form: dict[str, str]) -> str:
        """Everything poisoned in one queue: replay it all, or purge it all."""
        queue, verb = path["queue"], path["verb"]
        if verb == "replay":
            return f"replayed {self.app.backend.poison_replay(None, queue)} of {queue}"
        if verb == "purge":
            return f"purged {self.app.backend.poison_purge(queue)} of {queue}"
        raise Refused(404, f"no poison queue action {verb!r}")

    def message_action(self, path: dict[str, str], form: dict[str, str]) -> str:
        message_id, verb = path["id"], path["verb"]
        if verb == "cancel":
            return (
                f"cancelled {message_id}" if self.app.cancel(id=message_id) else "nothing to cancel"
            )
        if verb == "abort":
            return f"abort of {message_id}: {self.app.abort(id=message_id).value}"
        raise Refused(404, f"no message action {verb!r}")


def _refusal(refused: Refused) -> Response:
    headers = {"WWW-Authenticate": 'Basic realm="tickwork"'} if refused.status == 401 else {}
    return PlainTextResponse(str(refused), status_code=refused.status, headers=headers)


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text[:300])
