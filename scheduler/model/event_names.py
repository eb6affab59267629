"""What an event is, and which names a subscription's pattern matches.

An event name is dot-separated segments (``order.created``, ``billing.invoice.paid``),
each of letters, digits, ``_``, ``-`` and ``:``. A pattern is a name whose segments may
also be ``*`` (exactly one segment: ``order.*`` matches ``order.created``, not
``order.line.added``) or ``**`` (any number of segments, none included: ``order.**``
matches ``order``, ``order.created`` and ``order.line.added``; ``**`` alone matches
every event), as AMQP's topic exchanges and NATS subjects do.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.errors import InvalidMessage

#: the longest event name (and pattern)
NAME_MOST = 200

#: the longest wait for an event (a ``wait_for`` step, a durable run's
#: ``wait_for_event``): a workflow that waits longer is a schedule
WAIT_MOST_S = 30 * 86_400.0

_SEGMENT = re.compile(r"[A-Za-z0-9_:\-]+")


class Event(BaseModel):
    """One emitted event, as a subscriber's handler receives it (annotate its parameter
    ``Event`` to get this model; unannotated, it is the same fields as a dict)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    key: str | None = None
    payload: Any = None
    emitted_at: datetime


def check_name(name: str) -> str:
    """``name`` if it is a valid event name; else ``InvalidMessage`` saying why."""
    _check(name, "event name", wildcards=False)
    return name


def check_pattern(pattern: str) -> str:
    """``pattern`` if it is a valid subscription pattern; else ``InvalidMessage``."""
    _check(pattern, "event pattern", wildcards=True)
    return pattern


def _check(text: str, what: str, wildcards: bool) -> None:
    if not isinstance(text, str) or not text:
        raise InvalidMessage(f"an {what} must be a non-empty string, not {text!r}")
    if len(text) > NAME_MOST:
        raise InvalidMessage(f"an {what} is at most {NAME_MOST} characters: {text[:40]!r}...")
    for segment in text.split("."):
        if wildcards and segment in ("*", "**"):
            continue
        if not _SEGMENT.fullmatch(segment):
            allowed = "letters, digits, _, - and :" + (" (or * and **)" if wildcards else "")
            raise InvalidMessage(
                f"bad {what} {text!r}: segment {segment!r} (dot-separated segments of {allowed})"
            )


def matches(pattern: str, name: str) -> bool:
    """Whether event ``name`` matches subscription ``pattern``."""
    return _match(tuple(pattern.split(".")), tuple(name.split(".")))


@lru_cache(maxsize=4096)
def _match(pattern: tuple[str, ...], name: tuple[str, ...]) -> bool:
    """Segment by segment; ``**`` tries every number of segments it could stand for."""
    if not pattern:
        return not name
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(rest, name[skip:]) for skip in range(len(name) + 1))
    if not name:
        return False
    return (head == "*" or head == name[0]) and _match(rest, name[1:])
