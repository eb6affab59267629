"""Weighted turns of fair share, the same on every backend that gives turns in Python
(SQLite, PostgreSQL; Redis gives them the same way in ``lua/prelude.lua``'s
``fair_line``): a key of weight ``w`` takes ``w`` messages per turn."""

from __future__ import annotations

#: the largest weight a fair-share key may have
MAX_WEIGHT = 1000


def next_turn(base: int, previous: int | None, shared: int, weight: int) -> tuple[int, int]:
    """A key's next turn, and how many of its messages hold it then: its last turn again
    while fewer than ``weight`` hold that one (and the line has not passed it), else the
    turn after it, never before ``base`` (the head of the line, or the message's due time
    when nothing fair waits)."""
    if previous is None or previous < base:
        return base, 1
    if shared < weight:
        return previous, shared + 1
    return previous + 1, 1
