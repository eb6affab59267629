"""An occurrence as planned (``Fire``), and the time helpers every trigger uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class Fire(NamedTuple):
    """One planned occurrence: when it is due, its number, and how many runs it replaced."""

    at: datetime
    occurrence: int
    misfires: int = 0


def require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC, or raise if it is naive (a naive time is ambiguous)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (got naive {value.isoformat()})")
    return value.astimezone(UTC)


def format_duration(value: timedelta) -> str:
    """``timedelta(hours=1, minutes=30)`` as ``1h30m``; sub-second parts as ``ms``."""
    total_ms = int(value / timedelta(milliseconds=1))
    if total_ms == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        count, total_ms = divmod(total_ms, size)
        if count:
            parts.append(f"{count}{unit}")
    if total_ms:
        parts.append(f"{total_ms}ms")
    return "".join(parts)


def known_zone(name: str) -> str:
    """``name`` if it is an IANA timezone this machine knows; else ``ValueError``."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"unknown timezone {name!r}") from err
    return name
