"""``Isolated``: an app on a fresh backend for a block or a test, its modes, ``drain``,
``advance`` and the assertions on what was enqueued."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from tickwork.scheduler import App
from tickwork.scheduler.clock import Clock, ManualClock
from tickwork.scheduler.hooks import Hooks
from tickwork.scheduler.model.message import Message, ScheduledMessage
from tickwork.scheduler.model.tasks import TaskFunction
from tickwork.testing.inline import InlineEntries
from tickwork.testing.outcomes import Drained, Outcomes, Recorder, RunFailedInline
from tickwork.workers import Worker, WorkerConfig


class Isolated:
    """``app`` on a fresh backend for the length of a block or a test: by default a
    temporary SQLite file on a ``ManualClock`` (``advance`` moves it), or the backend of
    ``url`` (on its own clock). The app's backend, clock and hooks are restored after.

    ``mode``: ``"manual"`` (the default) stores what is enqueued and runs nothing until
    ``drain``; ``"inline"`` runs each enqueued message at once, in the caller's thread,
    through a worker (arguments validated, JSON both ways, retries followed by moving
    the clock, the poison decision, results kept), and raises ``RunFailedInline`` from the
    enqueuing call when it fails for good. ``inline()`` and ``manual()`` switch for a
    block."""

    def __init__(
        self,
        app: App,
        url: str | None = None,
        start_ms: int | None = None,
        mode: Literal["manual", "inline"] = "manual",
        clock: ManualClock | None = None,
    ) -> None:
        if mode not in ("manual", "inline"):
            raise ValueError(f"mode must be 'manual' or 'inline', not {mode!r}")
        self.app = app
        self.mode = mode
        self._draining = threading.local()
        self._saved = (app.settings.backend, app.clock, app.hooks)
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self.clock: ManualClock | None = None
        if url is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="tickwork-test-")
            url = f"sqlite:///{Path(self._scratch.name) / 'tickwork.db'}"
            if clock is not None:
                self.clock = clock
            else:
                self.clock = ManualClock() if start_ms is None else ManualClock(start_ms)
        self._recorder = Recorder()
        self._outcomes = Outcomes()
        app.hooks = Hooks([*app.hooks, self._recorder, self._outcomes])
        app.use_backend(url, clock=self.clock)
        self._patched = InlineEntries(self)

    def close(self) -> None:
        """Restore the app as it was (its backend reopened from its URL on next use)."""
        url, clock, hooks = self._saved
        self._patched.remove()
        self.app.hooks = hooks
        self.app.use_backend(url, clock=clock)
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- modes -------------------------------------------------------------------------------

    @contextmanager
    def inline(self) -> Iterator[None]:
        """Within this block, each enqueued message runs at once (``mode="inline"``)."""
        saved, self.mode = self.mode, "inline"
        try:
            yield
        finally:
            self.mode = saved

    @contextmanager
    def manual(self) -> Iterator[None]:
        """Within this block, enqueued messages wait for ``drain`` (``mode="manual"``)."""
        saved, self.mode = self.mode, "manual"
        try:
            yield
        finally:
            self.mode = saved

    def run_inline(self) -> Drained:
        """What inline mode does after an enqueue: drain what is due, follow retries
        (moving the test's clock to each, or waiting on a server's clock), and raise
        ``RunFailedInline`` for a run that failed for good. Not from inside a run (a handler
        that enqueues): the drain that runs it runs what it enqueued."""
        total = Drained()
        if getattr(self._draining, "on", False):
            return total
        self._draining.on = True
        try:
            while True:
                drained = self.drain()
                total.add(drained)
                if not drained.retried:
                    break
                wait = timedelta(seconds=max(drained.retry_delays_s)) + timedelta(milliseconds=1)
                if self.clock is not None:
                    self.advance(wait)
                else:
                    time.sleep(wait.total_seconds())
        finally:
            self._draining.on = False
        if total.failures:
            run, failure = total.failures[0]
            raise RunFailedInline(run, failure)
        return total

    # -- time and running ----------------------------------------------------------------

    def advance(self, delta: timedelta) -> None:
        """Move the test's clock by ``delta`` (a cron or a repeating schedule then comes
        due, with no sleeping)."""
        if self.clock is None:
            raise RuntimeError("only an app isolated on its temporary SQLite file has a clock")
        self.clock.advance(int(delta / timedelta(milliseconds=1)))

    def drain(self, queue: str | None = None, *, advance: timedelta | None = None) -> Drained:
        """Run everything due now (after moving the clock by ``advance``), in ``queue`` or
        in every queue, with a burst worker in this process, until nothing is due:
        chains' next steps, batches' callbacks and schedules' next occurrences that come
        due meanwhile run too. Returns what ran."""
        if advance is not None:
            self.advance(advance)
        queues = (queue,) if queue is not None else tuple(self.app.queues.names())
        config = WorkerConfig(
            queues=queues,
            burst=True,
            lookahead_ms=0,  # nothing parked for later: the clock may not move by itself
            poll_interval_s=0.01,
            grace_s=5.0,
            activity_interval_s=0,
            install_periodic=True,
        )
        drained = Drained()
        self._outcomes.drained = drained
        try:
            clock: Clock | None = self.clock
            Worker(self.app, config, clock=clock).run()
        finally:
            self._outcomes.drained = None
        return drained

    # -- what was enqueued ---------------------------------------------------------------

    def enqueued(
        self, task: TaskFunction[..., Any] | str | None = None, queue: str | None = None
    ) -> list[ScheduledMessage]:
        """The messages written through the app since it was isolated that are still
        stored (waiting or running), oldest first; of ``task`` and in ``queue`` if given."""
        name = task if isinstance(task, str) or task is None else task.name
        found = []
        for message_id, body in list(self._recorder.bodies.items()):
            message = Message.decode(body)
            if (name is not None and message.task != name) or (
                queue is not None and message.queue != queue
            ):
                continue
            stored = self.app.backend.messages.get(message_id, message.queue)
            if stored is not None:
                found.append(ScheduledMessage.from_stored(stored))
        return found

    def assert_enqueued(
        self,
        task: TaskFunction[..., Any] | str,
        *,
        args: list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        key: str | None = None,
        queue: str | None = None,
    ) -> ScheduledMessage:
        """The one message of ``task`` enqueued with these arguments, key and queue (each
        compared when given; arguments as they are stored, JSON); fails naming what was
        enqueued."""
        matches = self._matching(task, args, kwargs, key, queue)
        if len(matches) != 1:
            wanted = _describe_wanted(task, args, kwargs, key, queue)
            found = "found none" if not matches else f"found {len(matches)}"
            raise AssertionError(f"expected one message {wanted}, {found}; {self._listing()}")
        return matches[0]

    def refute_enqueued(
        self,
        task: TaskFunction[..., Any] | str,
        *,
        args: list[Any] | None = None,
        kwargs: dict[str, Any] | None = None,
        key: str | None = None,
        queue: str | None = None,
    ) -> None:
        """Fail, naming what was enqueued, if a message like that is stored."""
        if self._matching(task, args, kwargs, key, queue):
            wanted = _describe_wanted(task, args, kwargs, key, queue)
            raise AssertionError(f"expected no message {wanted}; {self._listing()}")

    def _matching(
        self,
        task: TaskFunction[..., Any] | str,
        args: list[Any] | None,
        kwargs: dict[str, Any] | None,
        key: str | None,
        queue: str | None,
    ) -> list[ScheduledMessage]:
        def fits(found: ScheduledMessage) -> bool:
            message = found.message
            return (
                (args is None or message.args == list(args))
                and (kwargs is None or message.kwargs == dict(kwargs))
                and (key is None or message.key == key)
            )

        return [found for found in self.enqueued(task, queue) if fits(found)]

    def _listing(self) -> str:
        stored = self.enqueued()
        if not stored:
            return "nothing is enqueued"
        lines = [_describe(found.message) for found in stored]
        return "enqueued:\n  " + "\n  ".join(lines)


def isolated(
    app: App,
    url: str | None = None,
    start_ms: int | None = None,
    mode: Literal["manual", "inline"] = "manual",
) -> Isolated:
    """``app`` on a fresh backend until the returned ``Isolated`` is closed (a ``with``
    block): see ``Isolated``."""
    return Isolated(app, url, start_ms, mode)


def _describe(message: Message) -> str:
    parts = [message.task.rsplit(".", 1)[-1], f"args={message.args}"]
    if message.kwargs:
        parts.append(f"kwargs={message.kwargs}")
    if message.key is not None:
        parts.append(f"key={message.key!r}")
    parts.append(f"queue={message.queue!r}")
    return " ".join(parts)


def _describe_wanted(
    task: TaskFunction[..., Any] | str,
    args: list[Any] | None,
    kwargs: dict[str, Any] | None,
    key: str | None,
    queue: str | None,
) -> str:
    name = task if isinstance(task, str) else task.name
    given = {"args": args, "kwargs": kwargs, "key": key, "queue": queue}
    shown = " ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    return f"of {name.rsplit('.', 1)[-1]}" + (f" with {shown}" if shown else "")


#: what the pytest fixture hands a test: call it with an app (and optionally a URL)
IsolateFixture = Callable[..., Isolated]
