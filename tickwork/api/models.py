"""What the HTTP API takes and gives, as pydantic models: the request bodies are checked
against them (an unknown field, a wrong type or a naive time is a 422 with the error
shape), the responses are dumped from them, and the OpenAPI document is made from their
JSON schemas (``tickwork.api.openapi``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.names import MAX_KEY, MAX_QUEUE, check_key, check_queue


def _by(rule: Callable[[str], str]) -> AfterValidator:
    """A name checked by tickwork's own rule (``scheduler/model/names.py``), refused in
    its words: the same message Python and the command line give."""

    def check(value: str) -> str:
        try:
            return rule(value)
        except InvalidMessage as err:
            raise PydanticCustomError("name", str(err)) from None

    return AfterValidator(check)


#: a queue name and a key as the API takes them (their bounds also in the OpenAPI schema)
QueueName = Annotated[
    str, _by(check_queue), Field(json_schema_extra={"minLength": 1, "maxLength": MAX_QUEUE})
]
Key = Annotated[
    str, _by(check_key), Field(json_schema_extra={"minLength": 1, "maxLength": MAX_KEY})
]


class ApiModel(BaseModel):
    """A body of the API: unknown fields refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CronSpec(ApiModel):
    """A cron trigger: a 5- or 6-field expression in an IANA timezone."""

    expr: str
    tz: str = "UTC"


class EnqueueRequest(ApiModel):
    """A task to run: its arguments are checked against the registered task's signature,
    as ``delay()`` checks them. At most one of ``at``, ``delay_s``, ``every_s`` and
    ``cron``; none runs it now."""

    task: str = Field(min_length=1, max_length=300)
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    key: Key | None = None
    queue: QueueName | None = None
    priority: int | None = Field(default=None, ge=-(2**31), le=2**31 - 1)
    at: AwareDatetime | None = None
    delay_s: float | None = Field(default=None, ge=0, le=366 * 86_400)
    every_s: float | None = Field(default=None, gt=0, le=366 * 86_400)
    cron: CronSpec | None = None
    calendar: str | None = None
    on_conflict: Literal["error", "ignore", "replace"] = "error"


class Enqueued(ApiModel):
    """The stored message's id."""

    id: str


class MessageView(ApiModel):
    """A stored message."""

    id: str
    queue: str
    task: str
    key: str | None
    state: str
    due_at: datetime
    attempt: int
    last_error: str | None
    args: list[Any]
    kwargs: dict[str, Any]
    trigger: str | None  # as a person writes it
    paused: bool


class Done(ApiModel):
    """Whether the action did something (False: there was nothing to do)."""

    done: bool


class NoteRequest(ApiModel):
    """A steering action's note, kept in the schedule's action log."""

    note: str | None = Field(default=None, max_length=2000)


class ResumeRequest(NoteRequest):
    """How the occurrences that fell in the pause are handled."""

    misfire: Literal["skip", "coalesce", "catch_up"] = "skip"


class BackfillRequest(NoteRequest):
    """Run each occurrence of a schedule from ``start`` to ``end`` (at most ``limit``),
    ``spacing_s`` apart."""

    start: AwareDatetime
    end: AwareDatetime
    limit: int = Field(default=1000, ge=1, le=10_000)
    spacing_s: float = Field(default=0.0, ge=0, le=86_400)


class Backfilled(ApiModel):
    """What a backfill did: runs enqueued now, and runs a backfill enqueued before."""

    occurrences: int
    enqueued: int
    already: int


class BoundRequest(ApiModel):
    """A queue's bound: at most ``max_pending`` messages waiting or leased (null: none)."""

    max_pending: int | None = Field(ge=1)


class WeightRequest(ApiModel):
    """A fair-share key's weight in a queue: that many turns for one of a key of weight 1
    (null or 1: back to even)."""

    weight: int | None = Field(ge=1, le=1000)


class LimitRequest(ApiModel):
    """A limit's capacity set at run time: ``amount`` runs at once (a concurrency limit)
    or starts per its declared period (a rate limit); ``kind`` when the name is both."""

    amount: int = Field(ge=1, le=1_000_000_000)
    kind: Literal["concurrency", "rate"] | None = None
    note: str | None = Field(default=None, max_length=500)


class LimitClearRequest(ApiModel):
    """Give a limit back its declared capacity (``kind`` when the name is both)."""

    kind: Literal["concurrency", "rate"] | None = None
    note: str | None = Field(default=None, max_length=500)


class CalendarRequest(ApiModel):
    """A named calendar's rules (``triggers.Exclusions``: ``dates``, ``ranges``,
    ``holidays``, ``windows``), and why it changes."""

    rules: dict[str, Any]
    note: str | None = Field(default=None, max_length=2000)


class ReplayRequest(ApiModel):
    """Which poisoned messages to put back: these ids, or every one of ``queue``."""

    ids: list[str] | None = Field(default=None, max_length=10_000)
    queue: str | None = None


class PurgeRequest(ReplayRequest):
    """Which poisoned messages to delete for good: these ids, or every one of ``queue``."""


class Count(ApiModel):
    """How many messages the action touched."""

    count: int


class EmitRequest(ApiModel):
    """An event: its name, a JSON payload, the key waits match on, and an id that makes a
    retried emit deliver once."""

    name: str = Field(min_length=1, max_length=200)
    payload: Any = None
    key: str | None = Field(default=None, max_length=1000)
    event_id: str | None = Field(default=None, min_length=1, max_length=200)
    queue: str | None = None


class ErrorDetail(ApiModel):
    """``code``: stable, for programs; ``message``: for people."""

    code: Literal[
        "invalid",
        "unknown_task",
        "not_found",
        "key_conflict",
        "queue_full",
        "unauthorized",
        "forbidden",
        "rate_limited",
        "method_not_allowed",
        "unsupported_media_type",
        "too_large",
        "unavailable",
    ]
    message: str


class ErrorBody(ApiModel):
    """Every error the API answers has this shape."""

    error: ErrorDetail
