"""Inline mode's hold on an app: its enqueue verbs wrapped so that each, in inline mode,
runs what it enqueued before returning."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any, Literal, Protocol

from tickwork.scheduler import App


class Isolated(Protocol):
    """What inline mode needs of ``tickwork.testing.Isolated``."""

    app: App
    mode: Literal["manual", "inline"]

    def run_inline(self) -> Any: ...


class InlineEntries:
    """The app's enqueue verbs wrapped while it is isolated: each, when the ``Isolated``
    is in inline mode, runs what it enqueued before returning (``Isolated.run_inline``).
    Instance attributes over the app's own methods, removed by ``remove``."""

    _NAMES = ("enqueue", "enqueue_many", "aenqueue")

    def __init__(self, isolated: Isolated) -> None:
        self._app = isolated.app
        self._batches = isolated.app.batches
        for owner, name in self._places():
            original = getattr(owner, name)
            setattr(owner, name, self._wrapped(isolated, original))

    def _places(self) -> list[tuple[Any, str]]:
        return [(self._app, name) for name in self._NAMES] + [(self._batches, "enqueue")]

    @staticmethod
    def _wrapped(isolated: Isolated, original: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def aenqueue(*args: Any, **kwargs: Any) -> Any:
                written = await original(*args, **kwargs)
                if isolated.mode == "inline":  # a worker runs it: off the event loop
                    await asyncio.to_thread(isolated.run_inline)
                return written

            return aenqueue

        @functools.wraps(original)
        def enqueue(*args: Any, **kwargs: Any) -> Any:
            written = original(*args, **kwargs)
            if isolated.mode == "inline":
                isolated.run_inline()
            return written

        return enqueue

    def remove(self) -> None:
        for owner, name in self._places():
            vars(owner).pop(name, None)
