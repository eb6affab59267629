"""The PostgreSQL backend's side records: results of runs, the worker registry and the
batches' fan-in counts. Each record carries when it expires: reads skip expired ones,
and a write deletes them at most once a second per table."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.records import BatchRecord, MemberOutcome
from tickwork.scheduler.backends.roles import Batches, Registry, Results


class PostgresResults(Results):
    """Result records of messages, one row per message id."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def put(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        if not results:
            return
        latest = {message_id: (body, ttl_ms) for message_id, body, ttl_ms in results}

        def work(db: Connection) -> None:
            now = self._store.now_ms()
            self._store.prune(db, "results", "expires_ms", now)
            db.execute(
                self._store.sql(
                    "INSERT INTO tw.results (id, body, expires_ms) "
                    "SELECT * FROM unnest(%b::text[], %b::bytea[], %b::bigint[]) "
                    "ON CONFLICT (id) DO UPDATE SET body = excluded.body, "
                    "expires_ms = excluded.expires_ms"
                ),
                (
                    list(latest),
                    [body for body, _ in latest.values()],
                    [now + ttl_ms for _, ttl_ms in latest.values()],
                ),
            )

        self._store.write(work)

    def get(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        if not message_ids:
            return {}
        statement = self._store.sql(
            "SELECT id, body FROM tw.results WHERE id = ANY(%s) AND expires_ms > %s"
        )
        params = (list(message_ids), self._store.now_ms())
        rows = self._store.read(lambda db: db.execute(statement, params).fetchall())
        return {str(row[0]): bytes(row[1]) for row in rows}


class PostgresRegistry(Registry):
    """Records of live workers, one row each, refreshed by their heartbeats."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def put(self, worker_id: str, record: bytes, ttl_ms: int) -> None:
        def work(db: Connection) -> None:
            now = self._store.now_ms()
            self._store.prune(db, "workers", "expires_ms", now)
            db.execute(
                self._store.sql(
                    "INSERT INTO tw.workers (id, body, expires_ms) VALUES (%s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET body = excluded.body, "
                    "expires_ms = excluded.expires_ms"
                ),
                (worker_id, record, now + ttl_ms),
            )

        self._store.write(work)

    def delete(self, worker_id: str) -> None:
        statement = self._store.sql("DELETE FROM tw.workers WHERE id = %s")
        self._store.write(lambda db: db.execute(statement, (worker_id,)))

    def records(self) -> dict[str, bytes]:
        statement = self._store.sql(
            "SELECT id, body FROM tw.workers WHERE expires_ms > %s ORDER BY id"
        )
        now = self._store.now_ms()
        rows = self._store.read(lambda db: db.execute(statement, (now,)).fetchall())
        return {str(row[0]): bytes(row[1]) for row in rows}


class PostgresBatches(Batches):
    """Descriptions, counts and member outcomes of batches: a member's outcome and the
    count it adds are one transaction, and only when the member's row is new, so a
    redelivered run never counts twice; the batch's row lock orders concurrent settles."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def open(self, batch_id: str, description: bytes, expires_ms: int) -> None:
        def work(db: Connection) -> None:
            self._store.prune(db, "batches", "expires_ms", self._store.now_ms())
            db.execute(
                self._store.sql(
                    "INSERT INTO tw.batches (id, description, settled, failed, expires_ms) "
                    "VALUES (%s, %s, 0, 0, %s) ON CONFLICT (id) DO UPDATE SET "
                    "description = excluded.description, expires_ms = excluded.expires_ms"
                ),
                (batch_id, description, expires_ms),
            )

        self._store.write(work)

    def settle(self, outcomes: Sequence[MemberOutcome]) -> list[tuple[int, int]]:
        if not outcomes:
            return []
        sql = self._store.sql

        def work(db: Connection) -> list[tuple[int, int]]:
            self._store.prune(db, "batch_members", "expires_ms", self._store.now_ms())
            counts = []
            for o in outcomes:
                added = db.execute(
                    sql(
                        "INSERT INTO tw.batch_members (batch, member, failed, outcome, expires_ms) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
                    ),
                    (o.batch, o.member, o.failed, o.outcome, o.expires_ms),
                ).rowcount
                row = db.execute(
                    sql(
                        "INSERT INTO tw.batches (id, description, settled, failed, expires_ms) "
                        "VALUES (%s, NULL, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                        "settled = batches.settled + excluded.settled, "
                        "failed = batches.failed + excluded.failed RETURNING settled, failed"
                    ),
                    (o.batch, added, added * int(o.failed), o.expires_ms),
                ).fetchone()
                assert row is not None
                counts.append((int(row[0]), int(row[1])))
            return counts

        return self._store.write(work)

    def read(self, batch_id: str, outcomes: bool = True) -> BatchRecord | None:
        sql = self._store.sql
        now = self._store.now_ms()

        def work(db: Connection) -> BatchRecord | None:
            row = db.execute(
                sql(
                    "SELECT description, settled, failed FROM tw.batches "
                    "WHERE id = %s AND expires_ms > %s"
                ),
                (batch_id, now),
            ).fetchone()
            if row is None:
                return None
            found: dict[int, bytes] = {}
            if outcomes:
                rows = db.execute(
                    sql(
                        "SELECT member, outcome FROM tw.batch_members "
                        "WHERE batch = %s AND expires_ms > %s"
                    ),
                    (batch_id, now),
                )
                found = {int(member): bytes(outcome) for member, outcome in rows}
            description = None if row[0] is None else bytes(row[0])
            return BatchRecord(description, int(row[1]), int(row[2]), found)

        return self._store.read(work)
