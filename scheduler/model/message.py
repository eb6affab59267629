"""The message: an immutable pydantic model, encoded as compact JSON (never pickle).

Delivery state (lease, attempt counter, ack handle) is not part of the message; it lives
on the backend's ``Claim``. A message's body is written once and never rewritten.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import from_json, to_json

from tickwork.scheduler.backends.base import Envelope, State, StoredMessage
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.errors import DecodeError
from tickwork.scheduler.ids import keyed_chain_id
from tickwork.scheduler.model import headers as header_names
from tickwork.scheduler.model.places import Callback, ChainStart, Membership, Node, Step
from tickwork.triggers import AnyTrigger

#: stored triggers (their JSON) and what they validated to, at most _TRIGGERS_MOST of them
_TRIGGERS: dict[bytes, Any] = {}
_TRIGGERS_MOST = 4096


class Message(BaseModel):
    """A task invocation with its trigger and its place in a recurring chain."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    queue: str
    task: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    key: str | None = None
    priority: int = 0
    trigger: AnyTrigger | None = None
    chain: str = Field(default_factory=lambda data: data.get("id", ""))  # a compact body
    occurrence: int = 0
    scheduled_at: datetime
    enqueued_at: datetime = Field(default_factory=lambda data: data.get("scheduled_at"))
    max_attempts: int = 1
    timeout_s: float = 300.0
    headers: dict[str, str] = Field(default_factory=dict)
    last_run_at: datetime | None = None
    misfires: int = 0
    paused_at: datetime | None = None  # a paused schedule: stored, never due (see control)
    last_success_at: datetime | None = None  # scheduled time of the chain's last success
    limit: str | None = None  # the concurrency limit key its runs hold a slot of
    rate: str | None = None  # the rate limit key its starts are counted under
    cost: int = 1  # how many units of its rate limit its start counts (``Call.cost``)
    fair: str | None = None  # its fair-share key: takes turns with other keys' messages
    then: list[Step] = Field(default_factory=list)  # a chain's steps after this one
    step: int = 0  # in a recurring chain: this step's index within its occurrence
    start: ChainStart | None = None  # in a recurring chain's later step: how it starts
    member: Membership | None = None  # a member of a batch: its outcome is counted
    callback: Callback | None = None  # a batch's callback: parked until the batch settles
    expire_after_ms: int | None = None  # not run if not started this long after it is due
    node: Node | None = None  # a node of a graph: its outcome feeds its children's fan-ins

    @field_validator("trigger", mode="wrap")
    @classmethod
    def _known_trigger(cls, value: Any, validate: ValidatorFunctionWrapHandler) -> Any:
        """A stored trigger validated once per process (``_TRIGGERS``): a recurring
        chain's every message carries the same one, and keying it costs a fraction of
        validating it. Triggers are frozen, so messages share them."""
        if not isinstance(value, dict):
            return validate(value)
        try:
            known = to_json(value)
        except ValueError:  # not JSON's (a dict built in Python holding any object)
            return validate(value)
        found = _TRIGGERS.get(known)
        if found is None:
            found = validate(value)
            if len(_TRIGGERS) >= _TRIGGERS_MOST:
                _TRIGGERS.clear()
            _TRIGGERS[known] = found
        return found

    def encode(self) -> bytes:
        """Compact JSON bytes, the one form every body is written in (``encode_fields``'):
        fields at their defaults left out, times as epoch milliseconds (when whole),
        ``chain`` and ``enqueued_at`` left out when they equal ``id`` and
        ``scheduled_at``, a long chain's steps compressed."""
        fields = self.model_dump(mode="json", exclude_defaults=True)
        for name in _TIMES:
            value = getattr(self, name)
            if name in fields and value is not None:
                fields[name] = stamp(value)
        fields["scheduled_at"] = stamp(self.scheduled_at)
        if self.enqueued_at == self.scheduled_at:
            fields.pop("enqueued_at", None)
        else:
            fields["enqueued_at"] = stamp(self.enqueued_at)
        if self.chain == self.id:
            fields.pop("chain", None)
        then = fields.pop("then", None)
        return to_json(with_steps(fields, then) if then else fields)

    @classmethod
    def decode(cls, body: bytes) -> Message:
        """Parse stored bytes; raises ``DecodeError`` (only) on anything malformed. A long
        chain's steps are stored compressed (``then_z``, see ``with_steps``): such a body
        is parsed first and its steps unpacked; any other is validated from its JSON
        directly (a model-wide validator would make pydantic build the whole body as
        Python objects first)."""
        try:
            if b'"then_z"' not in body:
                return cls.model_validate_json(body)
            data = from_json(body)
            if isinstance(data, dict) and "then_z" in data:
                data["then"] = unpack_steps(data.pop("then_z"))
            return cls.model_validate(data)
        except (PydanticValidationError, ValueError, UnicodeDecodeError) as err:
            if body.startswith(b"\x00tw-"):  # scheduler.encryption's values
                raise DecodeError(
                    "an encrypted message, and this app has no key for it "
                    "(TICKWORK_ENCRYPTION_KEYS)"
                ) from err
            raise DecodeError(f"not a tickwork message: {err}") from err

    def envelope(self, due_ms: int, body: bytes | None = None) -> Envelope:
        return Envelope(
            id=self.id,
            queue=self.queue,
            key=self.key,
            priority=self.priority,
            due_ms=due_ms,
            timeout_ms=int(self.timeout_s * 1000),
            body=self.encode() if body is None else body,
            fair=self.fair,
            limit=self.limit,
        )


def encode_fields(
    *,
    id: str,
    queue: str,
    task: str,
    chain: str,
    scheduled_at: datetime,
    enqueued_at: datetime,
    args: list[Any],
    kwargs: dict[str, Any],
    key: str | None,
    priority: int,
    trigger: dict[str, Any] | None,
    occurrence: int,
    max_attempts: int,
    timeout_s: float,
    headers: Mapping[str, str] | None,
    misfires: int,
    limit: str | None = None,
    rate: str | None = None,
    fair: str | None = None,
    cost: int = 1,
    then: list[dict[str, Any]] | None = None,
    member: dict[str, Any] | None = None,
    callback: dict[str, Any] | None = None,
    expire_after_ms: int | None = None,
    node: dict[str, Any] | None = None,
) -> bytes:
    """Encode already-validated message fields without building a model: the path of
    every enqueue. The same message as ``Message.encode`` writes (fields at their
    defaults left out), more compactly: times as epoch milliseconds (when whole), and
    ``chain`` and ``enqueued_at`` left out when they equal ``id`` and ``scheduled_at``
    (a one-off message's case); ``Message.encode`` writes the same form from a model."""
    fields: dict[str, Any] = {"id": id, "queue": queue, "task": task}
    if args:
        fields["args"] = args
    if kwargs:
        fields["kwargs"] = kwargs
    if key is not None:
        fields["key"] = key
    if priority:
        fields["priority"] = priority
    if trigger is not None:
        fields["trigger"] = trigger
    if chain != id:
        fields["chain"] = chain
    if occurrence:
        fields["occurrence"] = occurrence
    fields["scheduled_at"] = stamp(scheduled_at)
    if enqueued_at != scheduled_at:
        fields["enqueued_at"] = stamp(enqueued_at)
    if max_attempts != 1:
        fields["max_attempts"] = max_attempts
    if timeout_s != 300.0:
        fields["timeout_s"] = timeout_s
    if headers:
        fields["headers"] = dict(headers)
    if misfires:
        fields["misfires"] = misfires
    if limit is not None:
        fields["limit"] = limit
    if rate is not None:
        fields["rate"] = rate
    if fair is not None:
        fields["fair"] = fair
    if cost != 1:
        fields["cost"] = cost
    if then:
        fields = with_steps(fields, then)
    if member is not None:
        fields["member"] = member
    if callback is not None:
        fields["callback"] = callback
    if expire_after_ms is not None:
        fields["expire_after_ms"] = expire_after_ms
    if node is not None:
        fields["node"] = node
    return to_json(fields)


#: where a paused schedule's message waits (and any message parked until something wakes
#: it): no worker's clock reaches it
PAUSED_DUE = datetime(2200, 1, 1, tzinfo=UTC)


def kept_record(queue: str, task: str, key: str, record: Any, now: datetime) -> Envelope:
    """A parked message (never due) in ``queue`` keeping ``record`` (its one argument,
    JSON) under ``key``: how named calendars, event subscriptions and limit capacities
    are stored, with verbs every backend has (``get_by_key``, ``keyed``,
    ``delete_by_key``)."""
    message = Message(
        id=keyed_chain_id(queue, key),
        queue=queue,
        task=task,
        args=[record],
        key=key,
        scheduled_at=PAUSED_DUE,
        enqueued_at=now,
    )
    return message.envelope(to_ms(PAUSED_DUE))


#: the optional time fields of a message (``scheduled_at`` and ``enqueued_at`` besides)
_TIMES = ("last_run_at", "paused_at", "last_success_at")

#: times stored as epoch milliseconds from here on; read back as such, not as seconds
#: (pydantic takes a number above 2e10 as milliseconds: from 1970-08-20 on)
MS_FROM = 20_000_000_001


def stamp(value: datetime) -> datetime | int:
    """A time as stored in a compact body: epoch ms when that is exact, else as is."""
    if value.microsecond % 1000 or value.tzinfo is None:
        return value
    ms = to_ms(value)
    return ms if ms >= MS_FROM else value


UNIQUE_UNTIL = header_names.UNIQUE_UNTIL
UNIQUE_FOR = header_names.UNIQUE_FOR


def is_unique_window(message: Message) -> bool:
    """Whether ``message`` only holds its key for a ``unique_for`` window."""
    return UNIQUE_UNTIL in message.headers


#: the fields ``reencode`` may change whose default is not None (left out at it)
_NOT_NONE_DEFAULTS = {"occurrence": 0, "misfires": 0}


def reencode(body: bytes, changes: Mapping[str, Any]) -> bytes:
    """A stored message without steps (no ``then``, not a later step of a recurring
    chain) with ``changes`` made (field -> value; None or an integer field's default
    leaves the field out), without building a model: what ``Message.decode(body)``
    copied with the changes would encode to, in ``encode_fields``' compact form (a
    recurring chain's every next occurrence, without that copy and encode)."""
    fields: dict[str, Any] = from_json(body)
    fields.setdefault("chain", fields["id"])  # what a compact body leaves out
    fields.setdefault("enqueued_at", fields["scheduled_at"])
    for name, value in changes.items():
        if value is None or _NOT_NONE_DEFAULTS.get(name) == value:
            fields.pop(name, None)
        else:
            fields[name] = stamp(value) if isinstance(value, datetime) else value
    if fields["chain"] == fields["id"]:
        del fields["chain"]
    if fields["enqueued_at"] == fields["scheduled_at"]:
        del fields["enqueued_at"]
    return to_json(fields)


#: a chain's steps longer than this (encoded) are stored compressed: a message carries
#: every step after its own, so a long chain's first messages would be large (Cassandra
#: stores at most 32 KB) and each ack would copy them
PACK_STEPS_OVER = 2048


def with_steps(fields: dict[str, Any], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """``fields`` with a chain's later ``steps``: as they are, or packed when long."""
    encoded = to_json(steps)
    if len(encoded) > PACK_STEPS_OVER:
        fields["then_z"] = base64.b64encode(zlib.compress(encoded, 6)).decode()
    else:
        fields["then"] = steps
    return fields


def unpack_steps(packed: Any) -> Any:
    """The steps ``with_steps`` packed; ``ValueError`` for anything else."""
    if not isinstance(packed, str):
        raise ValueError("then_z must be a string")
    try:
        return from_json(zlib.decompress(base64.b64decode(packed, validate=True)))
    except (zlib.error, binascii.Error) as err:
        raise ValueError(f"then_z is not packed steps: {err}") from err


@dataclass(frozen=True, slots=True)
class ScheduledMessage:
    """A stored message as ``App.get`` returns it."""

    message: Message
    state: State
    due_at: datetime
    attempt: int
    last_error: str | None

    @classmethod
    def from_stored(cls, stored: StoredMessage) -> ScheduledMessage:
        return cls(
            Message.decode(stored.envelope.body),
            stored.state,
            to_datetime(stored.envelope.due_ms),
            stored.attempt,
            stored.last_error,
        )

    def as_dict(self) -> dict[str, Any]:
        data = self.message.model_dump(mode="json", exclude_defaults=True)
        data.update(
            state=str(self.state),
            due_at=self.due_at.isoformat(),
            attempt=self.attempt,
            last_error=self.last_error,
        )
        return data
