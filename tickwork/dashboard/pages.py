"""The dashboard's pages and actions. Each page reads through the ``App`` (never the
backend's internals); each action is a POST that passes its guard's ``allow_action``
(token, read-only mode, CSRF) and redirects back to the page it came from."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib.resources import files
from typing import Any
from zoneinfo import ZoneInfo

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from tickwork.api.app import create_api
from tickwork.api.hardening import BodyLimit, SecureHeaders
from tickwork.api.security import Access, Guard, Refused
from tickwork.dashboard.calendars_page import calendars_routes
from tickwork.dashboard.charts import lateness_chart, throughput_chart
from tickwork.dashboard.events_page import events_routes
from tickwork.dashboard.graph_drawing import drawing
from tickwork.dashboard.limits_page import limits_routes
from tickwork.dashboard.plumbing import Act, Audit, Form, Gather, Handler, action, page
from tickwork.dashboard.poison_page import poison_routes
from tickwork.scheduler import App, InvalidMessage, TickworkError

_BACKFILL_LIMIT = 1000  # occurrences one backfill from the page may enqueue


def create_dashboard(app: App, access: Guard | None = None) -> Starlette:
    """The dashboard of ``app``'s backend, guarded by ``access`` (default: no token,
    actions allowed: bind it to loopback only, as ``tickwork dashboard`` does)."""
    guard = access or Access()
    views = _Views(app)

    def show(template: str, gather: Gather) -> Handler:
        return page(guard, template, gather)

    def act(doer: Act) -> Handler:
        return action(guard, doer)

    routes = [
        Route("/", show("overview.html", views.overview)),
        Route("/live.js", live_script),
        Route("/schedules", show("schedules.html", views.schedules)),
        Route("/history", show("history.html", views.history)),
        Route("/workers", show("workers.html", views.workers)),
        Route("/message", show("message.html", views.message)),
        Route("/workflow", show("workflow.html", views.workflow)),
        Route("/queues/{queue}/{verb:str}", act(views.queue_action), methods=["POST"]),
        Route("/schedules/{queue}/{key}/{verb:str}", act(views.schedule_action), methods=["POST"]),
        Route("/messages/{id}/{verb:str}", act(views.message_action), methods=["POST"]),
        *poison_routes(app, guard),
        *limits_routes(app, guard),
        *events_routes(app, guard),
        *calendars_routes(app, guard),
        Mount("/api/v1", create_api(app, guard, audit_of(app))),  # the API, same guard
    ]
    # every response with the security headers, every request body bounded
    dashboard = Starlette(
        routes=routes, middleware=[Middleware(SecureHeaders), Middleware(BodyLimit)]
    )
    dashboard.state.audit = audit_of(app)  # each action, in the audit log
    return dashboard


_LIVE_SCRIPT = files("tickwork.dashboard").joinpath("static/live.js")


async def live_script(request: Request) -> Response:
    """The pages' one script (``static/live.js``): their live updates."""
    return Response(_LIVE_SCRIPT.read_bytes(), media_type="text/javascript")


def audit_of(app: App) -> Audit:
    """What records, in ``app``'s audit log, a request of the dashboard or the API that
    no service recorded (one refused, or a producer's write through the API)."""

    def audit(actor: str, action: str, outcome: str) -> None:
        app.audit.record(action, "", actor=actor, outcome=outcome)

    return audit


class _Views:
    def __init__(self, app: App) -> None:
        self.app = app

    # -- pages ---------------------------------------------------------------------------

    def overview(self, request: Request) -> dict[str, Any]:
        """Each queue's depth and state, and the charts of the last hour: of every queue,
        or of the one ``?chart=`` names."""
        stats = self.app.queues.stats()
        shown = request.query_params.get("chart") or None
        if shown not in {q.queue for q in stats}:
            shown = None
        minutes = self.app.queues.activity(60, shown).total
        return {
            "title": "Queues",
            "queues": stats,
            "done": request.query_params.get("done"),
            "chart_queue": shown,
            "throughput": throughput_chart(minutes),
            "lateness": lateness_chart(minutes),
            "last_hour": sum(m.finished for m in minutes),
            "last_hour_failed": sum(m.failed for m in minutes),
        }

    def schedules(self, request: Request) -> dict[str, Any]:
        return {
            "title": "Schedules",
            "schedules": self.app.schedules.list(),
            "done": request.query_params.get("done"),
        }

    def history(self, request: Request) -> dict[str, Any]:
        """A schedule's occurrence ledger (``?key=``), or a one-off message's (``?id=``)."""
        params = request.query_params
        key, message_id = params.get("key") or None, params.get("id") or None
        queue = params.get("queue") or None
        entries, trigger, actions = [], None, []
        if key:
            entries = self.app.schedules.history(key, queue=queue)
            actions = self.app.schedules.actions(key, queue=queue)
            found = self.app.get(key=key, queue=queue)
            trigger = found.message.trigger if found is not None else None
        elif message_id:
            entries = self.app.run_history(message_id, queue=queue)
        return {
            "title": "History",
            "entries": entries,
            "actions": actions,
            "trigger": trigger,
            "asked": key or message_id,
            "key": key,
            "queue": queue or "",
        }

    def workers(self, request: Request) -> dict[str, Any]:
        return {"title": "Workers", "workers": self.app.workers.live()}

    def message(self, request: Request) -> dict[str, Any]:
        params = request.query_params
        message_id, key = params.get("id") or None, params.get("key") or None
        found = None
        if message_id or key:
            found = self.app.get(
                id=message_id, key=None if message_id else key, queue=params.get("queue") or None
            )
        info = self.app.result(message_id) if message_id else None
        run = found.message.id if found is not None else message_id
        return {
            "title": "Message",
            "live_filter": f"run={run}" if run else "",
            "found": found,
            "info": info,
            "asked": message_id or key,
            "done": params.get("done"),
        }

    def workflow(self, request: Request) -> dict[str, Any]:
        params = request.query_params
        view, error = None, None
        wanted, key = params.get("id") or None, params.get("key") or None
        journal = None if wanted is None else self.app.runs.journal(wanted)
        if (wanted or key) and journal is None:
            try:
                view = self.app.batches.workflow(wanted, key=key, queue=params.get("queue") or None)
            except TickworkError as err:
                error = str(err)
        picture = drawing(view) if view is not None and view.kind == "graph" else None
        return {
            "title": "Workflow",
            "view": view,
            "journal": journal,
            "error": error,
            "asked": wanted or key,
            "drawing": picture,
        }

    # -- actions -------------------------------------------------------------------------

    def queue_action(self, path: dict[str, str], form: Form) -> str:
        queue, verb, actor = path["queue"], path["verb"], path.get("actor")
        if verb == "pause":
            paused = self.app.queues.pause(queue, actor=actor)
            return f"paused {queue}" if paused else f"{queue} was paused"
        if verb == "resume":
            resumed = self.app.queues.resume(queue, actor=actor)
            return f"resumed {queue}" if resumed else f"{queue} was not paused"
        raise Refused(404, f"no queue action {verb!r}")

    def schedule_action(self, path: dict[str, str], form: Form) -> str:
        queue, key, verb = path["queue"], path["key"], path["verb"]
        actor = path.get("actor")
        if verb == "pause":
            done = self.app.schedules.pause(key, queue=queue, actor=actor)
            return f"paused {key}" if done else f"{key} was paused"
        if verb == "resume":
            resumed = self.app.schedules.resume(
                key, queue=queue, misfire=form.get("misfire", "skip"), actor=actor
            )
            return f"resumed {key}" if resumed is not None else f"{key} was not paused"
        if verb == "run":
            run = self.app.schedules.trigger_now(key, queue=queue, actor=actor)
            return f"{key} runs now as {run}"
        if verb == "backfill":
            start, end = self._wall_times(key, queue, form.get("start"), form.get("end"))
            filled = self.app.schedules.backfill(
                key, start, end, queue=queue, limit=_BACKFILL_LIMIT, actor=actor
            )
            return (
                f"backfill of {key}: {len(filled.occurrences)} occurrence(s) in the range, "
                f"enqueued {filled.enqueued}, {filled.already} backfilled before"
            )
        raise Refused(404, f"no schedule action {verb!r}")

    def _wall_times(self, key: str, queue: str, *given: str | None) -> tuple[datetime, datetime]:
        """The form's ``datetime-local`` values, read in the schedule's timezone (UTC
        for a schedule without one)."""
        found = self.app.get(key=key, queue=queue)
        zone = getattr(found.message.trigger, "tz", None) if found is not None else None
        times = []
        for value in given:
            try:
                moment = datetime.fromisoformat(value or "")
            except ValueError:
                raise InvalidMessage(
                    f"backfill needs a start and an end time, not {value!r}"
                ) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=ZoneInfo(zone) if zone else UTC)
            times.append(moment)
        return times[0], times[1]

    def message_action(self, path: dict[str, str], form: Form) -> str:
        message_id, verb, actor = path["id"], path["verb"], path.get("actor")
        if verb == "cancel":
            cancelled = self.app.cancel(id=message_id, actor=actor)
            return f"cancelled {message_id}" if cancelled else "nothing to cancel"
        if verb == "abort":
            return f"abort of {message_id}: {self.app.abort(id=message_id, actor=actor).value}"
        raise Refused(404, f"no message action {verb!r}")
