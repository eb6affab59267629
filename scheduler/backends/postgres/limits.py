"""The PostgreSQL backend's concurrency limits: slots with leases (``limit_slots``) and
the messages waiting for one (``limit_waiters``, in line by ``place``). Each step on a
limit holds that limit's transaction-level advisory lock, taken in name order, so the
count and the take are one atomic step across every worker while different limits never
wait for each other."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tickwork.scheduler.backends.postgres.notify import announce_queues
from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.records import SlotRequest, Waiter
from tickwork.scheduler.backends.roles import Limits
from tickwork.scheduler.backends.states import LEASED, READY


def lock_limits(db: Connection, names: Iterable[str]) -> None:
    """Take the advisory lock of each limit (in name order: no two writers deadlock)."""
    for name in sorted(set(names)):
        db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 13))", (f"limit:{name}",))


def release_in(
    store: PostgresStore, db: Connection, held: Sequence[tuple[str, str]]
) -> list[Waiter]:
    """Inside a write: give back the slots ``held`` and take the longest waiter of each
    limit whose slot was held off its line."""
    lock_limits(db, (limit for limit, _ in held))
    woken: list[Waiter] = []
    for limit, message_id in held:
        freed = db.execute(
            store.sql("DELETE FROM tw.limit_slots WHERE name = %s AND holder = %s"),
            (limit, message_id),
        ).rowcount
        if not freed:
            continue
        row = db.execute(
            store.sql(
                "DELETE FROM tw.limit_waiters WHERE place = (SELECT place FROM tw.limit_waiters "
                "WHERE name = %s ORDER BY place LIMIT 1) RETURNING queue, key, message_id"
            ),
            (limit,),
        ).fetchone()
        if row is not None:
            woken.append(Waiter(limit, row[0], row[1], row[2]))
    return woken


class PostgresLimits(Limits):
    """Slots and waiters of concurrency limits."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def acquire(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        if not requests:
            return []

        def work(db: Connection) -> list[int | None]:
            lock_limits(db, (r.limit for r in requests))
            now = self._store.now_ms()
            return [self._acquire(db, request, now) for request in requests]

        return self._store.write(work)

    def _acquire(self, db: Connection, request: SlotRequest, now: int) -> int | None:
        sql = self._store.sql
        db.execute(
            sql("DELETE FROM tw.limit_slots WHERE name = %s AND expires_ms <= %s"),
            (request.limit, now),
        )
        expires = now + request.lease_ms
        renewed = db.execute(
            sql("UPDATE tw.limit_slots SET expires_ms = %s WHERE name = %s AND holder = %s"),
            (expires, request.limit, request.message_id),
        ).rowcount
        if renewed:
            return None
        row = db.execute(
            sql("SELECT count(*), min(expires_ms) FROM tw.limit_slots WHERE name = %s"),
            (request.limit,),
        ).fetchone()
        assert row is not None
        if row[0] >= request.capacity:
            return int(row[1])
        db.execute(
            sql("INSERT INTO tw.limit_slots (name, holder, expires_ms) VALUES (%s, %s, %s)"),
            (request.limit, request.message_id, expires),
        )
        db.execute(
            sql("DELETE FROM tw.limit_waiters WHERE name = %s AND message_id = %s"),
            (request.limit, request.message_id),
        )
        return None

    def wait(self, request: SlotRequest) -> bool:
        def work(db: Connection) -> bool:
            lock_limits(db, [request.limit])
            db.execute(
                self._store.sql(
                    "INSERT INTO tw.limit_waiters (name, message_id, queue, key) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (name, message_id) DO NOTHING"
                ),
                (request.limit, request.message_id, request.queue, request.key),
            )
            row = db.execute(
                self._store.sql(
                    "SELECT count(*) FROM tw.limit_slots WHERE name = %s AND expires_ms > %s"
                ),
                (request.limit, self._store.now_ms()),
            ).fetchone()
            return row is not None and int(row[0]) < request.capacity

        return self._store.write(work)

    def release(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        if not held:
            return []
        return self._store.write(lambda db: release_in(self._store, db, held))

    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        def work(db: Connection) -> list[Waiter]:
            lock_limits(db, [limit])
            rows = db.execute(
                self._store.sql(
                    "WITH first AS MATERIALIZED (SELECT place FROM tw.limit_waiters "
                    "WHERE name = %s ORDER BY place LIMIT %s) DELETE FROM tw.limit_waiters AS w "
                    "USING first WHERE w.place = first.place "
                    "RETURNING w.place, w.queue, w.key, w.message_id"
                ),
                (limit, count),
            ).fetchall()
            return [Waiter(limit, r[1], r[2], r[3]) for r in sorted(rows)]

        return self._store.write(work)

    def extend(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        if not held:
            return
        expires = self._store.now_ms() + lease_ms
        self._store.write(
            lambda db: db.execute(
                self._store.sql(
                    "UPDATE tw.limit_slots AS s SET expires_ms = %s FROM "
                    "unnest(%b::text[], %b::text[]) AS h(name, holder) "
                    "WHERE s.name = h.name AND s.holder = h.holder"
                ),
                (expires, [limit for limit, _ in held], [holder for _, holder in held]),
            )
        )

    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        """Every waiter in one statement (a round trip per waiter before)."""
        if not waiters:
            return []
        now = self._store.now_ms()
        sql = self._store.sql(
            "UPDATE tw.messages AS m SET state = %s, due_ms = LEAST(m.due_ms, %s), "
            "at_ms = LEAST(m.due_ms, %s) FROM unnest(%b::text[], %b::text[]) AS w(id, queue) "
            "WHERE m.id = w.id AND m.queue = w.queue AND m.state != %s RETURNING m.id, m.queue"
        )
        ids, queues = [w.message_id for w in waiters], [w.queue for w in waiters]

        def work(db: Connection) -> list[bool]:
            woken = set(db.execute(sql, (READY, now, now, ids, queues, LEASED)).fetchall())
            announce_queues(self._store, db, sorted({queue for _, queue in woken}))
            return [(w.message_id, w.queue) in woken for w in waiters]

        return self._store.write(work)

    def usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        sql = self._store.sql(
            "SELECT (SELECT count(*) FROM tw.limit_slots WHERE name = %s AND expires_ms > %s), "
            "(SELECT count(*) FROM tw.limit_waiters WHERE name = %s)"
        )

        def work(db: Connection) -> dict[str, tuple[int, int]]:
            usage: dict[str, tuple[int, int]] = {}
            for limit in limits:
                row = db.execute(sql, (limit, now, limit)).fetchone()
                assert row is not None
                usage[limit] = (int(row[0]), int(row[1]))
            return usage

        return self._store.read(work)
