"""What the API offers: each endpoint's path and method, the handler that serves it
(a method of ``routes._Handlers``, by name), what it takes and gives, the role a write
needs, and what it does. ``routes`` serves this table; ``openapi`` documents it."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

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
from tickwork.api.roles import Role
from tickwork.scheduler.views.limits import LimitView
from tickwork.scheduler.views.poison import PoisonView
from tickwork.scheduler.views.queues import QueueView, QueueWeights
from tickwork.scheduler.views.runs import RunJournal
from tickwork.scheduler.views.schedules import ScheduleView


@dataclass(frozen=True)
class Spec:
    """One endpoint: its path and method, the ``_Handlers`` method that serves it, what it
    takes and gives (for the OpenAPI document), and what it does."""

    path: str
    method: str
    handler: str
    body: type[BaseModel] | None
    answer: type[BaseModel] | None  # a model, or (``many``) a list of them
    summary: str
    many: bool = False
    query: tuple[str, ...] = ()
    needs: Role = Role.OPERATOR  # the role a write needs (a read: any)
    #: a write no operator service records (a producer's): the API records it when done
    #: (a refused write it records always)
    recorded_here: bool = False


ENDPOINTS = (
    Spec("/messages", "POST", "enqueue", EnqueueRequest, Enqueued,
         "Enqueue a task (Idempotency-Key: a retried request stores it once)",
         recorded_here=True),
    Spec("/messages", "GET", "read", None, MessageView, "Read a message by id or key",
         query=("id", "key", "queue")),
    Spec("/messages", "DELETE", "cancel", NoteRequest, Done, "Cancel a message by id or key",
         query=("id", "key", "queue")),
    Spec("/messages/abort", "POST", "abort", NoteRequest, None,
         "Stop a running message (or cancel a pending one) by id or key",
         query=("id", "key", "queue")),
    Spec("/results/{id}", "GET", "result", None, None, "A message's run: status, result, progress"),
    Spec("/runs/{id}/journal", "GET", "journal", None, RunJournal,
         "A durable run's journal: each step, sleep and wait, and what it waits for"),
    Spec("/schedules", "GET", "schedules", None, ScheduleView, "The keyed schedules",
         many=True, query=("queue",)),
    Spec("/schedules/{key}/preview", "GET", "preview", None, None,
         "A schedule's next fire times", query=("queue", "count")),
    Spec("/schedules/{key}/history", "GET", "history", None, None,
         "A schedule's occurrence ledger, newest first", query=("queue", "limit")),
    Spec("/schedules/{key}/pause", "POST", "pause", NoteRequest, Done, "Pause a schedule",
         query=("queue",)),
    Spec("/schedules/{key}/resume", "POST", "resume", ResumeRequest, Done,
         "Resume a paused schedule", query=("queue",)),
    Spec("/schedules/{key}/trigger", "POST", "trigger", NoteRequest, Enqueued,
         "Run a schedule's task now, off its grid", query=("queue",)),
    Spec("/schedules/{key}/backfill", "POST", "backfill", BackfillRequest, Backfilled,
         "Run each occurrence of a past range", query=("queue",)),
    Spec("/queues", "GET", "queues", None, QueueView, "Every queue", many=True),
    Spec("/queues/{queue}/pause", "POST", "pause_queue", NoteRequest, Done, "Pause a queue"),
    Spec("/queues/{queue}/resume", "POST", "resume_queue", NoteRequest, Done, "Resume a queue"),
    Spec("/queues/{queue}/bound", "PUT", "bound", BoundRequest, Done,
         "Bound a queue (max_pending: null removes it)", needs=Role.ADMIN),
    Spec("/queues/{queue}/weights", "GET", "weights", None, QueueWeights,
         "A queue's fair-share weights (keys not listed: weight 1)"),
    Spec("/queues/{queue}/weights/{key}", "PUT", "weigh", WeightRequest, QueueWeights,
         "Give a fair-share key of a queue a weight (null: back to 1)", needs=Role.ADMIN),
    Spec("/limits", "GET", "limits", None, LimitView,
         "Every concurrency and rate limit: declared, and in force now", many=True),
    Spec("/limits/{name}", "PUT", "set_limit", LimitRequest, LimitView,
         "Change a limit's capacity for every worker (within seconds)", needs=Role.ADMIN),
    Spec("/limits/{name}", "DELETE", "clear_limit", LimitClearRequest, Done,
         "Give a limit back the capacity its tasks declare", needs=Role.ADMIN),
    Spec("/poison", "GET", "poison", None, PoisonView, "The poison store",
         many=True, query=("queue", "limit")),
    Spec("/poison/replay", "POST", "replay", ReplayRequest, Count,
         "Put poisoned messages back to run"),
    Spec("/poison/purge", "POST", "purge", PurgeRequest, Count,
         "Delete poisoned messages for good", needs=Role.ADMIN),
    Spec("/calendars", "GET", "calendars", None, None, "The named calendars, with their rules"),
    Spec("/calendars/{name}", "PUT", "put_calendar", CalendarRequest, Done,
         "Store (or change) a named calendar", needs=Role.ADMIN),
    Spec("/calendars/{name}", "DELETE", "delete_calendar", NoteRequest, Done,
         "Delete a named calendar no schedule uses", needs=Role.ADMIN),
    Spec("/workers", "GET", "workers", None, None, "The worker registry"),
    Spec("/audit", "GET", "audit", None, None,
         "Every operator action (from Python, the command line, a page or the API) and "
         "every write through the API, newest first",
         query=("limit",)),
    Spec("/events", "POST", "emit", EmitRequest, Enqueued, "Emit an event; its id",
         recorded_here=True),
)  # fmt: skip
