"""The plain call's message, its body written straight to bytes. The most common message
(a one-off call of a task without limits, fair share or expiry; no trigger, steps,
headers or expiry on the call) skips building the general field mapping that
``encode_fields`` serializes. The bytes are the same as that general path's:
``tests/unit/test_plain_bodies.py`` compares them call shape by call shape.

The field order and the defaults left out follow ``scheduler.model.message.encode_fields``:
``id``, ``queue``, ``task``, ``args``, ``kwargs``, ``key``, ``priority``, ``chain`` (left
out: a one-off's chain is its id), ``scheduled_at``, ``enqueued_at`` (left out when
equal), ``max_attempts`` (left out at 1), ``timeout_s`` (left out at 300), ``headers``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic_core import to_json

from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.ids import first_chain_id
from tickwork.scheduler.model.message import MS_FROM, stamp
from tickwork.scheduler.model.tasks import Call, TaskFunction, TaskOptions
from tickwork.scheduler.producing.planning import check_scalars, plan
from tickwork.scheduler.runs.tracing import with_traceparent

#: the constant parts of a plain body: what follows its id, what follows its times
_Parts = tuple[bytes, bytes]


def is_plain(call: Call, options: TaskOptions) -> bool:
    """Whether ``call`` of a task with ``options`` takes the plain path."""
    return (
        call.trigger is None
        and not call.then
        and not call.takes_result
        and not call.headers
        and call.expires is None
        and call.cost is None
        and options.concurrency_limit is None
        and options.rate_limit is None
        and options.fair_key is None
        and options.expires is None
        and options.batch is None
        and options.max_wait is None
    )


#: ``MessageBuilder.envelope``: (id, queue, key, priority, timeout_s, body, at, jitter_s,
#: now, now_ms) -> the envelope, its body's size checked
EnvelopeOf = Callable[
    [str, str, str | None, int, float, bytes, datetime, float, datetime, int], Envelope
]


class PlainPath:
    """Builds plain calls' messages, keeping the constant parts of each task's body."""

    def __init__(self) -> None:
        self._parts: dict[tuple[str, str, int, float], _Parts] = {}

    def build(
        self,
        call: Call,
        task: TaskFunction[..., Any],
        now_ms: int,
        now: datetime,
        envelope: EnvelopeOf,
    ) -> tuple[str, Envelope]:
        """``MessageBuilder.build`` for a call that ``is_plain``: the same checks in the
        same order (arguments, scalars, time), the same id and envelope."""
        args, kwargs = task.arguments.to_json(call.args, call.kwargs)
        options = task.options
        timeout_s = options.timeout_s
        queue = options.queue if call.queue is None else call.queue
        check_scalars(call, queue)
        if call.at is None and call.delay_by is None:
            at, scheduled, enqueued = now, encoded_time(now, now_ms), None
        else:
            at = plan(call, now)[1].at
            scheduled = encoded_time(at)
            enqueued = None if at == now else encoded_time(now, now_ms)
        chain = first_chain_id(queue, call.key, call.identity, now_ms)
        priority = options.priority if call.priority is None else call.priority
        body = self.body(
            chain,
            queue,
            task.name,
            args,
            kwargs,
            call.key,
            priority,
            scheduled,
            enqueued,
            options.retry.max_attempts,
            timeout_s,
            with_traceparent(None),
        )
        return chain, envelope(
            chain, queue, call.key, priority, timeout_s, body, at, 0.0, now, now_ms
        )

    def body(
        self,
        message_id: str,
        queue: str,
        task: str,
        args: list[Any],
        kwargs: dict[str, Any],
        key: str | None,
        priority: int,
        scheduled_at: bytes,
        enqueued_at: bytes | None,
        max_attempts: int,
        timeout_s: float,
        headers: Mapping[str, str] | None,
    ) -> bytes:
        """The encoded body: what ``encode_fields`` returns for these fields (``chain``
        equal to the id, no occurrence, misfires or optional feature). ``message_id`` is
        one of tickwork's own (letters, digits and dots: JSON as it is); the times come
        encoded (``encoded_time``), ``enqueued_at`` None when it equals ``scheduled_at``."""
        parts = self._parts.get((task, queue, max_attempts, timeout_s))
        if parts is None:
            parts = self._parts[(task, queue, max_attempts, timeout_s)] = _constant_parts(
                queue, task, max_attempts, timeout_s
            )
        head, tail = parts
        out = [b'{"id":"', message_id.encode(), head]
        if args:
            out += (b',"args":', to_json(args))
        if kwargs:
            out += (b',"kwargs":', to_json(kwargs))
        if key is not None:
            out += (b',"key":', to_json(key))
        if priority:
            out.append(b',"priority":%d' % priority)
        out += (b',"scheduled_at":', scheduled_at)
        if enqueued_at is not None:
            out += (b',"enqueued_at":', enqueued_at)
        out.append(tail)
        if headers:
            out += (b',"headers":', to_json(headers))
        out.append(b"}")
        return b"".join(out)


def _constant_parts(queue: str, task: str, max_attempts: int, timeout_s: float) -> _Parts:
    """(what follows the id: queue and task; what follows the times: the retry and
    timeout settings that are not at their defaults)."""
    head = b'","queue":' + to_json(queue) + b',"task":' + to_json(task)
    tail = b""
    if max_attempts != 1:
        tail += b',"max_attempts":' + to_json(max_attempts)
    if timeout_s != 300.0:
        tail += b',"timeout_s":' + to_json(timeout_s)
    return head, tail


def encoded_time(value: datetime, value_ms: int | None = None) -> bytes:
    """A time as a body stores it (``stamp``); ``value_ms``, when given, is ``value`` in
    epoch milliseconds already (the clock's reading it came from)."""
    if value_ms is not None and value_ms >= MS_FROM:
        return b"%d" % value_ms
    stamped = stamp(value)
    return b"%d" % stamped if isinstance(stamped, int) else to_json(stamped)
