"""``in_thread``: the ``async`` twin of a blocking method, for code on an event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


def in_thread(
    method: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap a blocking method so that awaiting it runs the method in a worker thread
    (``asyncio.to_thread``): the event loop keeps running meanwhile. Same signature."""

    async def run(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    run.__name__ = run.__qualname__ = f"a{method.__name__}"
    run.__doc__ = f"``{method.__name__}`` without blocking the event loop (run in a thread)."
    return run
