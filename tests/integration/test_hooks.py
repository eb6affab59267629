"""Hooks (``scheduler.hooks``) on every backend: a codec that wraps every stored body, and
a hook that counts what happened to each run."""

from __future__ import annotations

import base64
import threading
from collections import Counter
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, Message
from tickwork.scheduler.backends import Envelope, Failure
from tickwork.scheduler.backends.codec import CodedBackend
from tickwork.scheduler.hooks import Hook, Hooks
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.runs.context import RunInfo
from tickwork.triggers import Repeating

PREFIX = b"wrapped:"


class Wrap(Hook):
    """A codec: the body base64-encoded behind a prefix (nothing of it readable)."""

    def encode_body(self, body: bytes) -> bytes:
        return PREFIX + base64.b64encode(body)

    def decode_body(self, body: bytes) -> bytes:
        if not body.startswith(PREFIX):
            raise ValueError("not a wrapped body")
        return base64.b64decode(body[len(PREFIX) :])


class Count(Hook):
    """Counts each step it sees, by outcome."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: Counter[str] = Counter()
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.retries: list[str] = []
        self.poisoned: list[tuple[str, str]] = []

    def before_run(self, run: RunInfo) -> None:
        with self.lock:
            self.started[run.task] += 1

    def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
        assert duration_ms >= 0
        with self.lock:
            self.outcomes[(run.task.rsplit(".", 1)[-1], outcome)] += 1

    def on_retry(self, run: RunInfo, error: str, delay_s: float) -> None:
        with self.lock:
            self.retries.append(error)

    def on_poison(self, run: RunInfo, failure: Failure) -> None:
        with self.lock:
            self.poisoned.append((run.message_id, failure.reason))


def test_a_codec_and_a_counter_run_on_every_backend(app: App) -> None:
    counter = Count()
    app.add_hook(Wrap())
    app.add_hook(counter)
    ran: list[str] = []

    @app.task
    def greet(name: str) -> str:
        ran.append(name)
        return name

    @app.task(retry=RetryPolicy(retries=1, base_s=0.05, jitter=False))
    def flaky() -> None:
        raise RuntimeError("always")

    greet.delay("secret-name")
    greet.schedule(
        args=("tick",),
        trigger=Repeating(interval=timedelta(milliseconds=200), repeat_count=2),
        key="ticks",
    )
    flaky.delay()
    raw = app.backend
    assert isinstance(raw, CodedBackend)
    stored = raw.inner.messages.get_by_key("default", "ticks")
    assert stored is not None and stored.envelope.body.startswith(PREFIX)
    assert b"tick" not in stored.envelope.body, "nothing of the body readable as stored"
    read = app.get(key="ticks")
    assert read is not None and read.message.args == ["tick"], "read back decoded"
    assert [info.key for info in app.schedules.list()] == ["ticks"]
    # a body written below the codec: the worker cannot read it and poisons it
    plain = Envelope("plain", "default", None, 0, app.backend.now_ms(), 60_000, b"{}")
    raw.inner.messages.enqueue([plain])

    with running(app):
        wait_for(lambda: ran.count("tick") == 2 and "secret-name" in ran)
        wait_for(lambda: len(counter.poisoned) == 2)
    assert counter.outcomes[("greet", "succeeded")] == 3
    assert counter.outcomes[("flaky", "retried")] == 1
    assert counter.outcomes[("flaky", "poisoned")] == 1
    assert len(counter.retries) == 1 and "always" in counter.retries[0]
    assert sorted(reason for _, reason in counter.poisoned) == ["exception", "undecodable"]
    assert counter.started[greet.name] == 3
    poisoned = {record.envelope.id: record for record in app.backend.poison.list()}
    assert Message.decode(poisoned[flaky_id(counter)].envelope.body).task == flaky.name
    assert poisoned["plain"].envelope.body == b"{}", "kept as stored"
    for record in raw.inner.poison.list():
        if record.envelope.id != "plain":
            assert record.envelope.body.startswith(PREFIX), "stored wrapped in the poison store"


def flaky_id(counter: Count) -> str:
    (found,) = [mid for mid, reason in counter.poisoned if reason == "exception"]
    return found


def test_a_hook_that_raises_is_logged_and_the_run_is_settled(
    sqlite_app: App, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Hook):
        def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None:
            raise RuntimeError("a bug in a hook")

    sqlite_app.add_hook(Broken())
    ran: list[int] = []

    @sqlite_app.task
    def job(n: int) -> None:
        ran.append(n)

    job.delay(1)
    with running(sqlite_app):
        wait_for(lambda: ran == [1] and sqlite_app.backend.queues.stats()[0].ready == 0)
        wait_for(lambda: "a bug in a hook" in caplog.text)
    (stats,) = sqlite_app.backend.queues.stats()
    assert stats.in_flight == 0 and stats.counters.get("acked") == 1


def test_an_app_without_hooks_has_no_step_and_no_codec(sqlite_app: App) -> None:
    """A step no hook overrides is an empty tuple the worker skips; bodies go to the
    backend itself."""
    assert not isinstance(sqlite_app.backend, CodedBackend)
    hooks = Hooks([Count()])
    assert not hooks.has_codec and len(hooks.after_run) == 1
    only_after = Hooks()

    class AfterOnly(Hook):
        def after_run(self, run: RunInfo, outcome: str, duration_ms: float) -> None: ...

    only_after.add(AfterOnly())
    assert only_after.before_run == () and only_after.on_retry == ()
    assert only_after.on_poison == () and len(only_after.after_run) == 1
    with pytest.raises(TypeError, match="a hook is a tickwork Hook"):
        only_after.add(object())  # type: ignore[arg-type]


def test_codecs_compose_in_order_and_undo_in_reverse() -> None:
    class Suffix(Hook):
        def encode_body(self, body: bytes) -> bytes:
            return body + b"!"

        def decode_body(self, body: bytes) -> bytes:
            assert body.endswith(b"!")
            return body[:-1]

    hooks = Hooks([Wrap(), Suffix()])
    encoded = hooks.encode(b'{"id":"m"}')
    assert encoded.startswith(PREFIX) and encoded.endswith(b"!")
    assert hooks.decode(encoded) == b'{"id":"m"}'


class AroundHandler(Hook):
    """Records, for each run, the threads its handler steps ran in."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def before_handler(self, run: RunInfo) -> None:
        self.seen.append(("before", run.task.rsplit(".", 1)[-1], threading.get_ident()))

    def after_handler(self, run: RunInfo) -> None:
        self.seen.append(("after", run.task.rsplit(".", 1)[-1], threading.get_ident()))


def test_handler_steps_run_around_the_handler_in_its_thread(sqlite_app: App) -> None:
    """``before_handler`` and ``after_handler`` run where the handler runs (a pool thread,
    the worker's event loop), right around it, also when it raises."""
    around = AroundHandler()
    sqlite_app.add_hook(around)
    inside: list[tuple[str, int]] = []

    @sqlite_app.task
    def fine() -> None:
        inside.append(("fine", threading.get_ident()))

    @sqlite_app.task
    async def broken() -> None:
        inside.append(("broken", threading.get_ident()))
        raise RuntimeError("no")

    fine.delay()
    broken.delay()
    with running(sqlite_app):
        wait_for(lambda: len(around.seen) == 4)
    for name, thread in inside:
        assert ("before", name, thread) in around.seen
        assert ("after", name, thread) in around.seen
    order = [(step, name) for step, name, _ in around.seen]
    assert order.index(("before", "fine")) < order.index(("after", "fine"))
    assert order.index(("before", "broken")) < order.index(("after", "broken"))
