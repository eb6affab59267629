"""Groups and batches: many messages that settle together, and callbacks that fire once.

``app.enqueue(batch(group([...]), on_success=..., on_complete=..., on_failure=...))``
stores the batch's description (its size and where its callbacks wait), then its
callbacks, parked (due at ``PAUSED_DUE``: stored, never claimed), then its members. Each
member carries its place in the batch (``Message.member``); when a member's run settles
for good (it succeeded, or failed for good into the poison queue, or was aborted) the
worker records its outcome with ``Batches.settle`` *before* it acks or poisons
it, and that call counts the member in the same atomic step. Whoever sees the count
reach the batch's size wakes the callbacks that apply (``on_success`` when no member
failed, ``on_failure`` when one did, ``on_complete`` always) and deletes the others.

Why this is exactly once: a member counts once however often it runs (its first
outcome stays), a crash between the count and the ack redelivers the member, whose
settle answers the full count again and wakes again, and waking is idempotent: a
callback is one stored message that runs under a fenced lease like any other. A callback
made with ``task.s()`` takes the batch's outcome as its first argument, read when it
runs (``callback_argument``); one made with ``task.si()`` does not. ``group([...])``
alone is a batch without callbacks: its members' outcomes are still counted, so its
handle can wait for all of them.

Ids: the batch is ``b…`` (a fresh time-ordered id), member ``i`` is ``{batch}.{i}``,
callbacks are ``{batch}.success``, ``{batch}.complete`` and ``{batch}.failure``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.ids import new_chain_id
from tickwork.scheduler.model.message import PAUSED_DUE
from tickwork.scheduler.model.places import Callback, Membership
from tickwork.scheduler.model.shapes import Batch, Group, Sequenced, When
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.producing.building import MessageBuilder
from tickwork.scheduler.producing.planning import plan


class CallbackPlace(BaseModel):
    """Where a parked callback waits."""

    model_config = ConfigDict(frozen=True)

    id: str
    queue: str


class BatchDescription(BaseModel):
    """What is stored when a batch is opened."""

    model_config = ConfigDict(frozen=True)

    size: int
    created_ms: int
    queues: list[str]  # where its members wait
    callbacks: dict[When, CallbackPlace] = {}

    @classmethod
    def decode(cls, body: bytes) -> BatchDescription:
        return cls.model_validate_json(body)

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_defaults=True).encode()


@dataclass(frozen=True, slots=True)
class BuiltBatch:
    """A batch ready to write: its id, description and expiry, then its messages."""

    id: str
    description: BatchDescription
    expires_ms: int
    callbacks: list[Envelope]
    members: list[Envelope]


def member_id(batch_id: str, index: int) -> str:
    """The message id of member ``index`` (from 0) of batch ``batch_id``."""
    return f"{batch_id}.{index}"


def build_batch(
    builder: MessageBuilder, spec: Batch | Group, now_ms: int, retention: timedelta
) -> BuiltBatch:
    """Validate every member and callback and build their envelopes; writes nothing.
    Raises ``InvalidMessage`` naming the first bad call."""
    if isinstance(spec, Group):
        spec = Batch(spec.calls)
    now = to_datetime(now_ms)
    batch_id = "b" + new_chain_id(now_ms)
    latest = now
    calls = [call for call in spec.members if isinstance(call, Call)]
    if len(calls) != len(spec.members):
        raise InvalidMessage("a batch with a chain of groups in it runs as a graph")
    for index, call in enumerate(calls):
        _check_member(index, call)
        latest = max(latest, plan(call, now)[1].at)
    expires_ms = to_ms(latest + (spec.retention or retention))
    size = len(spec.members)
    members = []
    for index, call in enumerate(calls):
        place = Membership(batch=batch_id, index=index, size=size, expires_ms=expires_ms)
        chain = member_id(batch_id, index)
        members.append(builder.build(call, now_ms, now, chain=chain, member=place)[1])
    callbacks, places = build_callbacks(builder, batch_id, spec.callbacks, now_ms)
    queues = sorted({envelope.queue for envelope in members})
    description = BatchDescription(size=size, created_ms=now_ms, queues=queues, callbacks=places)
    return BuiltBatch(batch_id, description, expires_ms, callbacks, members)


def build_callbacks(
    builder: MessageBuilder,
    batch_id: str,
    callbacks: Mapping[When, Call | Group | Sequenced],
    now_ms: int,
) -> tuple[list[Envelope], dict[When, CallbackPlace]]:
    """Validate a batch's callbacks and build their envelopes, parked (due at
    ``PAUSED_DUE``), with where each waits."""
    now = to_datetime(now_ms)
    envelopes, places = [], {}
    for when, call in callbacks.items():
        assert isinstance(call, Call)  # others make the batch a graph
        _check_callback(when, call)
        mark = Callback(batch=batch_id, when=when, takes_result=call.takes_result)
        chain = f"{batch_id}.{when}"
        _, envelope = builder.build(call, now_ms, now, chain=chain, callback=mark)
        envelopes.append(envelope._replace(due_ms=to_ms(PAUSED_DUE)))
        places[when] = CallbackPlace(id=envelope.id, queue=envelope.queue)
    return envelopes, places


def _check_member(index: int, call: Call) -> None:
    if call.takes_result:
        raise InvalidMessage(
            f"member {index} ({call.task}) of a batch has no previous result to take: "
            "make it with .si() or .call()"
        )
    if call.key is not None or call.identity is not None or call.trigger is not None:
        raise InvalidMessage(
            f"member {index} ({call.task}) of a batch cannot have a key, an identity or a "
            "trigger: a member runs once, named by the batch"
        )


def _check_callback(when: When, call: Call) -> None:
    if call.key is not None or call.identity is not None or call.trigger is not None:
        raise InvalidMessage(
            f"the on_{when} callback ({call.task}) cannot have a key, an identity or a "
            "trigger: it runs once, when the batch settles"
        )
    if call.at is not None or call.delay_by is not None:
        raise InvalidMessage(
            f"the on_{when} callback ({call.task}) cannot have its own time: it runs when "
            "the batch settles"
        )
