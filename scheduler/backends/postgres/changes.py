"""Live changes by ``NOTIFY``: published changes go out on the schema's changes channel
(many to a notification, within PostgreSQL's 8000-byte payload), and each listener holds
a connection of its own that ``LISTEN``s on it. Nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import psycopg

from tickwork.scheduler.backends.postgres.store import PostgresStore
from tickwork.scheduler.backends.roles.changes import ChangeFeed, Changes
from tickwork.scheduler.backends.roles.records import Ledger
from tickwork.scheduler.errors import BackendUnavailable

#: the most bytes of changes one notification carries (PostgreSQL refuses 8000 and more)
_PAYLOAD_MOST = 7000


def changes_channel(schema: str) -> str:
    """The channel of ``schema``'s changes."""
    return f"tickwork_{schema}_changes"


def _payloads(changes: Sequence[bytes]) -> Iterator[str]:
    """``changes`` packed into payloads, one change a line (a change holds no newline)."""
    packed: list[str] = []
    size = 0
    for change in changes:
        text = change.decode()
        if packed and size + len(change) + 1 > _PAYLOAD_MOST:
            yield "\n".join(packed)
            packed, size = [], 0
        packed.append(text)
        size += len(change) + 1
    if packed:
        yield "\n".join(packed)


class PostgresChanges(Changes):
    """Publishes by ``pg_notify`` in one statement; listens on a connection of its own."""

    def __init__(self, store: PostgresStore, conninfo: str, ledger: Ledger) -> None:
        super().__init__(ledger)
        self._store = store
        self._conninfo = conninfo
        self._channel = changes_channel(store.schema)

    def publish(self, changes: Sequence[bytes]) -> None:
        if not changes:
            return
        payloads = list(_payloads(changes))
        sql = self._store.sql("SELECT pg_notify(%s, p) FROM unnest(%s::text[]) AS p")
        self._store.statement(lambda db: db.execute(sql, (self._channel, payloads)))

    def listen(self) -> ChangeFeed:
        return _NotifiedFeed(self._conninfo, self._channel)


class _NotifiedFeed(ChangeFeed):
    def __init__(self, conninfo: str, channel: str) -> None:
        try:
            self._db = psycopg.connect(conninfo, autocommit=True)
            self._db.execute(f'LISTEN "{channel}"')
        except psycopg.Error as err:
            raise BackendUnavailable(f"PostgreSQL: cannot listen for changes: {err}") from err

    def next(self, timeout_s: float) -> list[bytes]:
        found: list[bytes] = []
        try:
            for wait in (timeout_s, 0.0):  # the first change, then what else has come
                for note in self._db.notifies(timeout=wait, stop_after=None if wait == 0 else 1):
                    found.extend(line.encode() for line in note.payload.split("\n"))
                if not found:
                    break
        except psycopg.Error as err:
            raise BackendUnavailable(f"PostgreSQL: listening for changes failed: {err}") from err
        return found

    def close(self) -> None:
        self._db.close()
