"""The PostgreSQL backend's occurrence ledger: a row per record in ``ledger``, numbered in
write order per table (``seq``), clustered by (queue, subject, seq). Appending trims each
subject to its newest ``keep`` records in the same statement's transaction; expired rows
are skipped by reads and deleted by a sweep once a minute."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.roles import Ledger

_SWEEP_EVERY_MS = 60_000


def append_in(
    store: PostgresStore, db: Connection, entries: Iterable[LedgerEntry], now: int
) -> None:
    """Inside a write: append each entry's records and trim its subject to ``keep``."""
    queues, subjects, records, expires = [], [], [], []
    trims: dict[tuple[str, str], int] = {}
    for queue, subject, logged, keep, ttl_ms in entries:
        for record in logged:
            queues.append(queue)
            subjects.append(subject)
            records.append(record)
            expires.append(now + ttl_ms)
        if logged:
            trims[(queue, subject)] = keep
    if not records:
        return
    db.execute(
        store.sql(
            "INSERT INTO tw.ledger (queue, subject, record, expires_ms) "
            "SELECT q, s, r, e FROM unnest(%b::text[], %b::text[], %b::bytea[], %b::bigint[]) "
            "WITH ORDINALITY AS u(q, s, r, e, i) ORDER BY i"
        ),
        (queues, subjects, records, expires),
    )
    ordered = sorted(trims.items())
    db.execute(
        store.sql(
            "DELETE FROM tw.ledger AS l USING unnest(%b::text[], %b::text[], %b::int[]) "
            "AS t(q, s, k) WHERE l.queue = t.q AND l.subject = t.s AND l.seq <= ("
            "SELECT x.seq FROM tw.ledger AS x WHERE x.queue = t.q AND x.subject = t.s "
            "ORDER BY x.seq DESC OFFSET t.k LIMIT 1)"
        ),
        (
            [queue for (queue, _), _ in ordered],
            [subject for (_, subject), _ in ordered],
            [keep for _, keep in ordered],
        ),
    )
    store.prune(db, "ledger", "expires_ms", now, every_ms=_SWEEP_EVERY_MS)


class PostgresLedger(Ledger):
    """The ledger operations of the contract."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def append(self, entries: Sequence[LedgerEntry]) -> None:
        if entries:
            self._store.write(lambda db: append_in(self._store, db, entries, self._store.now_ms()))

    def read(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        return self.read_many([(queue, subject)], limit)[0]

    def read_many(self, subjects: Sequence[tuple[str, str]], limit: int = 100) -> list[list[bytes]]:
        """Every subject's newest records in one statement."""
        found: list[list[bytes]] = [[] for _ in subjects]
        if not subjects:
            return found
        sql = self._store.sql(
            "SELECT t.i, l.record FROM unnest(%b::text[], %b::text[]) WITH ORDINALITY "
            "AS t(q, s, i) CROSS JOIN LATERAL (SELECT x.record, x.seq FROM tw.ledger AS x "
            "WHERE x.queue = t.q AND x.subject = t.s AND x.expires_ms > %s "
            "ORDER BY x.seq DESC LIMIT %s) AS l ORDER BY t.i, l.seq DESC"
        )
        params = ([q for q, _ in subjects], [s for _, s in subjects], self._store.now_ms(), limit)
        for index, record in self._store.read(lambda db: db.execute(sql, params).fetchall()):
            found[index - 1].append(record)
        return found
