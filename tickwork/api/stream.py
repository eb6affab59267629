"""``GET /api/v1/stream``: runs' changes as Server-Sent Events, as workers publish them
(``backend.changes``: at once on PostgreSQL and Redis, within half a second elsewhere).

Every stream of one process shares one feed of the backend (``ChangeHub``): a thread
reads it and hands each change to the streams whose filter (``run``, ``task``,
``queue``, ``key``) it matches, and says every few seconds that it listens (workers
publish only then: ``Changes.announce``). A stream first sends ``event: ready`` once it
hears changes (the first stream of a server, a second or so after it opened: the time
the workers take to see that someone listens), then ``event: run`` with each change as
JSON, and a comment every 15 s to keep proxies from closing it. A client that reads too
slowly loses the oldest changes beyond ``BACKLOG`` and is told how many with ``event:
lost``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tickwork.api.plumbing import query, refusal
from tickwork.api.security import Guard
from tickwork.scheduler.backends import Backend
from tickwork.scheduler.backends.roles.changes import ANNOUNCE_EVERY_S, ChangeFeed
from tickwork.scheduler.runs.changes import ChangeFilter, RunChange

log = logging.getLogger("tickwork.api")

#: changes a stream holds for a client that reads slowly; beyond, the oldest are lost
BACKLOG = 10_000
#: seconds between two keep-alive comments of a quiet stream
KEEP_ALIVE_S = 15.0
#: seconds a stream waits for the feed to listen before it says ready anyway
READY_S = 10.0
#: seconds from a server's first word that it listens to its streams' ``ready``: every
#: worker looks twice a second whether someone listens, and publishes only then
READY_AFTER_S = 1.25


@dataclass
class _Subscriber:
    wanted: ChangeFilter
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[RunChange] = field(default_factory=lambda: asyncio.Queue(BACKLOG))
    lost: int = 0

    def offer(self, changes: list[RunChange]) -> None:
        """On the subscriber's loop: queue ``changes``, dropping the oldest when full."""
        for change in changes:
            if self.queue.full():
                self.queue.get_nowait()
                self.lost += 1
            self.queue.put_nowait(change)


class ChangeHub:
    """One feed of ``backend``'s changes for every stream of this process, read by a
    thread that runs while some stream listens."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._subscribers: dict[int, _Subscriber] = {}
        self._next = 0
        self._running = False
        self._name = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.listening = threading.Event()

    def subscribe(self, wanted: ChangeFilter, loop: asyncio.AbstractEventLoop) -> int:
        """A new subscriber's token; its changes go to ``queue_of(token)``."""
        with self._lock:
            token = self._next
            self._next += 1
            self._subscribers[token] = _Subscriber(wanted, loop)
            if not self._running:
                self._running = True
                self.listening.clear()
                threading.Thread(target=self._run, name="tickwork-changes", daemon=True).start()
        return token

    def subscriber(self, token: int) -> _Subscriber:
        return self._subscribers[token]

    def unsubscribe(self, token: int) -> None:
        with self._lock:
            self._subscribers.pop(token, None)

    def _run(self) -> None:
        feed: ChangeFeed | None = None
        pause_s = 0.1
        announced = 0.0
        ready_at: float | None = None  # when the workers have all seen the first announce
        try:
            while True:
                with self._lock:
                    if not self._subscribers:
                        self._running = False
                        return
                try:
                    if time.monotonic() - announced >= ANNOUNCE_EVERY_S:
                        self._backend.changes.announce(self._name)
                        announced = time.monotonic()
                        ready_at = ready_at or announced + READY_AFTER_S
                    if feed is None:
                        feed = self._backend.changes.listen()
                        pause_s = 0.1
                    if ready_at is not None and time.monotonic() >= ready_at:
                        self.listening.set()
                    batch = feed.next(0.25)
                except Exception as err:
                    # a backend error, or a client library's own once its connection was
                    # closed under the feed: listen again, after a pause that grows
                    log.warning("listening for changes failed (%r); trying again", err)
                    _close(feed)
                    feed = None
                    time.sleep(pause_s)
                    pause_s = min(pause_s * 2, 5.0)
                    continue
                with self._lock:  # those of now: one that came during the wait hears it
                    subscribers = list(self._subscribers.values())
                self._hand_on(batch, subscribers)
        finally:
            _close(feed)

    @staticmethod
    def _hand_on(batch: list[bytes], subscribers: list[_Subscriber]) -> None:
        changes = []
        for raw in batch:
            try:
                changes.append(RunChange.decode(raw))
            except (ValueError, TypeError):
                continue  # not a change of this version's shape
        for subscriber in subscribers:  # one call into each stream's loop a batch
            wanted = [change for change in changes if subscriber.wanted.matches(change)]
            if wanted:
                subscriber.loop.call_soon_threadsafe(subscriber.offer, wanted)


def _close(feed: ChangeFeed | None) -> None:
    """Close ``feed``, which may have failed already (what it says then is moot)."""
    if feed is not None:
        with contextlib.suppress(Exception):
            feed.close()


def stream_endpoint(hub: ChangeHub, guard: Guard) -> Callable[[Request], Awaitable[Response]]:
    """The endpoint serving ``hub``'s changes to whoever may read the API."""

    async def stream(request: Request) -> Response:
        if (refused := refusal(guard, request)) is not None:
            return refused
        wanted = ChangeFilter(
            run=query(request, "run"),
            task=query(request, "task"),
            queue=query(request, "queue"),
            key=query(request, "key"),
            name=query(request, "name"),
        )
        token = hub.subscribe(wanted, asyncio.get_running_loop())
        return StreamingResponse(
            _events(hub, token),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return stream


async def _events(hub: ChangeHub, token: int) -> AsyncIterator[str]:
    try:
        subscriber = hub.subscriber(token)
        await run_in_threadpool(hub.listening.wait, READY_S)
        yield "retry: 1000\nevent: ready\ndata: {}\n\n"
        while True:
            try:
                change = await asyncio.wait_for(subscriber.queue.get(), KEEP_ALIVE_S)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if subscriber.lost:
                yield f'event: lost\ndata: {{"count": {subscriber.lost}}}\n\n'
                subscriber.lost = 0
            yield f"event: run\ndata: {change.encode().decode()}\n\n"
    finally:
        hub.unsubscribe(token)
