"""The endpoints of ``/api/v1``: messages (enqueue, read, cancel, abort), results,
schedules (list, preview, pause, resume, run now, history), queues (list, pause,
resume), limits (list, change a capacity live), the poison store (list, replay), workers
and events (emit).

Each is a thin layer over the ``App``'s verbs: an enqueue is checked against the
registered task's signature exactly as ``delay()`` is, and the actor of a steering
action is the guard's (``api`` for a shared token)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tickwork.api.endpoints import ENDPOINTS, Spec
from tickwork.api.models import (
    Backfilled,
    BackfillRequest,
    BoundRequest,
    CalendarRequest,
    Count,
    Done,
    EmitRequest,
    Enqueued,
    EnqueueRequest,
    LimitClearRequest,
    LimitRequest,
    MessageView,
    NoteRequest,
    PurgeRequest,
    ReplayRequest,
    ResumeRequest,
    WeightRequest,
)
from tickwork.api.plumbing import ApiError, Endpoint, actor, endpoint, query
from tickwork.api.security import Guard
from tickwork.scheduler import App, Call, ScheduledMessage
from tickwork.scheduler.backends.codec import shown
from tickwork.scheduler.views.limits import LimitView
from tickwork.scheduler.views.poison import PoisonFilter, PoisonView
from tickwork.scheduler.views.queues import QueueView, QueueWeights
from tickwork.scheduler.views.runs import RunJournal
from tickwork.scheduler.views.schedules import ScheduleView
from tickwork.triggers import Cron, Exclusions, Repeating, Trigger

#: the most items a listing returns
LIST_MOST = 1000


def api_routes(
    app: App, guard: Guard, audit: Callable[[str, str, str], None] | None = None
) -> list[Route]:
    """Every endpoint of the API over ``app``, guarded by ``guard``; each write recorded
    by ``audit(actor, action, outcome)``."""
    handlers = _Handlers(app, guard)
    by_path: dict[str, list[Spec]] = {}
    for spec in ENDPOINTS:
        by_path.setdefault(spec.path, []).append(spec)
    routes = []
    for path, specs in by_path.items():  # one route a path, dispatching on the method
        served = {
            spec.method: endpoint(
                guard,
                getattr(handlers, spec.handler),
                spec.body,
                spec.needs,
                audit,
                record_done=spec.recorded_here,
            )
            for spec in specs
        }
        routes.append(Route(path, _by_method(served), methods=list(served)))
    return routes


def _by_method(served: dict[str, Endpoint]) -> Endpoint:
    async def dispatch(request: Request) -> Response:
        return await served[request.method](request)

    return dispatch


class _Handlers:
    def __init__(self, app: App, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    # -- messages --------------------------------------------------------------------------

    def enqueue(self, request: Request, body: EnqueueRequest) -> Enqueued:
        chosen = [
            name for name in ("at", "delay_s", "every_s", "cron") if getattr(body, name) is not None
        ]
        if len(chosen) > 1:
            raise ApiError(422, "invalid", f"give at most one of {', '.join(chosen)}")
        identity = request.headers.get("idempotency-key") or None
        if identity is not None and body.key is not None:
            raise ApiError(422, "invalid", "give a key or an Idempotency-Key, not both")
        call = Call(
            body.task,
            tuple(body.args),
            dict(body.kwargs),
            key=body.key,
            at=body.at,
            delay_by=None if body.delay_s is None else timedelta(seconds=body.delay_s),
            trigger=_trigger(body),
            queue=body.queue,
            priority=body.priority,
            identity=identity,
        )
        return Enqueued(id=self.app.enqueue(call, on_conflict=body.on_conflict))

    def _found(self, request: Request) -> ScheduledMessage:
        message_id, key = query(request, "id"), query(request, "key")
        if (message_id is None) == (key is None):
            raise ApiError(422, "invalid", "give exactly one of ?id= and ?key=")
        found = self.app.get(id=message_id, key=key, queue=query(request, "queue"))
        if found is None:
            raise ApiError(404, "not_found", f"no message {message_id or key!r}")
        return found

    def read(self, request: Request, _: None) -> MessageView:
        found = self._found(request)
        message = found.message
        return MessageView(
            id=message.id,
            queue=message.queue,
            task=message.task,
            key=message.key,
            state=str(found.state),
            due_at=found.due_at,
            attempt=found.attempt,
            last_error=shown(found.last_error),
            args=list(message.args),
            kwargs=dict(message.kwargs),
            trigger=None if message.trigger is None else message.trigger.describe(),
            paused=message.paused_at is not None,
        )

    def cancel(self, request: Request, body: NoteRequest) -> Done:
        message_id, key = query(request, "id"), query(request, "key")
        if (message_id is None) == (key is None):
            raise ApiError(422, "invalid", "give exactly one of ?id= and ?key=")
        who = actor(self.guard, request)
        done = self.app.cancel(
            id=message_id, key=key, queue=query(request, "queue"), note=body.note, actor=who
        )
        return Done(done=done)

    def abort(self, request: Request, _: NoteRequest) -> dict[str, Any]:
        message_id, key = query(request, "id"), query(request, "key")
        if (message_id is None) == (key is None):
            raise ApiError(422, "invalid", "give exactly one of ?id= and ?key=")
        who = actor(self.guard, request)
        result = self.app.abort(id=message_id, key=key, queue=query(request, "queue"), actor=who)
        return {"result": result.value}

    def result(self, request: Request, _: None) -> dict[str, Any]:
        info = self.app.result(request.path_params["id"])
        return info.model_dump(mode="json", exclude_none=True)

    def journal(self, request: Request, _: None) -> RunJournal:
        run_id = request.path_params["id"]
        journal = self.app.runs.journal(run_id)
        if journal is None:
            raise ApiError(404, "not_found", f"no durable run {run_id!r} has a journal")
        return journal

    # -- schedules -------------------------------------------------------------------------

    def schedules(self, request: Request, _: None) -> list[ScheduleView]:
        found = self.app.schedules.list(query(request, "queue"))[:LIST_MOST]
        return [ScheduleView.of(info) for info in found]

    def preview(self, request: Request, _: None) -> list[dict[str, Any]]:
        count = _count(request, default=10, most=100)
        key = request.path_params["key"]
        return [
            {"at": o.at.isoformat(), "wall": o.wall.isoformat(), "note": o.note}
            for o in self.app.preview(key, count, queue=query(request, "queue"))
        ]

    def history(self, request: Request, _: None) -> list[dict[str, Any]]:
        limit = _count(request, default=100, most=LIST_MOST)
        key = request.path_params["key"]
        entries = self.app.schedules.history(key, queue=query(request, "queue"), limit=limit)
        return [entry.as_json() for entry in entries]

    def pause(self, request: Request, body: NoteRequest) -> Done:
        key, who = request.path_params["key"], actor(self.guard, request)
        queue = query(request, "queue")
        return Done(done=self.app.schedules.pause(key, queue=queue, note=body.note, actor=who))

    def resume(self, request: Request, body: ResumeRequest) -> Done:
        key, who = request.path_params["key"], actor(self.guard, request)
        resumed = self.app.schedules.resume(
            key, queue=query(request, "queue"), misfire=body.misfire, note=body.note, actor=who
        )
        return Done(done=resumed is not None)

    def trigger(self, request: Request, body: NoteRequest) -> Enqueued:
        key, who = request.path_params["key"], actor(self.guard, request)
        queue = query(request, "queue")
        return Enqueued(
            id=self.app.schedules.trigger_now(key, queue=queue, note=body.note, actor=who)
        )

    def backfill(self, request: Request, body: BackfillRequest) -> Backfilled:
        key, who = request.path_params["key"], actor(self.guard, request)
        filled = self.app.schedules.backfill(
            key,
            body.start,
            body.end,
            queue=query(request, "queue"),
            limit=body.limit,
            spacing=timedelta(seconds=body.spacing_s),
            note=body.note,
            actor=who,
        )
        return Backfilled(
            occurrences=len(filled.occurrences), enqueued=filled.enqueued, already=filled.already
        )

    # -- queues, poison, workers, events ---------------------------------------------------

    def queues(self, request: Request, _: None) -> list[QueueView]:
        return self.app.queues.list()

    def pause_queue(self, request: Request, _: NoteRequest) -> Done:
        who = actor(self.guard, request)
        return Done(done=self.app.queues.pause(request.path_params["queue"], actor=who))

    def resume_queue(self, request: Request, _: NoteRequest) -> Done:
        who = actor(self.guard, request)
        return Done(done=self.app.queues.resume(request.path_params["queue"], actor=who))

    def bound(self, request: Request, body: BoundRequest) -> Done:
        who, queue = actor(self.guard, request), request.path_params["queue"]
        self.app.queues.configure(queue, max_pending=body.max_pending, actor=who)
        return Done(done=True)

    def weights(self, request: Request, _: None) -> QueueWeights:
        return self.app.queues.weights(request.path_params["queue"])

    def weigh(self, request: Request, body: WeightRequest) -> QueueWeights:
        who, path = actor(self.guard, request), request.path_params
        return self.app.queues.weigh(path["queue"], path["key"], body.weight, actor=who)

    def limits(self, request: Request, _: None) -> list[LimitView]:
        return self.app.limits.list()

    def set_limit(self, request: Request, body: LimitRequest) -> LimitView:
        who, name = actor(self.guard, request), request.path_params["name"]
        return self.app.limits.set(name, body.amount, kind=body.kind, actor=who, note=body.note)

    def clear_limit(self, request: Request, body: LimitClearRequest) -> Done:
        who, name = actor(self.guard, request), request.path_params["name"]
        return Done(done=self.app.limits.clear(name, kind=body.kind, actor=who, note=body.note))

    def poison(self, request: Request, _: None) -> list[PoisonView]:
        limit = _count(request, default=100, most=LIST_MOST)
        return self.app.poison.list(query(request, "queue"), limit)

    def replay(self, request: Request, body: ReplayRequest) -> Count:
        ids, who = _ids_or_queue(body), actor(self.guard, request)
        chosen = PoisonFilter(queue=body.queue)
        return Count(count=self.app.poison.replay(ids, chosen=chosen, actor=who))

    def purge(self, request: Request, body: PurgeRequest) -> Count:
        ids, who = _ids_or_queue(body), actor(self.guard, request)
        chosen = PoisonFilter(queue=body.queue)
        return Count(count=self.app.poison.purge(ids, chosen=chosen, actor=who))

    def calendars(self, request: Request, _: None) -> dict[str, Any]:
        found = self.app.schedules.calendars.all()
        return {name: rules.model_dump(mode="json") for name, rules in found.items()}

    def put_calendar(self, request: Request, body: CalendarRequest) -> Done:
        try:
            rules = Exclusions(**body.rules)
        except (TypeError, ValueError) as err:  # InvalidTrigger: in tickwork's words
            raise ApiError(422, "invalid", f"bad calendar: {err}") from None
        who = actor(self.guard, request)
        name = request.path_params["name"]
        self.app.schedules.calendars.put(name, rules, note=body.note, actor=who)
        return Done(done=True)

    def delete_calendar(self, request: Request, body: NoteRequest) -> Done:
        who = actor(self.guard, request)
        name = request.path_params["name"]
        return Done(done=self.app.schedules.calendars.delete(name, note=body.note, actor=who))

    def audit(self, request: Request, _: None) -> list[dict[str, Any]]:
        limit = _count(request, default=100, most=LIST_MOST)
        return [record.model_dump(mode="json") for record in self.app.audit.recent(limit)]

    def workers(self, request: Request, _: None) -> list[dict[str, Any]]:
        return [worker.model_dump(mode="json") for worker in self.app.workers.live()]

    def emit(self, request: Request, body: EmitRequest) -> Enqueued:
        event = self.app.emit(
            body.name, body.payload, key=body.key, event_id=body.event_id, queue=body.queue
        )
        return Enqueued(id=event)


def _ids_or_queue(body: ReplayRequest) -> list[str] | None:
    """The ids a replay or purge names (None: it names a queue); ``ApiError`` 422 unless
    it names exactly one of them."""
    if (body.ids is None) == (body.queue is None):
        raise ApiError(422, "invalid", "give exactly one of ids and queue")
    return body.ids


def _trigger(body: EnqueueRequest) -> Trigger | None:
    """The trigger an enqueue asks for; ``ApiError`` 422 for a bad one."""
    try:
        if body.every_s is not None:
            return Repeating(interval=timedelta(seconds=body.every_s), calendar=body.calendar)
        if body.cron is not None:
            return Cron(body.cron.expr, tz=body.cron.tz, calendar=body.calendar)
    except (ValidationError, ValueError) as err:
        raise ApiError(422, "invalid", f"bad trigger: {err}") from None
    if body.calendar is not None:
        raise ApiError(422, "invalid", "calendar needs every_s or cron")
    return None


def _count(request: Request, default: int, most: int) -> int:
    text = query(request, "limit") or query(request, "count")
    if text is None:
        return default
    if not text.isdigit() or not 1 <= int(text) <= most:
        raise ApiError(422, "invalid", f"limit is a whole number from 1 to {most}")
    return int(text)
