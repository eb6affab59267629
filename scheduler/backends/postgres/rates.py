"""The PostgreSQL backend's rate limits: every unit of a start a limit granted or reserved
is a row of ``rate_starts`` (limit, member, time, and when it stops counting; a start of
several units has rows ``member+2`` and on beside its own). A reservation holds
its limit's transaction-level advisory lock, so reading the window and writing the start
are one atomic step across every worker; rows that left every window are deleted at most
once a second."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.records import RateRequest
from tickwork.scheduler.backends.roles import Rates


class PostgresRates(Rates):
    """Starts and reservations of rate limits."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def reserve(self, requests: Sequence[RateRequest]) -> list[int | None]:
        if not requests:
            return []

        def work(db: Connection) -> list[int | None]:
            for name in sorted({r.limit for r in requests}):
                db.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(%s, 17))", (f"rate:{name}",)
                )
            now = self._store.now_ms()
            self._store.prune(db, "rate_starts", "until_ms", now)
            return [self._reserve(db, request, now) for request in requests]

        return self._store.write(work)

    def _reserve(self, db: Connection, request: RateRequest, now: int) -> int | None:
        sql = self._store.sql
        name, period, units = request.limit, request.period_ms, request.units
        row = db.execute(  # the unit that many places back still in the window, if any
            sql(
                "SELECT at_ms FROM tw.rate_starts WHERE name = %s AND at_ms > %s "
                "ORDER BY at_ms DESC LIMIT 1 OFFSET %s"
            ),
            (name, now - period, request.starts - units),
        ).fetchone()
        at = now if row is None else int(row[0]) + period
        if at > now and not request.reserve:  # a start only now, or none: unless it has one
            mine = db.execute(
                sql("SELECT at_ms FROM tw.rate_starts WHERE name = %s AND member = %s"),
                (name, request.member),
            ).fetchone()
            return at if mine is None or int(mine[0]) > now else None
        members = [request.member, *(f"{request.member}+{n}" for n in range(2, units + 1))]
        kept = db.execute(
            sql(
                "INSERT INTO tw.rate_starts (name, member, at_ms, until_ms) "
                "SELECT %s, m, %s, %s FROM unnest(%s::text[]) AS m ON CONFLICT (name, member) "
                "DO UPDATE SET name = excluded.name RETURNING member, at_ms"
            ),
            (name, at, at + period, members),
        ).fetchall()
        at = next(int(at_ms) for member, at_ms in kept if member == request.member)
        return None if at <= now else at

    def usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        statement = self._store.sql(
            "SELECT count(*) FILTER (WHERE at_ms <= %s), count(*) FILTER (WHERE at_ms > %s) "
            "FROM tw.rate_starts WHERE name = %s AND at_ms > %s"
        )

        def work(db: Connection) -> dict[str, tuple[int, int]]:
            usage: dict[str, tuple[int, int]] = {}
            for name in limits:
                row = db.execute(statement, (now, now, name, now - period_ms)).fetchone()
                assert row is not None
                usage[name] = (int(row[0]), int(row[1]))
            return usage

        return self._store.read(work)
