"""Debounce at enqueue (a task's ``debounce=``, ``scheduler/model/debounce.py``): a call is
stored under its group's key, due one quiet period from now, replacing the call before it
in the group; the first call's time rides in a header so that the run is due at the
latest ``max`` after it. One read (the key's holder) before the write: a debounced call
costs a round trip more than a plain one.

A call that arrives while the group's run is running starts a new period: its message
replaces the running one's record (the running handler finishes; its ack finds its row
gone and writes nothing more)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic_core import ValidationError

from tickwork.scheduler.backends import Backend, State
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.limits import limit_value
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.tasks import Call, TaskFunction

#: the header holding the time (ms) of the first call of the message's period
FIRST_CALL = "tw-debounce-first"
_MS = timedelta(milliseconds=1)


def debounced(call: Call, task: TaskFunction[..., Any], backend: Backend, now_ms: int) -> Call:
    """``call`` as its debounced message is written (with ``OnConflict.REPLACE``): under
    its group's key, due a period from now (at most ``max`` after the period's first call),
    with the first call's arguments when the task keeps them."""
    rule = task.options.debounce
    assert rule is not None
    if call.at is not None or call.delay_by is not None or call.trigger is not None:
        raise InvalidMessage(
            f"task {task.name!r} is debounced: its calls run a quiet period after the last "
            "one, not at a time of their own (at=, delay=, trigger=)"
        )
    key = call.key or group_key(task, rule, call)
    first_ms = now_ms
    holder = backend.messages.get_by_key(call.queue or task.options.queue, key)
    if holder is not None and holder.state is not State.RUNNING:
        try:
            pending = Message.decode(holder.envelope.body)
        except (ValidationError, ValueError):
            pending = None
        if pending is not None and (first := pending.headers.get(FIRST_CALL)) is not None:
            first_ms = int(first)
            if rule.keep == "first":
                call = replace(call, args=tuple(pending.args), kwargs=dict(pending.kwargs))
    due_ms = now_ms + rule.period // _MS
    if rule.max is not None:
        due_ms = min(due_ms, first_ms + rule.max // _MS)
    headers = {**(call.headers or {}), FIRST_CALL: str(first_ms)}
    return replace(call, key=key, at=to_datetime(max(due_ms, now_ms)), headers=headers)


def group_key(task: TaskFunction[..., Any], rule: Debounce, call: Call) -> str:
    """The key of ``call``'s debounce group: one per task, or per value of ``rule.key``."""
    if rule.key is None:
        return f"debounce:{task.name}"
    value = limit_value(
        task.name, task.arguments.signature, rule.key, call.args, call.kwargs, "debounce key"
    )
    return f"debounce:{task.name}:{value}"
