"""Watching a run (``TaskHandle.watch``, ``awatch``): its state read at an interval, each
read that differs from the one before handed on, until the run ended. Polling works the
same on every backend; a change shows within one interval of its write."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

#: what is watched: a run's ``TaskInfo``
TaskInfo = TypeVar("TaskInfo")

#: seconds between two reads of a watched run, unless told
WATCH_EVERY_S = 0.25


def changes(
    read: Callable[[], TaskInfo],
    every_s: float,
    timeout: float | None,
    ended: Callable[[TaskInfo], bool],
    late: Callable[[], Exception],
) -> Iterator[TaskInfo]:
    """Each new state ``read`` gives (the first one, then each that differs), the last
    one ``ended``; ``late()`` raised once ``timeout`` seconds passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last: TaskInfo | None = None
    while True:
        info = read()
        if info != last:
            yield info
            last = info
        if ended(info):
            return
        time.sleep(_pause(every_s, deadline, late))


async def achanges(
    read: Callable[[], TaskInfo],
    every_s: float,
    timeout: float | None,
    ended: Callable[[TaskInfo], bool],
    late: Callable[[], Exception],
) -> AsyncIterator[TaskInfo]:
    """``changes`` in an event loop: each read in a thread, each wait ``asyncio.sleep``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last: TaskInfo | None = None
    while True:
        info = await asyncio.to_thread(read)
        if info != last:
            yield info
            last = info
        if ended(info):
            return
        await asyncio.sleep(_pause(every_s, deadline, late))


def _pause(every_s: float, deadline: float | None, late: Callable[[], Exception]) -> float:
    if deadline is None:
        return every_s
    left = deadline - time.monotonic()
    if left <= 0:
        raise late()
    return min(every_s, left)
