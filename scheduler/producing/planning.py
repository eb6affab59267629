"""A call before it becomes a message: its scalar options checked (``check_scalars``), its
first fire planned from its time or trigger (``plan``) and its expiry (``expiry_ms``);
and a schedule's upcoming fires (``upcoming``, for preview). Pure: no backend, no clock
of its own."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.limits import RateLimit
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.names import check_key, check_queue
from tickwork.scheduler.model.tasks import Call
from tickwork.triggers import Cron, Overlap, Repeating, Specs, Trigger
from tickwork.triggers.base import Fire, require_aware
from tickwork.triggers.preview import Occurrence, preview


def check_scalars(call: Call, queue: str) -> None:
    """Raise ``InvalidMessage`` for a queue, key, priority or headers of the wrong shape."""
    check_queue(queue)
    if call.key is not None:
        check_key(call.key)
    if call.priority is not None and (
        not isinstance(call.priority, int)
        or isinstance(call.priority, bool)
        or not -1000 <= call.priority <= 1000
    ):
        raise InvalidMessage(
            f"priority must be an integer from -1000 to 1000, not {call.priority!r}"
        )
    if call.headers is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in call.headers.items()
    ):
        raise InvalidMessage("headers must map strings to strings")


def check_cost(cost: int | None, task_name: str, rate: RateLimit | None) -> int:
    """The units a call's start counts (``cost=``, 1 when not given); raises
    ``InvalidMessage`` for one its task's rate limit cannot count."""
    if cost is None:
        return 1
    if rate is None:
        raise InvalidMessage(
            f"cost={cost!r}: task {task_name!r} has no rate_limit or throttle to count it against"
        )
    if isinstance(cost, bool) or not isinstance(cost, int) or not 1 <= cost <= rate.count:
        raise InvalidMessage(
            f"cost must be an integer from 1 to {rate.count} (the rate limit of task "
            f"{task_name!r} per period), not {cost!r}"
        )
    return cost


def plan(call: Call, now: datetime) -> tuple[Repeating | Cron | Specs | None, Fire, float]:
    """(trigger to store with the message, first fire, jitter in seconds) for ``call``."""
    if (call.at is not None) + (call.delay_by is not None) + (call.trigger is not None) > 1:
        raise InvalidMessage("give at most one of at=, delay= and trigger=")
    try:
        if call.trigger is None:
            if call.at is not None:
                return None, Fire(require_aware(call.at, "at"), 0), 0.0
            if call.delay_by is not None:
                delay = _delay(call.delay_by)
                if delay < timedelta(0):
                    raise ValueError("delay must not be negative")
                return None, Fire(now + delay, 0), 0.0
            return None, Fire(now, 0), 0.0
        anchored = call.trigger.anchored(now)
    except ValueError as err:
        raise InvalidMessage(str(err)) from err
    fire = anchored.first(now)
    if fire is None:
        raise InvalidMessage(f"trigger {anchored!r} never fires after {now.isoformat()}")
    stored = anchored if isinstance(anchored, Repeating | Cron | Specs) else None  # a schedule
    return stored, fire, anchored.jitter.total_seconds()


def _delay(value: object) -> timedelta:
    """``delay=`` as a ``timedelta``: one, or a number of seconds (as ``countdown``)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return timedelta(seconds=value)
    raise InvalidMessage(f"delay must be a timedelta or a number of seconds, not {value!r}")


def expiry_ms(
    call: Call, default: timedelta | None, scheduled_at: datetime, recurring: bool
) -> int | None:
    """How long after its time a message may still start (ms), from the call's
    ``expires`` or the task's; ``InvalidMessage`` for one that would expire at once."""
    expires = call.expires if call.expires is not None else default
    if expires is None:
        return None
    if isinstance(expires, datetime):
        if recurring:
            raise InvalidMessage(
                "a recurring message expires a while after each occurrence: give expires "
                "as a timedelta, not a datetime"
            )
        if expires.tzinfo is None:
            raise InvalidMessage("expires must be an aware datetime (with a timezone)")
        expires = expires - scheduled_at
    if not isinstance(expires, timedelta):
        raise InvalidMessage(f"expires is a timedelta or a datetime, not {expires!r}")
    after_ms = expires // timedelta(milliseconds=1)
    if after_ms <= 0:
        raise InvalidMessage(f"the message would expire before its time ({expires})")
    return after_ms


def check_overlap(call: Call, task: str, limited: bool) -> None:
    """Refuse an overlap policy ``call``'s trigger cannot have: a chain runs whole
    occurrences one after another (``serial`` only), and the runs of the policies that
    go one at a time hold a concurrency limit of their schedule's own, so a task
    (``limited``) with one of its own keeps ``serial`` or ``allow``."""
    trigger = call.trigger
    if trigger is None or trigger.overlap is Overlap.SERIAL:
        return
    policy = str(trigger.overlap)
    if call.then:
        raise InvalidMessage(
            "a chain with a trigger runs whole occurrences one after another: "
            f"overlap={policy!r} is for a single task (give the chain overlap='serial')"
        )
    if limited and trigger.overlap is not Overlap.ALLOW:
        raise InvalidMessage(
            f"{task} has a concurrency limit, and overlap={policy!r} runs the schedule's "
            "runs under a limit of its own (one at a time): give the schedule "
            "overlap='serial' or 'allow'"
        )


def upcoming(
    message: Message, count: int, shared: Callable[[Trigger], Trigger] | None = None
) -> list[Occurrence]:
    """The next ``count`` fire times of the chain ``message`` belongs to, starting with
    ``message`` itself (its scheduled time), numbered along the chain; ``shared``
    attaches the trigger's named calendar."""
    if message.trigger is None:
        return []
    stored = message.trigger if shared is None else shared(message.trigger)
    trigger = stored.with_misfires(message.misfires)
    fires = preview(trigger, count, message.scheduled_at - timedelta(microseconds=1))
    if isinstance(message.trigger, Cron | Specs):  # they count from the preview's start
        fires = [o._replace(occurrence=message.occurrence + i) for i, o in enumerate(fires)]
    return fires
