"""The rules names follow, checked where they enter (Python, the command line and the API
all pass through here), each refused with one ``InvalidMessage`` that says the rule:

- a queue name: 1 to ``MAX_QUEUE`` characters, no whitespace and no control characters
  (it is typed back on the command line and shown in URLs);
- a key: 1 to ``MAX_KEY`` characters, any text but control characters;
- a task name (``@app.task(name=...)``) and a calendar's name: the queue's rule.

Event names have rules of their own (``event_names.py``)."""

from __future__ import annotations

import re

from tickwork.scheduler.errors import InvalidMessage

MAX_QUEUE = 200
MAX_KEY = 1024

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_BLANK_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
#: queue names seen valid: a producer names a few queues, each checked once
_GOOD_QUEUES: set[str] = set()


def check_queue(name: object, what: str = "a queue name") -> str:
    """``name`` if it is a valid queue name (or task or calendar name: ``what``)."""
    if type(name) is str and name in _GOOD_QUEUES:
        return name
    checked = _check(name, what, MAX_QUEUE, _BLANK_OR_CONTROL, "whitespace or control characters")
    if what == "a queue name" and len(_GOOD_QUEUES) < 10_000:
        _GOOD_QUEUES.add(checked)
    return checked


def check_key(key: object) -> str:
    """``key`` if it is a valid key."""
    return _check(key, "a key", MAX_KEY, _CONTROL, "control characters")


def _check(value: object, what: str, longest: int, forbidden: re.Pattern[str], has_no: str) -> str:
    """``value`` if it is a string of 1 to ``longest`` characters, none ``forbidden``."""
    if not isinstance(value, str) or not value:
        raise InvalidMessage(f"{what} is a non-empty string, not {value!r}")
    if len(value) > longest:
        raise InvalidMessage(f"{what} has at most {longest} characters, not {len(value)}")
    if forbidden.search(value):
        raise InvalidMessage(f"{what} has no {has_no}: {value!r}")
    return value
