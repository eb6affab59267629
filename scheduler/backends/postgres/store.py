"""The PostgreSQL store: a pool of connections, the schema brought to its newest
version, write and read transactions (retried on a deadlock), the clock, the counters
table, and the caller's own connection for transactional enqueue.

Transactional enqueue: inside ``borrowed(connection)`` (a context of this thread or
task), every write and read of this store runs on that connection, inside the caller's
open transaction (a savepoint of it), and commits or rolls back with it; nothing is
retried there, since the transaction is the caller's. An ``AsyncConnection`` is written
on its event loop: by ``aenqueue`` directly, by the other ``a``-verbs from a worker
thread through a ``LoopBridge``.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from tickwork.scheduler.backends.postgres.bridge import LoopBridge
from tickwork.scheduler.backends.postgres.schema import MIGRATIONS, qualify
from tickwork.scheduler.errors import (
    BackendError,
    BackendFull,
    BackendUnavailable,
    ConfigurationError,
    InvalidMessage,
)

T = TypeVar("T")
Connection = psycopg.Connection[Any]
AsyncConnection = psycopg.AsyncConnection[Any]

#: a transaction that lost a deadlock (or a serialization check) is run again this often
_ATTEMPTS = 8
#: the offset to the server's clock is measured again this often (seconds)
_CLOCK_EVERY_S = 60.0
#: how many rows of counters each (queue, name) spreads over, so that writers in
#: different threads and processes rarely wait for one another's counter row
COUNTER_SLOTS = 16
#: expired side records (rate starts, results, workers, batches) are deleted this often
PRUNE_EVERY_MS = 1000
_NOW_SQL = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"


def disk_full(err: BaseException) -> BackendFull:
    """PostgreSQL's "could not extend file ... No space left on device" in our words."""
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    return BackendFull(
        f"the PostgreSQL server's disk is full ({first}): nothing of this write was "
        "applied; free space on the server and try again"
    )


class Borrowed:
    """The caller's connection in this context (``PostgresStore.borrowed``): whose store
    it writes for, and for an ``AsyncConnection``, the event loop it belongs to."""

    def __init__(
        self,
        store: PostgresStore,
        connection: Connection | AsyncConnection,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self.store = store
        self.connection = connection
        self.loop = loop


_BORROWED: contextvars.ContextVar[Borrowed | None] = contextvars.ContextVar(
    "tickwork_postgres_borrowed", default=None
)


class PostgresStore:
    """One database (one schema of it): pooled connections shared by every role."""

    def __init__(
        self,
        conninfo: str,
        schema: str,
        *,
        pool_size: int = 10,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.schema = schema
        self._closed = False
        self._chores_ms: dict[str, int] = {}  # periodic chore -> when it last ran
        self._offset_ms = 0
        self._measured_at = 0.0
        self._clock_lock = threading.Lock()
        options: dict[str, Any] = {
            "autocommit": True,
            "connect_timeout": max(1, round(connect_timeout_s)),
        }
        # one connection of its own first: a refused login or an unknown host is one clear
        # error at once (a pool would retry until its timeout), and it brings the schema up
        try:
            with psycopg.connect(conninfo, **options) as db:
                self.migrate(db)
                self._measure_clock(db)
        except psycopg.OperationalError as err:
            raise BackendUnavailable(f"cannot connect to PostgreSQL: {err}") from err
        self.pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs=options,
            timeout=connect_timeout_s,
            open=False,
            name=f"tickwork-{schema}",
        )
        self.pool.open(wait=False)

    # -- SQL -----------------------------------------------------------------------------

    def sql(self, statement: str) -> str:
        """``statement`` with its ``tw.`` tables in this store's schema."""
        return qualify(statement, self.schema)

    def migrate(self, db: Connection) -> None:
        """Bring the schema to ``len(MIGRATIONS)``, applying each missing version once."""
        quoted = f'"{self.schema}"'
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (quoted,))
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {quoted}")
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {quoted}.schema_version (version integer NOT NULL)"
            )
            row = db.execute(f"SELECT max(version) FROM {quoted}.schema_version").fetchone()
            version = 0 if row is None or row[0] is None else int(row[0])
            if version > len(MIGRATIONS):
                raise BackendError(
                    f"the PostgreSQL schema {self.schema!r} is at version {version}, newer "
                    f"than this tickwork knows ({len(MIGRATIONS)}): upgrade tickwork"
                )
            for statements in MIGRATIONS[version:]:
                db.execute(self.sql(statements).encode())
            if version < len(MIGRATIONS):
                db.execute(f"DELETE FROM {quoted}.schema_version")
                db.execute(
                    f"INSERT INTO {quoted}.schema_version (version) VALUES (%s)",
                    (len(MIGRATIONS),),
                )

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self._closed:
            raise BackendError("the PostgreSQL backend is closed")
        try:
            with self.pool.connection() as db:
                yield db
        except PoolTimeout as err:
            raise BackendUnavailable(f"no PostgreSQL connection free or reachable: {err}") from err
        except pg_errors.TransactionRollback:
            raise  # a deadlock or serialization failure: the caller may run it again
        except pg_errors.DiskFull as err:
            raise disk_full(err) from err
        except psycopg.OperationalError as err:
            raise BackendUnavailable(f"PostgreSQL is unavailable: {err}") from err

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction and commit it; run again (from the start) when
        the transaction lost a deadlock. On a borrowed connection: in a savepoint of the
        caller's transaction, once."""
        borrowed = self._borrowed_sync()
        if borrowed is not None:
            return self._in_callers_transaction(borrowed, work)
        return self._retrying(work, block=True)

    def statement(self, work: Callable[[Connection], T]) -> T:
        """Run ``work``, which executes one statement (atomic by itself), outside any
        transaction block: one round trip instead of three. On a borrowed connection it
        still runs in a savepoint of the caller's transaction."""
        borrowed = self._borrowed_sync()
        if borrowed is not None:
            return self._in_callers_transaction(borrowed, work)
        return self._retrying(work, block=False)

    def _retrying(self, work: Callable[[Connection], T], *, block: bool) -> T:
        """``work`` on a pooled connection (in a transaction block if ``block``), run
        again after a lost deadlock, with a short random pause."""
        for attempt in range(_ATTEMPTS):
            try:
                with self._connection() as db:
                    if not block:
                        return work(db)
                    with db.transaction():
                        return work(db)
            except (pg_errors.DeadlockDetected, pg_errors.SerializationFailure):
                if attempt == _ATTEMPTS - 1:
                    raise
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
            except psycopg.DataError as err:  # text with NUL, a number out of range
                raise InvalidMessage(f"PostgreSQL refused a value: {err}") from err
        raise AssertionError("unreachable")

    @staticmethod
    def _in_callers_transaction(db: Connection, work: Callable[[Connection], T]) -> T:
        """``work`` in a savepoint of the caller's transaction on ``db`` (once: the
        transaction is the caller's to retry)."""
        with PostgresStore.errors_explained():
            if not db.autocommit and db.info.transaction_status == TransactionStatus.IDLE:
                # open the connection's implicit transaction (what its own next statement
                # would do), so the block below is a savepoint of it rather than a
                # transaction of its own that would commit at once
                db.execute("SELECT 1")
            with db.transaction():
                return work(db)

    @staticmethod
    @contextmanager
    def errors_explained() -> Iterator[None]:
        """psycopg's errors on a caller's connection as tickwork's: a refused value is
        ``InvalidMessage``, a lost connection ``BackendUnavailable``."""
        try:
            yield
        except psycopg.DataError as err:
            raise InvalidMessage(f"PostgreSQL refused a value: {err}") from err
        except pg_errors.DiskFull as err:
            raise disk_full(err) from err
        except psycopg.OperationalError as err:
            raise BackendUnavailable(f"PostgreSQL is unavailable: {err}") from err

    def counter_slot(self) -> int:
        """This thread's row of each counter (``count``)."""
        return threading.get_ident() % COUNTER_SLOTS

    def read(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` (reads only) on a connection: the caller's one if borrowed."""
        borrowed = self._borrowed_sync()
        if borrowed is not None:
            return work(borrowed)
        with self._connection() as db:
            return work(db)

    def _borrowed_sync(self) -> Connection | None:
        """The caller's connection in this context, if it is this store's, as a blocking
        one: an ``AsyncConnection`` through a ``LoopBridge`` to its loop, refused on the
        loop's own thread (a blocking call there would wait for the loop it stops)."""
        borrowed = _BORROWED.get()
        if borrowed is None or borrowed.store is not self:
            return None
        if borrowed.loop is None:
            return cast(Connection, borrowed.connection)
        if _running_loop() is borrowed.loop:
            raise ConfigurationError(
                "on an asynchronous connection, await the asynchronous verbs (adelay, "
                "aschedule, app.aenqueue, app.aenqueue_many, app.acancel): a blocking call "
                "on the event loop cannot wait for its own loop"
            )
        bridge = LoopBridge(cast(AsyncConnection, borrowed.connection), borrowed.loop)
        # what the roles use of a Connection (execute, transaction, autocommit, info)
        return cast(Connection, bridge)

    def borrows(self) -> bool:
        """Whether this context writes inside a caller's transaction on this store."""
        borrowed = _BORROWED.get()
        return borrowed is not None and borrowed.store is self

    def borrowed_async(self) -> AsyncConnection | None:
        """The caller's asynchronous connection in this context, if it is this store's
        and this is its loop's thread."""
        borrowed = _BORROWED.get()
        if borrowed is None or borrowed.store is not self or borrowed.loop is None:
            return None
        if _running_loop() is not borrowed.loop:
            return None
        return cast(AsyncConnection, borrowed.connection)

    @contextmanager
    def borrowed(self, connection: Connection | AsyncConnection) -> Iterator[None]:
        """Within this block (this thread or task), write and read on ``connection``. An
        ``AsyncConnection`` is taken from a coroutine on its event loop."""
        loop = None
        if isinstance(connection, psycopg.AsyncConnection):
            loop = _running_loop()
            if loop is None:
                raise ConfigurationError(
                    "an AsyncConnection is used from its event loop: enter "
                    "app.transaction(connection) (or pass connection=) in a coroutine"
                )
        elif not isinstance(connection, psycopg.Connection):
            raise TypeError(
                "transactional enqueue takes a psycopg (3) Connection or AsyncConnection, "
                f"not {type(connection).__name__}"
            )
        token = _BORROWED.set(Borrowed(self, connection, loop))
        try:
            yield
        finally:
            _BORROWED.reset(token)

    # -- the clock -----------------------------------------------------------------------

    def _measure_clock(self, db: Connection) -> None:
        """The server's clock minus ours, taken at the middle of the round trip; none when
        the server's reading falls inside the round trip (the same clock, on one machine,
        must read exactly alike, or a message due now could look a millisecond early)."""
        before = time.time_ns() // 1_000_000
        row = db.execute(_NOW_SQL).fetchone()
        after = time.time_ns() // 1_000_000
        assert row is not None
        server = int(row[0])
        self._offset_ms = 0 if before <= server <= after else server - (before + after) // 2
        self._measured_at = time.monotonic()

    def now_ms(self) -> int:
        """The server's clock (ours corrected by the offset, measured once a minute)."""
        if time.monotonic() - self._measured_at > _CLOCK_EVERY_S:
            with self._clock_lock:
                if time.monotonic() - self._measured_at > _CLOCK_EVERY_S:
                    self._measured_at = time.monotonic()  # one thread measures; others go on
                    with self._connection() as db:
                        self._measure_clock(db)
        return time.time_ns() // 1_000_000 + self._offset_ms

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.pool.close()

    # -- helpers used inside a write -------------------------------------------------------

    def due(self, chore: str, now: int, every_ms: int) -> bool:
        """Whether ``chore`` (a prune) is due: at most once every ``every_ms`` in this
        process; when it is, it counts as done now."""
        if now - self._chores_ms.get(chore, 0) < every_ms:
            return False
        self._chores_ms[chore] = now
        return True

    def prune(
        self, db: Connection, table: str, column: str, now: int, every_ms: int = PRUNE_EVERY_MS
    ) -> None:
        """Inside a write: delete the rows of ``table`` whose time ``column`` has passed,
        at most once every ``every_ms`` per table (what expires is never read: this only
        bounds the table)."""
        if self.due(f"prune {table}", now, every_ms):
            db.execute(self.sql(f"DELETE FROM tw.{table} WHERE {column} <= %s"), (now,))

    def count(self, db: Connection, queue: str, name: str, delta: int) -> None:
        """Add ``delta`` to a queue's counter (one of ``COUNTER_SLOTS`` rows: this thread's)."""
        if delta:
            db.execute(
                self.sql(
                    "INSERT INTO tw.counters (queue, name, slot, value) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (queue, name, slot) DO UPDATE "
                    "SET value = counters.value + excluded.value"
                ),
                (queue, name, self.counter_slot(), delta),
            )

    def add_pending(self, db: Connection, queue: str, delta: int) -> None:
        """Keep a bounded queue's count of messages in step with a write that added or
        removed ``delta`` of them; nothing changes for an unbounded queue."""
        if delta:
            db.execute(
                self.sql("UPDATE tw.queue_bounds SET pending = pending + %s WHERE queue = %s"),
                (delta, queue),
            )


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
