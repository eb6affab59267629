"""A synchronous face of a caller's asynchronous psycopg connection.

tickwork's roles are written against a blocking connection. On an asyncio application's
``AsyncConnection`` they run in a worker thread (the ``a``-verbs: ``aenqueue_many``,
``acancel``, a batch, a wait for room), and every statement they send is carried to the
connection's own event loop (``asyncio.run_coroutine_threadsafe``) and waited for there.
The connection is only ever used on its loop, the loop keeps serving the application
meanwhile, and every write joins the connection's open transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")


class Fetched:
    """What a statement answered, read whole on the loop: its rows and row count."""

    def __init__(
        self, rows: list[tuple[Any, ...]], rowcount: int, description: Sequence[Any] | None
    ) -> None:
        self.rows = rows
        self.rowcount = rowcount
        self.description = description

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows.pop(0) if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.fetchall())


class LoopBridge:
    """``execute``, ``transaction``, ``autocommit`` and ``info`` of a blocking psycopg
    connection (what the roles use), carried out on ``connection``'s event loop ``loop``.
    Used from any thread but the loop's own (there, waiting would stop the loop)."""

    def __init__(
        self, connection: psycopg.AsyncConnection[Any], loop: asyncio.AbstractEventLoop
    ) -> None:
        self._connection = connection
        self._loop = loop

    @property
    def autocommit(self) -> bool:
        return self._connection.autocommit

    @property
    def info(self) -> psycopg.ConnectionInfo:
        return self._connection.info

    def execute(self, query: Any, params: Any = None) -> Fetched:
        return self._on_loop(self._execute(query, params))

    async def _execute(self, query: Any, params: Any) -> Fetched:
        cursor = await self._connection.execute(query, params)
        rows = await cursor.fetchall() if cursor.description is not None else []
        return Fetched(rows, cursor.rowcount, cursor.description)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A transaction block (a savepoint inside an open transaction), entered and left
        on the loop: left with an error, it rolls back."""
        block = self._connection.transaction()
        self._on_loop(block.__aenter__())
        try:
            yield
        except BaseException as err:
            if not self._on_loop(block.__aexit__(type(err), err, err.__traceback__)):
                raise
        else:
            self._on_loop(block.__aexit__(None, None, None))

    def _on_loop(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()
