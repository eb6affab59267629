"""The plain call's fast path (``scheduler.producing.plain``) builds exactly what the
general path builds: the same body bytes, the same envelope, the same errors, for every
call shape that takes it; and the calls that need more take the general path."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.scheduler import App, InvalidMessage
from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.producing.plain import is_plain
from tickwork.triggers import Repeating

app = App()


@app.task
def plain(n: int, label: str = "x", flag: bool = False) -> None: ...


@app.task
def typed(when: datetime, items: list[int], ratio: float = 0.5) -> None: ...


@app.task
def loose(*values: Any, **extra: Any) -> None: ...


@app.task(queue="other", retries=2, timeout=12.5, priority=3)
def configured(n: int) -> None: ...


@app.task(concurrency_limit=2)
def limited(n: int) -> None: ...


NOW_MS = 1_795_773_054_659
NOW = to_datetime(NOW_MS)


def _both(call: Call, now_ms: int = NOW_MS) -> tuple[Envelope, Envelope]:
    """(the plain path's envelope, the general path's), the unkeyed general one given the
    plain one's id (a fresh id differs from call to call)."""
    builder = app.builder
    task = builder.registry.lookup(call.task)
    now = to_datetime(now_ms)
    assert is_plain(call, task.options)
    plain_id, fast = builder.build(call, now_ms, now)
    general_id, slow = builder._build_general(call, task, now_ms, now)
    assert fast.id == plain_id and slow.id == general_id
    if plain_id != general_id:  # fresh ids: compare the rest
        slow = slow._replace(id=plain_id, body=slow.body.replace(general_id.encode(), b"", 1))
        fast = fast._replace(body=fast.body.replace(plain_id.encode(), b"", 1))
    return fast, slow


CALLS = [
    plain.call(1),
    plain.call(-5, 'héllo "quoted" \\ \n ✓', flag=True),
    plain.call(n=7),
    plain.call(2).options(key="invoice-1"),
    plain.call(2).options(key='ключ "with" quotes\\'),
    plain.call(3).options(identity='["row", 1]'),
    plain.call(4).options(priority=0),
    plain.call(4).options(priority=-3),
    plain.call(4).options(queue="elsewhere"),
    plain.call(5).options(at=NOW),
    plain.call(5).options(at=NOW + timedelta(seconds=90)),
    plain.call(5).options(at=NOW + timedelta(microseconds=1234)),
    plain.call(5).options(at=datetime(2026, 1, 1, 12, tzinfo=UTC)),
    plain.call(6).options(delay=timedelta(0)),
    plain.call(6).options(delay=timedelta(seconds=1.5)),
    plain.call(6).options(headers={}),
    typed.call(NOW, [1, 2, 3]),
    Call(typed.name, ("2026-11-27T10:00:00.123456+01:00", ["4"]), {"ratio": 2}),  # coerced
    loose.call(1, "two", [3.5, None], {"four": {"five": True}}, extra_key="v"),
    loose.call(),
    configured.call(9),
    configured.call(9).options(key="k", priority=1, queue="q2"),
]


@pytest.mark.parametrize("call", CALLS, ids=[str(i) for i in range(len(CALLS))])
def test_the_plain_path_builds_what_the_general_path_builds(call: Call) -> None:
    fast, slow = _both(call)
    assert fast == slow
    assert Message.decode(fast.body) == Message.decode(slow.body)


def test_a_fresh_id_is_the_body_id() -> None:
    message_id, envelope = app.build(plain.call(1), NOW_MS, NOW)
    assert Message.decode(envelope.body).id == message_id == envelope.id


def test_times_before_the_ms_form_are_encoded_alike() -> None:
    for now_ms in (0, 1_000, 20_000_000_001, 20_000_000_000):
        fast, slow = _both(plain.call(1), now_ms)
        assert fast == slow


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(min_value=-(2**70), max_value=2**70),
    label=st.text(max_size=30),
    key=st.none()  # any text but control characters (the rule of keys)
    | st.text(
        st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=20
    ),
    priority=st.none() | st.integers(min_value=-1000, max_value=1000),
    delay_ms=st.none() | st.integers(min_value=0, max_value=10**9),
)
def test_plain_calls_of_any_values_build_alike(
    n: int, label: str, key: str | None, priority: int | None, delay_ms: int | None
) -> None:
    delay = None if delay_ms is None else timedelta(milliseconds=delay_ms)
    call = plain.call(n, label).options(key=key, priority=priority, delay=delay)
    fast, slow = _both(call)
    assert fast == slow


BAD: list[tuple[Call, str]] = [
    (Call(plain.name, ("not a number",)), "n"),
    (plain.call(1).options(key=""), "key"),
    (plain.call(1).options(priority=5000), "priority"),
    (plain.call(1).options(at=datetime(2026, 1, 1)), "at"),
    (plain.call(1).options(at=NOW, delay=timedelta(1)), "at most one"),
    (plain.call(1).options(delay=timedelta(seconds=-1)), "negative"),
    (plain.call(1).options(delay=-5), "negative"),
    (plain.call(1).options(delay="soon"), "delay must be a timedelta or a number of seconds"),
]


def test_a_delay_in_seconds_is_a_timedelta_of_them() -> None:
    for call in (plain.call(1).options(delay=90), plain.call(1).options(delay=90.0)):
        fast, slow = _both(call)
        assert fast.due_ms == slow.due_ms == NOW_MS + 90_000


@pytest.mark.parametrize(("call", "says"), BAD, ids=[s for _, s in BAD])
def test_bad_plain_calls_fail_alike(call: Call, says: str) -> None:
    builder = app.builder
    task = builder.registry.lookup(call.task)
    errors = []
    for build in (builder.build, lambda *a: builder._build_general(a[0], task, *a[1:])):
        with pytest.raises(InvalidMessage) as caught:
            build(call, NOW_MS, NOW)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and says in errors[0]


def test_calls_that_need_more_take_the_general_path() -> None:
    options = app.builder.registry.lookup(plain.name).options
    needs_more = [
        plain.call(1).options(trigger=Repeating(interval=timedelta(minutes=5))),
        plain.call(1).options(headers={"x-h": "v"}),
        plain.call(1).options(expires=timedelta(minutes=1)),
        plain.call(1).options(then=(plain.call(2),)),
        plain.s(),
    ]
    assert not any(is_plain(call, options) for call in needs_more)
    assert not is_plain(limited.call(1), app.builder.registry.lookup(limited.name).options)


def test_plain_bodies_keep_one_entry_per_task_and_queue() -> None:
    for call in itertools.islice(itertools.cycle(CALLS), 200):
        app.build(call, NOW_MS, NOW)
    assert len(app.builder._plain._parts) <= 6


def test_an_active_span_travels_alike() -> None:
    sdk = pytest.importorskip("opentelemetry.sdk.trace")
    tracer = sdk.TracerProvider().get_tracer("tickwork-test")
    with tracer.start_as_current_span("producer"):
        fast, slow = _both(plain.call(1).options(key="traced"))
    assert fast == slow
    assert "traceparent" in Message.decode(fast.body).headers
