"""Wake-ups by ``LISTEN/NOTIFY``: a write that makes messages due now (or within
``SOON_MS``) sends the queue's name on the schema's channel in its own transaction, so
the notification is delivered when, and only if, it commits; a worker's listener thread
nudges its consumer, which claims at once instead of waiting out its poll interval.

Polling stays the fallback: a listener that loses its connection reconnects (with
backoff) and then wakes every queue it watches, since notifications sent meanwhile are
lost."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence

import psycopg

from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.values import Envelope

log = logging.getLogger("tickwork.postgres")

#: messages due this soon are announced (a worker's claim looks this far ahead or more)
SOON_MS = 1000
#: how often the listener looks whether it was asked to stop (seconds)
_STOP_CHECK_S = 0.5


def channel(schema: str) -> str:
    """The channel of ``schema``'s queues."""
    return f"tickwork_{schema}"


def announce(store: PostgresStore, db: Connection, envelopes: Iterable[Envelope], now: int) -> None:
    """Inside a write: notify the queues of ``envelopes`` due by now + ``SOON_MS``."""
    queues = sorted({e.queue for e in envelopes if e.due_ms <= now + SOON_MS})
    announce_queues(store, db, queues)


def announce_queues(store: PostgresStore, db: Connection, queues: Sequence[str]) -> None:
    """Inside a write: notify ``queues`` (delivered at commit; repeats are merged)."""
    if queues:
        db.execute(
            "SELECT pg_notify(%s, q) FROM unnest(%b::text[]) AS q",
            (channel(store.schema), list(queues)),
        )


class Listener:
    """A thread holding its own connection that calls ``wake(queue)`` for each
    notification of one of ``queues``."""

    def __init__(
        self, conninfo: str, schema: str, queues: Sequence[str], wake: Callable[[str], None]
    ) -> None:
        self._conninfo = conninfo
        self._channel = channel(schema)
        self._queues = frozenset(queues)
        self._wake = wake
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="tickwork-postgres-listen", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop listening (within about half a second)."""
        self._stopping.set()
        self._thread.join(5)

    def _run(self) -> None:
        pause_s = 0.1
        first = True
        while not self._stopping.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as db:
                    db.execute(f'LISTEN "{self._channel}"')
                    pause_s = 0.1
                    if not first:  # what was sent while we were away is lost: look anyway
                        for queue in self._queues:
                            self._wake(queue)
                    first = False
                    while not self._stopping.is_set():
                        for note in db.notifies(timeout=_STOP_CHECK_S):
                            if note.payload in self._queues:
                                self._wake(note.payload)
            except psycopg.Error as err:
                log.warning("listening for new messages failed (%s); polling meanwhile", err)
                first = False
                self._stopping.wait(pause_s)
                pause_s = min(pause_s * 2, 5.0)
