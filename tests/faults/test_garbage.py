"""Garbage in storage, on every backend: bodies that are not messages (random bytes, JSON
of the wrong shape), messages naming a task nobody registered, and messages whose
arguments do not fit their task, generated with hypothesis and stored as raw bytes
through the backend's own ``enqueue`` (which stores a body as given, as a foreign
producer's would be), between good messages. Each bad one is poisoned once with its
reason; the worker keeps running; every good one runs once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import running, wait_for
from tickwork.scheduler import App
from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.model.message import Message

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
not_json = st.binary(max_size=120).filter(lambda b: not _parses(b))
wrong_shape = json_values.map(lambda value: json.dumps(value).encode())
task_names = st.text(min_size=1, max_size=30).filter(lambda name: name != "tests.nothing")
misfit_args = st.tuples(st.lists(json_values, max_size=3), st.dictionaries(st.text(), json_values))
misfit_args = misfit_args.filter(lambda pair: bool(pair[0] or pair[1]))  # nothing() takes none

# one kind of garbage, with the poison reason it must get
garbage = st.one_of(
    not_json.map(lambda body: ("undecodable", body)),
    wrong_shape.map(lambda body: ("undecodable", body)),
    task_names.map(lambda name: ("unknown_task", name)),
    misfit_args.map(lambda pair: ("invalid", pair)),
)


@pytest.fixture(params=BACKEND_NAMES)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    application = App(backend_url(request.param, tmp_path))
    yield application
    application.close()


def _parses(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:
        return False
    return True


@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,  # the same examples every run: a failure here is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(items=st.lists(garbage, min_size=5, max_size=25))
def test_garbage_is_poisoned_with_its_reason_and_good_messages_run(
    app: App, items: list[tuple[str, Any]]
) -> None:
    nothing, good = _tasks(app)
    run = uuid.uuid4().hex[:8]  # examples share the app: each counts its own messages
    template = Message.decode(app.build(nothing.call())[1].body)  # built, not stored
    expected: dict[str, str] = {}
    goods: list[str] = []
    envelopes: list[Envelope] = []
    for index, (reason, what) in enumerate(items):
        message_id = f"bad-{run}-{index}"
        expected[message_id] = reason
        if reason == "undecodable":
            envelopes.append(
                Envelope(message_id, "default", None, 0, app.clock.now_ms(), 5000, what)
            )
        else:
            update = {"id": message_id}
            update |= (
                {"task": what} if reason == "unknown_task" else {"args": what[0], "kwargs": what[1]}
            )
            envelopes.append(template.model_copy(update=update).envelope(app.clock.now_ms()))
        goods.append(f"{run}-{index}")  # a good message after each bad one
    app.backend.messages.enqueue(envelopes)
    for n in goods:
        good.delay(n)
    with running(app, unknown_task_grace_s=0.0) as worker:  # unknown: poisoned at once
        wait_for(lambda: _ran(run) == sorted(goods) and _poisoned(app, run) == len(items), 30)
        assert not worker.stopping  # it kept running through the garbage
    reasons = {
        r.envelope.id: r.failure.reason
        for r in app.backend.poison.list(limit=1000)
        if r.envelope.id.startswith(f"bad-{run}-")
    }
    assert reasons == expected
    assert _ran(run) == sorted(goods)  # each good message ran once


RAN: list[str] = []  # what tests.good ran, in every example


def _tasks(app: App) -> tuple[Any, Any]:
    """The two tasks, registered on the first example's visit to ``app``."""
    if "tests.nothing" not in app.tasks:

        @app.task(name="tests.nothing")
        def nothing() -> None: ...

        @app.task(name="tests.good")
        def good(n: str) -> None:
            RAN.append(n)

    return app.tasks["tests.nothing"], app.tasks["tests.good"]


def _ran(run: str) -> list[str]:
    return sorted(n for n in RAN if n.startswith(f"{run}-"))


def _poisoned(app: App, run: str) -> int:
    return sum(r.envelope.id.startswith(f"bad-{run}-") for r in app.backend.poison.list(limit=1000))


@pytest.mark.parametrize("record", [b"garbage", b"", b"1|2|x|0|", b"0|60000|0|99|short"])
def test_a_malformed_record_in_redis_is_poisoned_and_loses_nothing_around_it(
    record: bytes, tmp_path: Path
) -> None:
    """A record written below the backend's interface (straight into a shard's message
    hash and ready set, as a broken tool or a partial restore might leave it): the claim
    that meets it still leases everything else it took, and the worker poisons it."""
    from tickwork.scheduler.backends.redis import RedisBackend

    app = App(backend_url("redis", tmp_path))
    _, good = _tasks(app)
    run = uuid.uuid4().hex[:8]
    goods = [f"{run}-{n}" for n in range(20)]
    for n in goods[:10]:
        good.delay(n)
    backend = app.backend
    assert isinstance(backend, RedisBackend)
    messages, ready = backend.store.shard_keys("default", 0)[:3:2]
    backend.store.client.hset(messages, f"bad-{run}-0", record)
    backend.store.client.zadd(ready, {f"bad-{run}-0": 0})
    for n in goods[10:]:
        good.delay(n)
    with running(app, unknown_task_grace_s=0.0) as worker:  # unknown: poisoned at once
        wait_for(lambda: _ran(run) == sorted(goods) and _poisoned(app, run) == 1, 30)
        assert not worker.stopping
    (poisoned,) = [r for r in app.backend.poison.list() if r.envelope.id == f"bad-{run}-0"]
    assert poisoned.failure.reason == "undecodable"
    app.close()


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("priority", "'high'"),
        ("due_ms", "'soon'"),
        ("timeout_ms", "'long'"),
        ("timeout_ms", "-5"),
        ("key", "x'00ff'"),  # a BLOB (42 would be stored as the text '42')
        ("body", "3.5"),
        ("body", "CAST(body AS TEXT)"),  # the message itself, as TEXT: it runs
    ],
)
def test_a_malformed_row_in_sqlite_is_poisoned_and_loses_nothing_around_it(
    column: str, value: str, tmp_path: Path
) -> None:
    """A row changed below the backend's interface (SQLite stores any type in any
    column): the claim that meets it still leases the rest, and the worker poisons it
    as undecodable, saying which column holds what, its body kept as stored."""
    import sqlite3

    url = backend_url("sqlite", tmp_path)
    app = App(url)
    _, good = _tasks(app)
    run = uuid.uuid4().hex[:8]
    goods, bad = _between_goods(good, run)
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        db.execute(f"UPDATE messages SET {column} = {value} WHERE id = ?", (bad,))
    runs = column == "body" and value.startswith("CAST")
    with running(app) as worker:
        wait_for(lambda: len(_ran(run)) == 20 + runs and _poisoned_id(app, bad) != runs, 30)
        assert not worker.stopping
    assert _ran(run) == sorted(goods + [f"{run}-bad"] * runs)  # each ran once
    if not runs:
        (poisoned,) = [r for r in app.backend.poison.list() if r.envelope.id == bad]
        assert poisoned.failure.reason == "undecodable"
        assert poisoned.failure.message.startswith(f"malformed row: {column} holds ")
    app.close()


def _between_goods(good: Any, run: str) -> tuple[list[str], str]:
    """Ten good runs, one more (the id returned: the test then spoils its row), ten
    more; the good ones' arguments."""
    goods = [f"{run}-{n}" for n in range(20)]
    for n in goods[:10]:
        good.delay(n)
    bad = str(good.delay(f"{run}-bad"))
    for n in goods[10:]:
        good.delay(n)
    return goods, bad


def _poisoned_id(app: App, message_id: str) -> bool:
    return any(r.envelope.id == message_id for r in app.backend.poison.list(limit=1000))


@pytest.mark.parametrize(
    ("column", "value", "says"),
    [
        ("priority", None, "priority is null"),
        ("due_ms", None, "due_ms is null"),
        ("timeout_ms", None, "timeout_ms is null"),
        ("timeout_ms", -5, "timeout_ms holds -5"),
        ("body", None, "body is null"),
    ],
)
def test_a_malformed_row_in_cassandra_is_poisoned_and_loses_nothing_around_it(
    column: str, value: int | None, says: str, tmp_path: Path
) -> None:
    """A pending row changed below the backend's interface (Cassandra has no NOT NULL):
    the claim that meets it still leases the rest, and the worker poisons it as
    undecodable, saying what is wrong."""
    from tickwork.scheduler.backends.cassandra import CassandraBackend

    app = App(backend_url("cassandra", tmp_path))
    backend = app.backend
    assert isinstance(backend, CassandraBackend)
    _, good = _tasks(app)
    run = uuid.uuid4().hex[:8]
    goods, bad = _between_goods(good, run)
    session, keyspace = (
        backend.store.session,
        backend.store.ks,
    )  # below the interface (None is null)
    (where,) = session.execute(
        f"SELECT bucket, shard, ready_ms FROM {keyspace}.message_index "
        "WHERE queue = %s AND id = %s",
        ("default", bad),
    )
    session.execute(
        f"UPDATE {keyspace}.queue_messages SET {column} = %s WHERE queue = %s AND bucket = %s "
        "AND shard = %s AND ready_ms = %s AND id = %s",
        (value, "default", where.bucket, where.shard, where.ready_ms, bad),
    )
    with running(app) as worker:
        wait_for(lambda: len(_ran(run)) == 20 and _poisoned_id(app, bad), 60)
        assert not worker.stopping
    assert _ran(run) == sorted(goods)  # each ran once, and the bad one did not
    (poisoned,) = [r for r in app.backend.poison.list() if r.envelope.id == bad]
    assert poisoned.failure.reason == "undecodable"
    assert poisoned.failure.message == f"malformed row: {says}"
    app.close()
