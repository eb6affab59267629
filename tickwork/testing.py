"""Testing code that enqueues: an app isolated on a fresh backend, drained in-process,
with assertions that say what *was* enqueued.

::

    from tickwork.testing import isolated, run_task

    def test_signup_sends_a_welcome_mail() -> None:
        with isolated(app) as tw:          # a fresh SQLite file on a clock the test moves
            signup("ada@example.com")      # code under test: calls send_welcome.delay(...)
            tw.assert_enqueued(send_welcome, args=["ada@example.com"])
            done = tw.drain()              # run what is due, chains and callbacks included
            assert done.succeeded == 1

    def test_send_welcome_renders() -> None:
        assert run_task(send_welcome, "ada@example.com") == "sent"

Everything goes through the same path as production: arguments validated against the
task's signature and encoded to JSON at enqueue, decoded by a real worker (a burst
worker in the test's process), results and retries by the task's options. The pytest
fixture ``tickwork_isolated`` (``tickwork.pytest_plugin``, registered when tickwork is
installed) does the same for a test and restores the app after it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

from pydantic_core import from_json, to_json

from scheduler import App
from scheduler.backends.records import Failure
from scheduler.clock import Clock, ManualClock
from scheduler.hooks import Hook, Hooks
from scheduler.model.message import Message, ScheduledMessage
from scheduler.model.tasks import TaskFunction
from scheduler.runs.context import RunContext, RunInfo, enter, leave
from scheduler.runs.results import encode_value
from workers import Worker, WorkerConfig


@dataclass
class Drained:
    """What one ``drain`` ran: how many runs ended each way, and each run."""

    outcomes: Counter[str] = field(default_factory=Counter)
    runs: list[tuple[RunInfo, str]] = field(default_factory=list)
    #: why each run that went to the poison queue failed
    failures: list[tuple[RunInfo, Failure]] = field(default_factory=list)
    #: the delay of each retry scheduled
    retry_delays_s: list[float] = field(default_factory=list)

    @property
    def succeeded(self) -> int:
        return self.outcomes["succeeded"]

    @property
    def retried(self) -> int:
        return self.outcomes["retried"]

    @property
    def poisoned(self) -> int:
        return self.outcomes["poisoned"]

    @property
    def aborted(self) -> int:
        return self.outcomes["aborted"]

    def of(self, task: TaskFunction[..., Any] | str) -> list[str]:
        """The outcomes of ``task``'s runs, in the order they were settled."""
        name = task if isinstance(task, str) else task.name
        return [outcome for run, outcome in self.runs if run.task == name]

    def add(self, other: Drained) -> None:
        self.outcomes.update(other.outcomes)
        self.runs += other.runs
        self.failures += other.failures
        self.retry_delays_s += other.retry_delays_s


class TaskFailed(Exception):
    """A task run inline failed for good (it went to the poison queue, as a worker would
    have put it): ``failure`` says why, ``run`` which message it was."""

    def __init__(self, run: RunInfo, failure: Failure) -> None:
        super().__init__(
            f"{run.task} (message {run.message_id}) failed for good after {run.attempt} "
            f"attempt(s): {failure.error_type}: {failure.message}"
        )
        self.run = run
        self.failure = failure


class _Recorder(Hook):
    """Every body the app writes (enqueues, next occurrences, chain steps), as written:
    ``enqueued`` keeps those still stored. An identity codec: bodies are unchanged."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}  # message id -> body, in the order written
        self._lock = threading.Lock()

    def encode_body(self, body: bytes) -> bytes:
        message_id = from_json(body).get("id")
        if isinstance(message_id, str):
            with self._lock:
                self.bodies.pop(message_id, None)
                self.bodies[message_id] = body
        return body


class _Outcomes(Hook):
    def __init__(self) -> None:
        self.drained: Drained | None = None
        self._lock = threading.Lock()

    def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
        with self._lock:
            if self.drained is not None:
                self.drained.outcomes[outcome] += 1
                self.drained.runs.append((run, outcome))

    def on_retry(self, run: RunInfo, error: str, delay_s: float) -> None:
        with self._lock:
            if self.drained is not None:
                self.drained.retry_delays_s.append(delay_s)

    def on_poison(self, run: RunInfo, failure: Failure) -> None:
        with self._lock:
            if self.drained is not None:
                self.drained.failures.append((run, failure))


class Isolated:
    """``app`` on a fresh backend for the length of a block or a test: by default a
    temporary SQLite file on a ``ManualClock`` (``advance`` moves it), or the backend of
    ``url`` (on its own clock). The app's backend, clock and hooks are restored after.

    ``mode``: ``"manual"`` (the default) stores what is enqueued and runs nothing until
    ``drain``; ``"inline"`` runs each enqueued message at once, in the caller's thread,
    through a worker (arguments validated, JSON both ways, retries followed by moving
    the clock, the poison decision, results kept), and raises ``TaskFailed`` from the
    enqueuing call when it fails for good. ``inline()`` and ``manual()`` switch for a
    block."""

    def __init__(
        self,
        app: App,
        url: str | None = None,
        start_ms: int | None = None,
        mode: Literal["manual", "inline"] = "manual",
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
            self.clock = ManualClock() if start_ms is None else ManualClock(start_ms)
        self._recorder = _Recorder()
        self._outcomes = _Outcomes()
        app.hooks = Hooks([*app.hooks, self._recorder, self._outcomes])
        app.use_backend(url, clock=self.clock)
        self._patched = _InlineEntries(self)

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
        ``TaskFailed`` for a run that failed for good. Not from inside a run (a handler
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
            raise TaskFailed(run, failure)
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


class _InlineEntries:
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


def isolated(
    app: App,
    url: str | None = None,
    start_ms: int | None = None,
    mode: Literal["manual", "inline"] = "manual",
) -> Isolated:
    """``app`` on a fresh backend until the returned ``Isolated`` is closed (a ``with``
    block): see ``Isolated``."""
    return Isolated(app, url, start_ms, mode)


def run_task(task: TaskFunction[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one task the way a worker would, in this thread: its arguments validated and
    through JSON, its ``current_run()`` context, an ``async def`` one awaited on a loop
    of its own, what it returns through JSON; returns that, or raises what it raised. A
    return value a worker could not keep fails here too (``TypeError``)."""
    json_args, json_kwargs = task.arguments.to_json(args, kwargs)
    json_args, json_kwargs = from_json(to_json((json_args, json_kwargs)))
    info = RunInfo(f"test-{task.name}", task.name, task.options.queue, None, 1, True)
    token = enter(RunContext(info))
    try:
        returned = task.run(json_args, json_kwargs)
        if inspect.isawaitable(returned):
            returned = asyncio.run(_awaited(returned))
    finally:
        leave(token)
    max_bytes = task.app.settings.max_payload_bytes if isinstance(task.app, App) else 1 << 20
    return from_json(encode_value(returned, max_bytes))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


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
