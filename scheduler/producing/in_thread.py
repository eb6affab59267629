"""``in_thread``: the ``async`` twin of a blocking method, for code on an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, runtime_checkable

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


@runtime_checkable
class Transactional(Protocol):
    """What writes through a caller's connection (an ``App``: ``App.transaction``)."""

    def transaction(self, connection: Any) -> AbstractContextManager[None]: ...


def in_thread(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap a blocking method so that awaiting it runs the method in a worker thread
    (``asyncio.to_thread``): the event loop keeps running meanwhile. Same signature.

    A ``connection=`` argument (the caller's database connection) is taken here, on the
    loop, where an asynchronous one belongs (``transaction``): the method runs inside
    that transaction, and its writes are carried back to the loop."""

    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        connection = kwargs.get("connection")
        if connection is None or not isinstance(self, Transactional):
            return await asyncio.to_thread(method, self, *args, **kwargs)
        kwargs["connection"] = None  # taken below: the thread runs inside it
        with self.transaction(connection):
            return await asyncio.to_thread(method, self, *args, **kwargs)

    run.__name__ = run.__qualname__ = f"a{method.__name__}"
    run.__doc__ = f"``{method.__name__}`` without blocking the event loop (run in a thread)."
    return run
