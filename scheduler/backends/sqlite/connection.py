"""The SQLite file: its schema, its URL options, and the connections to it (one per thread,
each in WAL mode), write and read transactions, the counters table."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tickwork.scheduler.backends.base import Envelope
from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.sqlite import ledger_log, ledger_pages
from tickwork.scheduler.backends.sqlite.aging import AGING_SCHEMA, age_in
from tickwork.scheduler.backends.sqlite.fairness import FAIR_SCHEMA
from tickwork.scheduler.backends.states import initial_state
from tickwork.scheduler.clock import Clock, SystemClock
from tickwork.scheduler.errors import (
    BackendError,
    BackendFull,
    BackendUnavailable,
    ConfigurationError,
)

#: The whole storage schema. Messages live in a rowid table (appended in arrival order) with
#: a unique index on ``id``: keyed ids are hashes, and inserting them at random into a
#: clustered primary key holding the bodies was 2.5x slower. ``at_ms`` is the due time of a
#: waiting message and the lease deadline of a running one; ``due_ms`` always keeps the due
#: time. States: 0 scheduled (due later), 1 ready (due; claim order is priority, then due
#: time, or for a message with a fair-share key its turn: ``fairness.py``), 2 leased.
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
    body        BLOB NOT NULL,
    fair        TEXT,
    turn        INTEGER
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
CREATE TABLE IF NOT EXISTS queue_bounds (
    queue       TEXT PRIMARY KEY,
    max_pending INTEGER NOT NULL,
    pending     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS paused_queues (
    queue    TEXT PRIMARY KEY,
    since_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS abort_requests (
    id             TEXT PRIMARY KEY,
    queue          TEXT NOT NULL,
    continue_chain INTEGER NOT NULL,
    requested_ms   INTEGER NOT NULL,
    expires_ms     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS limit_slots (
    name       TEXT NOT NULL,
    holder     TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (name, holder)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS limit_waiters (
    name       TEXT NOT NULL,
    message_id TEXT NOT NULL,
    queue      TEXT NOT NULL,
    key        TEXT,
    UNIQUE (name, message_id)
);
CREATE INDEX IF NOT EXISTS limit_waiters_fifo ON limit_waiters (name);
CREATE TABLE IF NOT EXISTS rate_starts (
    name     TEXT NOT NULL,
    member   TEXT NOT NULL,
    at_ms    INTEGER NOT NULL,
    until_ms INTEGER NOT NULL,
    PRIMARY KEY (name, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rate_starts_in_order ON rate_starts (name, at_ms);
CREATE INDEX IF NOT EXISTS rate_starts_to_prune ON rate_starts (until_ms);
CREATE TABLE IF NOT EXISTS results (
    id         TEXT PRIMARY KEY,
    body       BLOB NOT NULL,
    expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS results_to_prune ON results (expires_ms);
CREATE TABLE IF NOT EXISTS workers (
    id         TEXT PRIMARY KEY,
    body       BLOB NOT NULL,
    expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches (
    id          TEXT PRIMARY KEY,
    description BLOB,
    settled     INTEGER NOT NULL,
    failed      INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batches_to_prune ON batches (expires_ms);
CREATE TABLE IF NOT EXISTS batch_members (
    batch      TEXT NOT NULL,
    member     INTEGER NOT NULL,
    failed     INTEGER NOT NULL,
    outcome    BLOB NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (batch, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_members_to_prune ON batch_members (expires_ms);
"""

#: expired side records (rate starts, results, workers, batches) are deleted this often
_PRUNE_EVERY_MS = 1000
#: and expired ledger records (a full scan: the ledger has no index by expiry) this often
_LEDGER_SWEEP_MS = 3_600_000


#: every open store, so that a forked child can renew its write lock (``_after_fork``)
_STORES: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()


def _full(err: BaseException) -> bool:
    """Whether ``err`` is SQLite's "database or disk is full"."""
    return isinstance(err, sqlite3.Error) and getattr(err, "sqlite_errorcode", None) == (
        sqlite3.SQLITE_FULL
    )


def _after_fork() -> None:
    """In a forked child: a store's write lock may have been held by a parent thread at
    the fork, and would never be released here."""
    for store in list(_STORES):
        store._writer = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


class SQLiteStore:
    """The file and its connections: one per thread, all sharing the file; write
    transactions, the clock and the counters table."""

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
        # this process's writers queue here, woken at once, rather than in SQLite's busy
        # handler, which sleeps milliseconds between looks (other processes still do)
        self._writer = threading.Lock()
        _STORES.add(self)
        self._chores_ms: dict[str, int] = {}  # periodic chore -> when it last ran
        self._fold_wanted = False  # the ledger's log is due to be folded
        self._closed = False
        if path != ":memory:":
            parent = Path(path).parent
            if not parent.exists():
                raise ConfigurationError(f"directory {parent} for the SQLite file does not exist")
        self.connection().executescript(
            SCHEMA
            + FAIR_SCHEMA
            + AGING_SCHEMA
            + ledger_log.LEDGER_LOG_SCHEMA
            + ledger_pages.LEDGER_PAGES_SCHEMA
        )

    # -- connections ---------------------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
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
            self._set_wal(db)
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            db.execute("PRAGMA cache_size=-65536")  # 64 MiB: keyed ids insert at random
        except sqlite3.Error as err:
            raise BackendUnavailable(f"cannot open SQLite database {self.path!r}: {err}") from err
        self._local.db = db
        with self._connections_lock:
            self._connections.append(db)
        return db

    def _set_wal(self, db: sqlite3.Connection) -> None:
        """Put the file in WAL mode. Switching the journal mode can answer "database is
        locked" at once, without the busy handler, while another connection opens or
        recovers the file; retry until the busy timeout like any other wait."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        pause = 0.001
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as err:
                busy = "locked" in str(err) or "busy" in str(err)
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: taken at once (IMMEDIATE), committed or rolled back."""
        db = self.connection()
        with self._writer:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as err:
                raise BackendUnavailable(f"SQLite is busy or unavailable: {err}") from err
            try:
                yield db
            except BaseException as err:
                if db.in_transaction:  # SQLite rolled back itself on some errors (full)
                    db.execute("ROLLBACK")
                if _full(err):
                    raise self._full_error(err) from err
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error as err:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if _full(err):
                    raise self._full_error(err) from err
                raise BackendError(f"SQLite commit failed: {err}") from err
        if self._fold_wanted:  # gathered with no lock held, then a write of its own
            self._fold_wanted = False
            ledger_log.fold_apart(self.connection(), self.write)

    def _full_error(self, err: BaseException) -> BackendFull:
        where = os.path.dirname(os.path.abspath(self.path))
        return BackendFull(
            f"the disk holding the SQLite database is full ({err}): nothing of this write "
            f"was applied; free space in {where} and try again"
        )

    def prune(
        self,
        db: sqlite3.Connection,
        table: str,
        column: str,
        now: int,
        every_ms: int = _PRUNE_EVERY_MS,
    ) -> None:
        """Inside a write: delete the rows of ``table`` whose time ``column`` has passed,
        at most once every ``every_ms`` per table (what expires is never read: this only
        bounds the table)."""
        if self.due(f"prune {table}", now, every_ms):
            db.execute(f"DELETE FROM {table} WHERE {column} <= ?", (now,))

    def due(self, chore: str, now: int, every_ms: int) -> bool:
        """Whether ``chore`` (a prune, the ledger's fold) is due: at most once every
        ``every_ms`` in this process; when it is, it counts as done now."""
        if now - self._chores_ms.get(chore, 0) < every_ms:
            return False
        self._chores_ms[chore] = now
        return True

    def append_ledger_in(
        self, db: sqlite3.Connection, entries: Iterable[LedgerEntry], now: int
    ) -> None:
        """Inside a write: append each entry's records (to the log, folded into the
        ledger every few seconds: ``ledger_log.py``); expired rows of subjects no
        longer written go with an hourly sweep (reads skip them meanwhile)."""
        ledger_log.append(db, entries, now)
        if self.due("fold ledger_log", now, ledger_log.FOLD_EVERY_MS):
            self._fold_wanted = True  # once this write ends (``write``)
        self.prune(db, "ledger_pages", "expires_ms", now, every_ms=_LEDGER_SWEEP_MS)

    def read(self) -> sqlite3.Connection:
        return self.connection()

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
    def count(db: sqlite3.Connection, queue: str, name: str, delta: int) -> None:
        if delta:
            db.execute(
                "INSERT INTO counters (queue, name, value) VALUES (?, ?, ?) "
                "ON CONFLICT (queue, name) DO UPDATE SET value = value + excluded.value",
                (queue, name, delta),
            )

    @staticmethod
    def add_pending(db: sqlite3.Connection, queue: str, delta: int) -> None:
        """Keep a bounded queue's count of messages in step with a write that added or
        removed ``delta`` of them (``bounds.py``); nothing changes for an unbounded queue."""
        if delta:
            db.execute(
                "UPDATE queue_bounds SET pending = pending + ? WHERE queue = ?", (delta, queue)
            )

    def insert_next(self, db: sqlite3.Connection, nxt: Envelope, now: int) -> None:
        """Store a chain's next occurrence; its deterministic id makes a repeat a no-op."""
        inserted = db.execute(
            "INSERT OR IGNORE INTO messages "
            "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                nxt.id,
                nxt.queue,
                nxt.key,
                nxt.priority,
                initial_state(nxt, now),
                nxt.due_ms,
                nxt.due_ms,
                nxt.timeout_ms,
                nxt.body,
                nxt.fair,
            ),
        ).rowcount
        if inserted:
            age_in(db, (nxt,))
        self.count(db, nxt.queue, "enqueued", inserted)
        self.add_pending(db, nxt.queue, inserted)
