"""The embedded default: one SQLite file in WAL mode, safe for several worker processes.

A write transaction (``BEGIN IMMEDIATE``) is the shard lock: one transaction claims a
whole batch, one transaction acks a whole batch (group commit). With the default
``synchronous=FULL`` an enqueue that returned survives a power cut; a crash before an ack
commits means redelivery, never loss.

URL: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, ``sqlite://:memory:``
(one process only). Query options: ``synchronous`` (``full``|``normal``), ``busy_timeout_ms``.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from scheduler.backends.base import (
    Backend,
    Claim,
    ClaimBatch,
    Envelope,
    Failure,
    OnConflict,
    Outcome,
    PoisonRecord,
    QueueStats,
    State,
    StoredMessage,
)
from scheduler.clock import Clock, SystemClock
from scheduler.errors import BackendError, BackendUnavailable, ConfigurationError, KeyConflict

#: The whole storage schema. Messages live in a rowid table (appended in arrival order) with
#: a unique index on ``id``: keyed ids are hashes, and inserting them at random into a
#: clustered primary key holding the bodies was 2.5x slower. ``at_ms`` is the due time of a
#: waiting message and the lease deadline of a running one; ``due_ms`` always keeps the due
#: time. States: 0 scheduled (due later), 1 ready (due; claim order is priority, then due
#: time), 2 leased.
SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    id          TEXT NOT NULL UNIQUE,
    queue       TEXT NOT NULL,
    key         TEXT,
    priority    INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    at_ms       INTEGER NOT NULL,
    due_ms      INTEGER NOT NULL,
    timeout_ms  INTEGER NOT NULL,
    attempt     INTEGER NOT NULL DEFAULT 0,
    token       TEXT,
    last_error  TEXT,
    body        BLOB NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_key ON messages (queue, key) WHERE key IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, priority DESC, at_ms) WHERE state = 1;
CREATE INDEX IF NOT EXISTS messages_scheduled ON messages (queue, at_ms) WHERE state = 0;
CREATE INDEX IF NOT EXISTS messages_leased ON messages (queue, at_ms) WHERE state = 2;
CREATE TABLE IF NOT EXISTS poison (
    id          TEXT PRIMARY KEY,
    queue       TEXT NOT NULL,
    key         TEXT,
    priority    INTEGER NOT NULL,
    timeout_ms  INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    failed_ms   INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    error_type  TEXT NOT NULL,
    error       TEXT NOT NULL,
    traceback   TEXT NOT NULL,
    body        BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS poison_queue ON poison (queue, failed_ms);
CREATE TABLE IF NOT EXISTS counters (
    queue TEXT NOT NULL,
    name  TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (queue, name)
) WITHOUT ROWID;
"""

SCHEDULED, READY, LEASED = 0, 1, 2
_STATE_NAMES = {SCHEDULED: State.SCHEDULED, READY: State.READY, LEASED: State.RUNNING}
_COLUMNS = "id, queue, key, priority, state, due_ms, timeout_ms, attempt, last_error, body"


def _stored(row: sqlite3.Row) -> StoredMessage:
    envelope = Envelope(
        id=row[0],
        queue=row[1],
        key=row[2],
        priority=row[3],
        due_ms=row[5],
        timeout_ms=row[6],
        body=row[9],
    )
    return StoredMessage(envelope, _STATE_NAMES[row[4]], row[7], row[8])


class SQLiteBackend(Backend):
    """SQLite storage. One connection per thread; all of them share the file."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: str = "full",
        busy_timeout_ms: int = 30_000,
        clock: Clock | None = None,
    ) -> None:
        if synchronous.lower() not in ("full", "normal", "extra"):
            raise ConfigurationError(
                f"synchronous must be full, normal or extra, not {synchronous!r}"
            )
        self.path = path
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = busy_timeout_ms
        self._clock = clock or SystemClock()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        if path != ":memory:":
            parent = Path(path).parent
            if not parent.exists():
                raise ConfigurationError(f"directory {parent} for the SQLite file does not exist")
        self._connection().executescript(SCHEMA)

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> SQLiteBackend:
        parts = urlsplit(url)
        path = parts.netloc + parts.path if parts.netloc else parts.path
        if path.startswith("/") and not path.startswith("//") and parts.netloc == "":
            path = path[1:]  # sqlite:///rel.db -> rel.db ; sqlite:////abs.db -> /abs.db
        if not path:
            raise ConfigurationError(
                f"SQLite URL {url!r} names no file (sqlite:///path/to/file.db)"
            )
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(options) - {"synchronous", "busy_timeout_ms"}
        if unknown:
            raise ConfigurationError(f"unknown SQLite URL option(s): {', '.join(sorted(unknown))}")
        return cls(
            path,
            synchronous=options.get("synchronous", "full"),
            busy_timeout_ms=int(options.get("busy_timeout_ms", 30_000)),
            clock=clock,
        )

    # -- connections ---------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            return db
        if self._closed:
            raise BackendError("the SQLite backend is closed")
        try:
            db = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            db.execute("PRAGMA cache_size=-65536")  # 64 MiB: keyed ids insert at random
        except sqlite3.Error as err:
            raise BackendUnavailable(f"cannot open SQLite database {self.path!r}: {err}") from err
        self._local.db = db
        with self._connections_lock:
            self._connections.append(db)
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: taken at once (IMMEDIATE), committed or rolled back."""
        db = self._connection()
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            raise BackendUnavailable(f"SQLite is busy or unavailable: {err}") from err
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        try:
            db.execute("COMMIT")
        except sqlite3.Error as err:
            db.execute("ROLLBACK")
            raise BackendError(f"SQLite commit failed: {err}") from err

    def _read(self) -> sqlite3.Connection:
        return self._connection()

    def now_ms(self) -> int:
        return self._clock.now_ms()

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    @staticmethod
    def _count(db: sqlite3.Connection, queue: str, name: str, delta: int) -> None:
        if delta:
            db.execute(
                "INSERT INTO counters (queue, name, value) VALUES (?, ?, ?) "
                "ON CONFLICT (queue, name) DO UPDATE SET value = value + excluded.value",
                (queue, name, delta),
            )

    # -- producing -----------------------------------------------------------------------

    def enqueue(
        self, envelopes: Sequence[Envelope], on_conflict: OnConflict = OnConflict.ERROR
    ) -> list[Outcome]:
        if not envelopes:
            return []
        now = self.now_ms()
        replace = on_conflict is OnConflict.REPLACE
        with self._write() as db:
            if on_conflict is not OnConflict.REPLACE and all(e.key is None for e in envelopes):
                done = self._insert_fresh(db, envelopes, now)
                if done is not None:
                    return done
            holders = self._key_holders(db, envelopes)
            present = self._present_ids(db, [e.id for e in envelopes if e.key is None])
            if on_conflict is OnConflict.ERROR:
                taken = [
                    e.key
                    for e in envelopes
                    if e.key is not None
                    and holders.get((e.queue, e.key), (e.id, e.body)) != (e.id, e.body)
                ]
                if taken:
                    raise KeyConflict(envelopes[0].queue, [k for k in taken if k is not None])
            outcomes: list[Outcome] = []
            rows = []
            per_queue: dict[str, int] = {}
            for e in envelopes:
                if e.key is not None:
                    holder = holders.get((e.queue, e.key))
                    if holder == (e.id, e.body) and not replace:
                        outcomes.append(Outcome.DUPLICATE)
                        continue
                    if holder is not None and on_conflict is OnConflict.IGNORE:
                        outcomes.append(Outcome.IGNORED)
                        continue
                    outcomes.append(Outcome.ENQUEUED if holder is None else Outcome.REPLACED)
                    holders[(e.queue, e.key)] = (e.id, e.body)
                else:
                    if e.id in present and not replace:
                        outcomes.append(Outcome.DUPLICATE)
                        continue
                    outcomes.append(Outcome.REPLACED if e.id in present else Outcome.ENQUEUED)
                    present.add(e.id)
                state = READY if e.due_ms <= now else SCHEDULED
                rows.append(
                    (
                        e.id,
                        e.queue,
                        e.key,
                        e.priority,
                        state,
                        e.due_ms,
                        e.due_ms,
                        e.timeout_ms,
                        e.body,
                    )
                )
                per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
            # REPLACE also removes a row that holds the key under another id (even a leased
            # one: its holder's ack is then refused, so a replaced chain cannot resurrect)
            db.executemany(
                f"INSERT {'OR REPLACE ' if replace else ''}INTO messages "
                "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            for queue, count in per_queue.items():
                self._count(db, queue, "enqueued", count)
        return outcomes

    def _insert_fresh(
        self, db: sqlite3.Connection, envelopes: Sequence[Envelope], now: int
    ) -> list[Outcome] | None:
        """Fast path for unkeyed messages with fresh ids: one ``executemany``. Returns None
        (having written nothing) if some id is already stored, for the careful path."""
        rows = [
            (
                e.id,
                e.queue,
                None,
                e.priority,
                READY if e.due_ms <= now else SCHEDULED,
                e.due_ms,
                e.due_ms,
                e.timeout_ms,
                e.body,
            )
            for e in envelopes
        ]
        db.execute("SAVEPOINT fresh")
        try:
            db.executemany(
                "INSERT INTO messages (id, queue, key, priority, state, at_ms, due_ms, "
                "timeout_ms, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError:
            db.execute("ROLLBACK TO fresh")
            db.execute("RELEASE fresh")
            return None
        db.execute("RELEASE fresh")
        per_queue: dict[str, int] = {}
        for e in envelopes:
            per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
        for queue, count in per_queue.items():
            self._count(db, queue, "enqueued", count)
        return [Outcome.ENQUEUED] * len(envelopes)

    @staticmethod
    def _key_holders(
        db: sqlite3.Connection, envelopes: Sequence[Envelope]
    ) -> dict[tuple[str, str], tuple[str, bytes]]:
        """Who holds each key among ``envelopes`` now: (queue, key) -> (id, body)."""
        holders: dict[tuple[str, str], tuple[str, bytes]] = {}
        by_queue: dict[str, list[str]] = {}
        for e in envelopes:
            if e.key is not None:
                by_queue.setdefault(e.queue, []).append(e.key)
        for queue, keys in by_queue.items():
            for start in range(0, len(keys), 900):
                chunk = keys[start : start + 900]
                marks = ",".join("?" * len(chunk))
                for key, message_id, body in db.execute(
                    f"SELECT key, id, body FROM messages WHERE queue = ? AND key IN ({marks})",
                    [queue, *chunk],
                ):
                    holders[(queue, key)] = (message_id, body)
        return holders

    @staticmethod
    def _present_ids(db: sqlite3.Connection, ids: list[str]) -> set[str]:
        present: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            present.update(
                row[0]
                for row in db.execute(f"SELECT id FROM messages WHERE id IN ({marks})", chunk)
            )
        return present

    # -- reading and cancelling ----------------------------------------------------------

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        sql = f"SELECT {_COLUMNS} FROM messages WHERE id = ?"
        params: tuple[str, ...] = (message_id,)
        if queue is not None:
            sql += " AND queue = ?"
            params += (queue,)
        row = self._read().execute(sql, params).fetchone()
        return None if row is None else _stored(row)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        row = (
            self._read()
            .execute(f"SELECT {_COLUMNS} FROM messages WHERE queue = ? AND key = ?", (queue, key))
            .fetchone()
        )
        return None if row is None else _stored(row)

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        with self._write() as db:
            if queue is None:
                cursor = db.execute("DELETE FROM messages WHERE id = ?", (message_id,))
            else:
                cursor = db.execute(
                    "DELETE FROM messages WHERE id = ? AND queue = ?", (message_id, queue)
                )
            return cursor.rowcount > 0

    def delete_by_key(self, queue: str, key: str) -> bool:
        with self._write() as db:
            cursor = db.execute("DELETE FROM messages WHERE queue = ? AND key = ?", (queue, key))
            return cursor.rowcount > 0

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        sql = f"SELECT {_COLUMNS} FROM messages WHERE key IS NOT NULL"
        params: tuple[str, ...] = ()
        if queue is not None:
            sql += " AND queue = ?"
            params = (queue,)
        return [_stored(row) for row in self._read().execute(sql + " ORDER BY queue, key", params)]

    # -- consuming -----------------------------------------------------------------------

    def claim(self, queue: str, limit: int, lookahead_ms: int = 0) -> ClaimBatch:
        now = self.now_ms()
        with self._write() as db:
            self._requeue_expired(db, queue, now)
            db.execute(
                "UPDATE messages SET state = 1 WHERE queue = ? AND state = 0 AND at_ms <= ?",
                (queue, now + lookahead_ms),
            )
            # one statement leases the whole batch; the batch's token fences each message
            # (a message is in at most one live batch, so a per-batch token is enough)
            token = secrets.token_hex(8)
            rows = (
                db.execute(
                    "UPDATE messages SET state = 2, token = ?, attempt = attempt + 1, "
                    "at_ms = MAX(?, due_ms) + timeout_ms WHERE rowid IN ("
                    "SELECT rowid FROM messages WHERE queue = ? AND state = 1 "
                    "ORDER BY priority DESC, at_ms LIMIT ?) "
                    "RETURNING id, key, body, attempt, due_ms, at_ms, timeout_ms, priority",
                    (token, now, queue, limit),
                ).fetchall()
                if limit > 0
                else []
            )
            rows.sort(key=lambda r: (-r[7], r[4]))  # RETURNING order is unspecified
            claims = [
                Claim(message_id, queue, key, body, token, attempt, due_ms, deadline, timeout_ms)
                for message_id, key, body, attempt, due_ms, deadline, timeout_ms, _ in rows
            ]
            self._count(db, queue, "claimed", len(claims))
            next_due = None
            if not claims:
                next_due = db.execute(
                    "SELECT MIN(at) FROM ("
                    "SELECT MIN(at_ms) AS at FROM messages WHERE queue = ? AND state = 0 "
                    "UNION ALL "
                    "SELECT MIN(at_ms) FROM messages WHERE queue = ? AND state = 2)",
                    (queue, queue),
                ).fetchone()[0]
        return ClaimBatch(claims, next_due)

    def _requeue_expired(self, db: sqlite3.Connection, queue: str, now: int) -> int:
        count = db.execute(
            "UPDATE messages SET state = 1, at_ms = due_ms, token = NULL "
            "WHERE queue = ? AND state = 2 AND at_ms <= ?",
            (queue, now),
        ).rowcount
        self._count(db, queue, "redelivered", count)
        return count

    def requeue_expired(self, queue: str) -> int:
        with self._write() as db:
            return self._requeue_expired(db, queue, self.now_ms())

    def ack(self, items: Sequence[tuple[Claim, Envelope | None]]) -> list[bool]:
        if not items:
            return []
        now = self.now_ms()
        results = []
        acked: dict[str, int] = {}
        with self._write() as db:
            for claim, nxt in items:
                held = (
                    db.execute(
                        "DELETE FROM messages WHERE id = ? AND token = ?", (claim.id, claim.token)
                    ).rowcount
                    == 1
                )
                results.append(held)
                if not held:
                    continue
                acked[claim.queue] = acked.get(claim.queue, 0) + 1
                if nxt is not None:
                    self._insert_next(db, nxt, now)
            for queue, count in acked.items():
                self._count(db, queue, "acked", count)
        return results

    def _insert_next(self, db: sqlite3.Connection, nxt: Envelope, now: int) -> None:
        """Store a chain's next occurrence; its deterministic id makes a repeat a no-op."""
        inserted = db.execute(
            "INSERT OR IGNORE INTO messages "
            "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                nxt.id,
                nxt.queue,
                nxt.key,
                nxt.priority,
                READY if nxt.due_ms <= now else SCHEDULED,
                nxt.due_ms,
                nxt.due_ms,
                nxt.timeout_ms,
                nxt.body,
            ),
        ).rowcount
        self._count(db, nxt.queue, "enqueued", inserted)

    def retry(self, claim: Claim, due_ms: int, error: str) -> bool:
        with self._write() as db:
            state = READY if due_ms <= self.now_ms() else SCHEDULED
            held = (
                db.execute(
                    "UPDATE messages SET state = ?, at_ms = ?, due_ms = ?, token = NULL, "
                    "last_error = ? WHERE id = ? AND token = ?",
                    (state, due_ms, due_ms, error, claim.id, claim.token),
                ).rowcount
                == 1
            )
            self._count(db, claim.queue, "retried", int(held))
            return held

    def release(self, claims: Iterable[Claim]) -> int:
        params = [(c.id, c.token) for c in claims]
        if not params:
            return 0
        with self._write() as db:
            return sum(
                db.execute(
                    "UPDATE messages SET state = 1, at_ms = due_ms, token = NULL, "
                    "attempt = attempt - 1 WHERE id = ? AND token = ?",
                    p,
                ).rowcount
                for p in params
            )

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        if not claims:
            return []
        deadline = self.now_ms() + lease_ms
        with self._write() as db:
            return [
                db.execute(
                    "UPDATE messages SET at_ms = ? WHERE id = ? AND token = ?",
                    (deadline, c.id, c.token),
                ).rowcount
                == 1
                for c in claims
            ]

    # -- the poison queue ----------------------------------------------------------------

    def poison(
        self, claim: Claim, failure: Failure, next_occurrence: Envelope | None = None
    ) -> bool:
        with self._write() as db:
            row = db.execute(
                "SELECT priority FROM messages WHERE id = ? AND token = ?", (claim.id, claim.token)
            ).fetchone()
            if row is None:
                return False
            db.execute("DELETE FROM messages WHERE id = ?", (claim.id,))
            db.execute(
                "INSERT OR REPLACE INTO poison (id, queue, key, priority, timeout_ms, attempts, "
                "failed_ms, reason, error_type, error, traceback, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.id,
                    claim.queue,
                    claim.key,
                    row[0],
                    claim.timeout_ms,
                    claim.attempt,
                    self.now_ms(),
                    failure.reason,
                    failure.error_type,
                    failure.message,
                    failure.traceback,
                    claim.body,
                ),
            )
            self._count(db, claim.queue, "poisoned", 1)
            if next_occurrence is not None:
                self._insert_next(db, next_occurrence, self.now_ms())
            return True

    _POISON_COLUMNS = (
        "id, queue, key, priority, timeout_ms, attempts, failed_ms, reason, error_type, error, "
        "traceback, body"
    )

    @staticmethod
    def _poison_record(row: sqlite3.Row) -> PoisonRecord:
        envelope = Envelope(row[0], row[1], row[2], row[3], row[6], row[4], row[11])
        return PoisonRecord(envelope, Failure(row[7], row[8], row[9], row[10]), row[5], row[6])

    def poison_list(self, queue: str | None = None, limit: int = 100) -> list[PoisonRecord]:
        sql = f"SELECT {self._POISON_COLUMNS} FROM poison"
        params: list[object] = []
        if queue is not None:
            sql += " WHERE queue = ?"
            params.append(queue)
        params.append(limit)
        rows = self._read().execute(sql + " ORDER BY failed_ms, id LIMIT ?", params).fetchall()
        return [self._poison_record(r) for r in rows]

    def poison_get(self, message_id: str) -> PoisonRecord | None:
        row = (
            self._read()
            .execute(f"SELECT {self._POISON_COLUMNS} FROM poison WHERE id = ?", (message_id,))
            .fetchone()
        )
        return None if row is None else self._poison_record(row)

    def poison_replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        now = self.now_ms()
        with self._write() as db:
            if ids is None:
                sql = "SELECT id FROM poison" + (" WHERE queue = ?" if queue else "")
                ids = [r[0] for r in db.execute(sql, (queue,) if queue else ())]
            moved = 0
            for message_id in ids:
                inserted = db.execute(
                    "INSERT OR IGNORE INTO messages "
                    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body) "
                    "SELECT id, queue, key, priority, 1, ?, ?, timeout_ms, body FROM poison "
                    "WHERE id = ?",
                    (now, now, message_id),
                ).rowcount
                if inserted:
                    db.execute("DELETE FROM poison WHERE id = ?", (message_id,))
                    moved += 1
            return moved

    def poison_purge(self, queue: str | None = None) -> int:
        with self._write() as db:
            if queue is None:
                return db.execute("DELETE FROM poison").rowcount
            return db.execute("DELETE FROM poison WHERE queue = ?", (queue,)).rowcount

    # -- operations ----------------------------------------------------------------------

    def queues(self) -> list[str]:
        rows = (
            self._read()
            .execute(
                "SELECT queue FROM messages UNION SELECT queue FROM poison "
                "UNION SELECT queue FROM counters ORDER BY 1"
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        db = self._read()
        now = self.now_ms()
        result = []
        for name in [queue] if queue is not None else self.queues():
            ready, scheduled, running, next_due = db.execute(
                "SELECT COALESCE(SUM(state = 1 OR (state = 0 AND at_ms <= ?)), 0), "
                "COALESCE(SUM(state = 0 AND at_ms > ?), 0), COALESCE(SUM(state = 2), 0), "
                "MIN(CASE WHEN state != 2 THEN at_ms END) FROM messages WHERE queue = ?",
                (now, now, name),
            ).fetchone()
            poison = db.execute("SELECT COUNT(*) FROM poison WHERE queue = ?", (name,)).fetchone()[
                0
            ]
            counters = dict(
                db.execute("SELECT name, value FROM counters WHERE queue = ?", (name,)).fetchall()
            )
            result.append(
                QueueStats(
                    name,
                    ready,
                    scheduled,
                    running,
                    poison,
                    next_due,
                    counters,
                    {0: ready + scheduled + running},
                )
            )
        return result

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        if any(deltas.values()):
            with self._write() as db:
                for name, delta in deltas.items():
                    self._count(db, queue, name, delta)

    def purge(self, queue: str) -> int:
        with self._write() as db:
            return db.execute("DELETE FROM messages WHERE queue = ?", (queue,)).rowcount
