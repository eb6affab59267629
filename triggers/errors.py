"""The root of tickwork's errors, at the bottom: ``triggers/`` imports nothing of ours and
``scheduler.errors`` builds its tree on ``TickworkError`` from here, so a bad trigger is a
``TickworkError`` like every other error tickwork raises on purpose."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import ValidationError


class TickworkError(Exception):
    """Root of every error tickwork raises on purpose."""


class InvalidTrigger(TickworkError, ValueError):
    """A trigger, calendar or time window given a value it cannot take; the message names
    the field and what it takes (``Cron: expr: ... the hour field '25' is out of range
    0-23``)."""


@contextmanager
def checked(model: str) -> Iterator[None]:
    """Build a trigger's model inside: pydantic's ``ValidationError`` comes out as an
    ``InvalidTrigger`` in tickwork's words (no pydantic type codes or URLs)."""
    try:
        yield
    except ValidationError as err:
        raise InvalidTrigger(described(model, err)) from None


def described(model: str, err: ValidationError) -> str:
    """``Model: field: what is wrong`` for each error of ``err``, joined by ``; ``."""
    parts = []
    for error in err.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            parts.append(f"{field}: not a field of {model} (a typo?)")
            continue
        text = str(error["msg"]).removeprefix("Value error, ")
        parts.append(text if not field or text.startswith(field) else f"{field}: {text}")
    return f"{model}: " + "; ".join(parts)
