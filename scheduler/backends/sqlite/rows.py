"""Rows written below the interface: a claimed row whose columns do not hold what the
schema declares (SQLite stores any type in any column) becomes a claim the worker
poisons, with what is wrong, instead of an error that stops the claim loop."""

from __future__ import annotations

from typing import Any

from tickwork.scheduler.backends.base import Claim

#: a claimed row's columns, in ``RETURNING`` order, then whether SQLite found them sound
RETURNED = "id, key, body, attempt, due_ms, at_ms, timeout_ms, priority, turn"

#: true when every column holds its declared type (checked in SQL: one flag per row)
SOUND = (
    "typeof(key) IN ('text', 'null') AND typeof(body) = 'blob' AND "
    "typeof(attempt) = 'integer' AND typeof(due_ms) = 'integer' AND "
    "typeof(timeout_ms) = 'integer' AND timeout_ms > 0 AND typeof(priority) = 'integer'"
)

#: a lease's deadline: its due time (or now) plus its timeout, or a minute from now for a
#: row whose times are not numbers (it is poisoned on delivery)
DEADLINE = f"CASE WHEN {SOUND} THEN MAX(?, due_ms) + timeout_ms ELSE ? + 60000 END"

#: the lease a malformed row gets in its claim
FALLBACK_TIMEOUT_MS = 60_000


def order(row: tuple[Any, ...]) -> tuple[int, int]:
    """Claim order of a returned row: priority first, then its turn (a message with a
    fair-share key) or due time (0 for a column that is not a number)."""
    priority, due_ms, turn = row[7], row[4], row[8]
    place = turn if type(turn) is int else due_ms if type(due_ms) is int else 0
    return (-priority if type(priority) is int else 0, place)


def claim_of(row: tuple[Any, ...], queue: str, token: str) -> Claim:
    """The claim of a returned row (``RETURNED`` then the ``SOUND`` flag)."""
    message_id, key, body, attempt, due_ms, deadline, timeout_ms, _, _, sound = row
    if sound:
        return Claim(message_id, queue, key, body, token, attempt, due_ms, deadline, timeout_ms)
    return _malformed(row, queue, token)


def _malformed(row: tuple[Any, ...], queue: str, token: str) -> Claim:
    message_id, key, body, attempt, due_ms, deadline, timeout_ms, priority, _, _ = row
    wrong = [
        f"{name} holds {value!r}"
        for name, value, fits in (
            ("key", key, key is None or isinstance(key, str)),
            ("attempt", attempt, type(attempt) is int),
            ("due_ms", due_ms, type(due_ms) is int),
            ("timeout_ms", timeout_ms, type(timeout_ms) is int and timeout_ms > 0),
            ("priority", priority, type(priority) is int),
        )
        if not fits
    ]
    if isinstance(body, str):  # TEXT where a BLOB belongs: the same bytes, decoded as usual
        body = body.encode()
    elif not isinstance(body, bytes):
        wrong.append(f"body holds {body!r}")
        body = repr(body).encode()
    return Claim(
        message_id,
        queue,
        key if isinstance(key, str) else None,
        body,
        token,
        attempt if type(attempt) is int else 1,
        due_ms if type(due_ms) is int else 0,
        deadline,
        timeout_ms if type(timeout_ms) is int and timeout_ms > 0 else FALLBACK_TIMEOUT_MS,
        "malformed row: " + "; ".join(wrong) if wrong else None,
    )
