"""The PostgreSQL backend's operator roles: the poison queue, queues (statistics, pause,
bounds, purge) and abort requests."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.postgres import fairness
from tickwork.scheduler.backends.postgres.notify import announce_queues
from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.records import AbortRequest, Failure, QueueStats
from tickwork.scheduler.backends.roles import Aborts, PoisonStore, QueueAdmin
from tickwork.scheduler.backends.values import Envelope, PoisonRecord
from tickwork.scheduler.errors import ConfigurationError

_POISON_COLUMNS = (
    "id, queue, key, priority, timeout_ms, attempts, failed_ms, reason, error_type, error, "
    "traceback, body"
)


def _poison_record(row: tuple[Any, ...]) -> PoisonRecord:
    envelope = Envelope(row[0], row[1], row[2], row[3], row[6], row[4], row[11])
    return PoisonRecord(envelope, Failure(row[7], row[8], row[9], row[10]), row[5], row[6])


class PostgresPoison(PoisonStore):
    """The poison queue: reading, replaying, purging."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonRecord]:
        sql = f"SELECT {_POISON_COLUMNS} FROM tw.poison"
        params: builtins.list[object] = []
        if queue is not None:
            sql += " WHERE queue = %s"
            params.append(queue)
        params.append(limit)
        statement = self._store.sql(sql + " ORDER BY failed_ms, id LIMIT %s")
        rows = self._store.read(lambda db: db.execute(statement, params).fetchall())
        return [_poison_record(r) for r in rows]

    def get(self, message_id: str) -> PoisonRecord | None:
        statement = self._store.sql(f"SELECT {_POISON_COLUMNS} FROM tw.poison WHERE id = %s")
        row = self._store.read(lambda db: db.execute(statement, (message_id,)).fetchone())
        return None if row is None else _poison_record(row)

    def replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        sql = self._store.sql

        def work(db: Connection) -> int:
            now = self._store.now_ms()
            chosen = ids
            if chosen is None:
                where = " WHERE queue = %s" if queue else ""
                chosen = [
                    r[0]
                    for r in db.execute(
                        sql("SELECT id FROM tw.poison" + where), (queue,) if queue else ()
                    )
                ]
            moved: dict[str, int] = {}
            for message_id in chosen:
                inserted = db.execute(
                    sql(
                        "INSERT INTO tw.messages "
                        "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body) "
                        "SELECT id, queue, key, priority, 1, %s, %s, timeout_ms, body "
                        "FROM tw.poison WHERE id = %s ON CONFLICT DO NOTHING"
                    ),
                    (now, now, message_id),
                ).rowcount
                if inserted:
                    row = db.execute(
                        sql("DELETE FROM tw.poison WHERE id = %s RETURNING queue"), (message_id,)
                    ).fetchone()
                    assert row is not None
                    moved[row[0]] = moved.get(row[0], 0) + 1
            for name, count in sorted(moved.items()):
                self._store.add_pending(db, name, count)
            announce_queues(self._store, db, sorted(moved))
            return sum(moved.values())

        return self._store.write(work)

    def purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        sql = self._store.sql

        def work(db: Connection) -> int:
            if ids is not None:
                chosen = list(dict.fromkeys(ids))
                if queue is not None:
                    return db.execute(
                        sql("DELETE FROM tw.poison WHERE id = ANY(%s) AND queue = %s"),
                        (chosen, queue),
                    ).rowcount
                return db.execute(
                    sql("DELETE FROM tw.poison WHERE id = ANY(%s)"), (chosen,)
                ).rowcount
            if queue is None:
                return db.execute(sql("DELETE FROM tw.poison")).rowcount
            return db.execute(sql("DELETE FROM tw.poison WHERE queue = %s"), (queue,)).rowcount

        return self._store.write(work)


class PostgresQueues(QueueAdmin):
    """Counting, pausing, bounding and purging queues."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def names(self) -> list[str]:
        statement = self._store.sql(
            "SELECT DISTINCT queue FROM tw.messages UNION SELECT queue FROM tw.poison "
            "UNION SELECT queue FROM tw.counters UNION SELECT queue FROM tw.paused_queues "
            "UNION SELECT queue FROM tw.queue_bounds ORDER BY 1"
        )
        return [r[0] for r in self._store.read(lambda db: db.execute(statement).fetchall())]

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        sql = self._store.sql
        now = self._store.now_ms()

        def work(db: Connection) -> list[QueueStats]:
            paused = {r[0] for r in db.execute(sql("SELECT queue FROM tw.paused_queues"))}
            bounds = dict(
                db.execute(sql("SELECT queue, max_pending FROM tw.queue_bounds")).fetchall()
            )
            result = []
            for name in [queue] if queue is not None else self.names():
                row = db.execute(
                    sql(
                        "SELECT count(*) FILTER (WHERE state = 1 OR (state = 0 AND at_ms <= %s)), "
                        "count(*) FILTER (WHERE state = 0 AND at_ms > %s), "
                        "count(*) FILTER (WHERE state = 2), "
                        "min(at_ms) FILTER (WHERE state != 2) FROM tw.messages WHERE queue = %s"
                    ),
                    (now, now, name),
                ).fetchone()
                assert row is not None
                ready, scheduled, running, next_due = (
                    int(row[0]),
                    int(row[1]),
                    int(row[2]),
                    row[3],
                )
                poison_row = db.execute(
                    sql("SELECT count(*) FROM tw.poison WHERE queue = %s"), (name,)
                ).fetchone()
                counters = {
                    str(counter): int(value)
                    for counter, value in db.execute(
                        sql(
                            "SELECT name, sum(value) FROM tw.counters WHERE queue = %s "
                            "GROUP BY name"
                        ),
                        (name,),
                    )
                }
                result.append(
                    QueueStats(
                        name,
                        ready,
                        scheduled,
                        running,
                        0 if poison_row is None else int(poison_row[0]),
                        None if next_due is None else int(next_due),
                        counters,
                        {0: ready + scheduled + running},
                        name in paused,
                        None if name not in bounds else int(bounds[name]),
                    )
                )
            return result

        return self._store.read(work)

    def pause(self, queue: str) -> bool:
        statement = self._store.sql(
            "INSERT INTO tw.paused_queues (queue, since_ms) VALUES (%s, %s) ON CONFLICT DO NOTHING"
        )
        return bool(
            self._store.write(
                lambda db: db.execute(statement, (queue, self._store.now_ms())).rowcount
            )
            == 1
        )

    def resume(self, queue: str) -> bool:
        statement = self._store.sql("DELETE FROM tw.paused_queues WHERE queue = %s")
        return bool(self._store.write(lambda db: db.execute(statement, (queue,)).rowcount) == 1)

    def paused(self) -> list[str]:
        statement = self._store.sql("SELECT queue FROM tw.paused_queues ORDER BY queue")
        return [r[0] for r in self._store.read(lambda db: db.execute(statement).fetchall())]

    def set_bound(self, queue: str, max_pending: int | None) -> None:
        if max_pending is not None and max_pending < 1:
            raise ConfigurationError(f"max_pending must be at least 1, not {max_pending}")
        sql = self._store.sql

        def work(db: Connection) -> None:
            if max_pending is None:
                db.execute(sql("DELETE FROM tw.queue_bounds WHERE queue = %s"), (queue,))
                return
            db.execute(
                sql(
                    "INSERT INTO tw.queue_bounds (queue, max_pending, pending) VALUES "
                    "(%s, %s, (SELECT count(*) FROM tw.messages WHERE queue = %s)) "
                    "ON CONFLICT (queue) DO UPDATE SET max_pending = excluded.max_pending, "
                    "pending = excluded.pending"
                ),
                (queue, max_pending, queue),
            )

        self._store.write(work)

    def set_fair_weight(self, queue: str, fair: str, weight: int | None) -> None:
        self._store.write(lambda db: fairness.set_weight(self._store, db, queue, fair, weight))

    def fair_weights(self, queue: str) -> dict[str, int]:
        statement = self._store.sql(
            "SELECT fair, weight FROM tw.fair_weights WHERE queue = %s ORDER BY fair"
        )
        rows = self._store.read(lambda db: db.execute(statement, (queue,)).fetchall())
        return {str(row[0]): int(row[1]) for row in rows}

    def bounds(self) -> dict[str, int]:
        statement = self._store.sql("SELECT queue, max_pending FROM tw.queue_bounds ORDER BY queue")
        rows = self._store.read(lambda db: db.execute(statement).fetchall())
        return {str(row[0]): int(row[1]) for row in rows}

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        if any(deltas.values()):

            def work(db: Connection) -> None:
                for name, delta in sorted(deltas.items()):
                    self._store.count(db, queue, name, delta)

            self._store.write(work)

    def purge(self, queue: str) -> int:
        sql = self._store.sql

        def work(db: Connection) -> int:
            db.execute(sql("UPDATE tw.queue_bounds SET pending = 0 WHERE queue = %s"), (queue,))
            return db.execute(sql("DELETE FROM tw.messages WHERE queue = %s"), (queue,)).rowcount

        return self._store.write(work)


class PostgresAborts(Aborts):
    """Requests to abort running messages."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def request(self, request: AbortRequest) -> None:
        sql = self._store.sql

        def work(db: Connection) -> None:
            db.execute(
                sql("DELETE FROM tw.abort_requests WHERE expires_ms <= %s"), (self._store.now_ms(),)
            )
            db.execute(
                sql(
                    "INSERT INTO tw.abort_requests "
                    "(id, queue, continue_chain, requested_ms, expires_ms) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
                    "queue = excluded.queue, continue_chain = excluded.continue_chain, "
                    "requested_ms = excluded.requested_ms, expires_ms = excluded.expires_ms"
                ),
                (
                    request.message_id,
                    request.queue,
                    request.continue_chain,
                    request.requested_ms,
                    request.expires_ms,
                ),
            )

        self._store.write(work)

    def pending(self) -> list[AbortRequest]:
        statement = self._store.sql(
            "SELECT id, queue, continue_chain, requested_ms, expires_ms FROM tw.abort_requests "
            "WHERE expires_ms > %s ORDER BY id"
        )
        now = self._store.now_ms()
        rows = self._store.read(lambda db: db.execute(statement, (now,)).fetchall())
        return [AbortRequest(r[0], r[1], bool(r[2]), int(r[3]), int(r[4])) for r in rows]

    def clear(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        statement = self._store.sql("DELETE FROM tw.abort_requests WHERE id = ANY(%s)")
        return int(
            self._store.write(lambda db: db.execute(statement, (list(message_ids),)).rowcount)
        )
