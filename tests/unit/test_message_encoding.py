"""The one body form: what every enqueue writes without building a model
(``encode_fields``) is what the model writes (``Message.encode``), and decodes to it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.model.message import Message, encode_fields


def _fields(**changes: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": "m1",
        "queue": "q",
        "task": "t",
        "chain": "m1",
        "scheduled_at": datetime(2026, 11, 25, 12, 0, 0, 431000, tzinfo=UTC),
        "enqueued_at": datetime(2026, 11, 25, 12, 0, 0, 431000, tzinfo=UTC),
        "args": ["x" * 100],
        "kwargs": {},
        "key": None,
        "priority": 0,
        "trigger": None,
        "occurrence": 0,
        "max_attempts": 1,
        "timeout_s": 300.0,
        "headers": None,
        "misfires": 0,
    }
    fields.update(changes)
    return fields


def _model(fields: dict[str, Any]) -> Message:
    kept = {k: v for k, v in fields.items() if v is not None and k not in ("headers",)}
    return Message(**kept)


def test_a_one_off_body_leaves_out_its_chain_and_enqueue_time_and_writes_ms() -> None:
    fields = _fields()
    compact = encode_fields(**fields)
    assert compact == (
        b'{"id":"m1","queue":"q","task":"t","args":["' + b"x" * 100 + b'"],'
        b'"scheduled_at":1795608000431}'
    )
    assert _model(fields).encode() == compact, "the model writes the same form"
    assert Message.decode(compact) == _model(fields)


def test_times_round_trip_exactly_whatever_their_precision() -> None:
    rng = random.Random(7)
    base = datetime(1970, 1, 1, tzinfo=UTC)
    samples = [to_datetime(rng.randrange(0, 4_000_000_000_000)) for _ in range(2000)]
    samples += [
        base,  # before the ms form applies: stored as text
        base + timedelta(milliseconds=20_000_000_000),
        base + timedelta(milliseconds=20_000_000_001),
        datetime(2026, 3, 29, 1, 0, 0, 123456, tzinfo=UTC),  # microseconds: stored as text
        datetime(2100, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
    ]
    for at in samples:
        later = at + timedelta(milliseconds=rng.randrange(1, 10_000))
        fields = _fields(scheduled_at=later, enqueued_at=at, chain="other")
        message = Message.decode(encode_fields(**fields))
        assert (message.scheduled_at, message.enqueued_at) == (later, at), at
        assert message.chain == "other" and message.scheduled_at.tzinfo is not None


def test_a_stored_trigger_is_validated_once_and_shared_and_a_bad_one_refused_each_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tickwork.scheduler.errors import DecodeError
    from tickwork.scheduler.model import message as message_module

    cache: dict[bytes, Any] = {}
    monkeypatch.setattr(message_module, "_TRIGGERS", cache)
    body = (
        b'{"id":"m1","queue":"q","task":"t","scheduled_at":1800000000000,'
        b'"trigger":{"kind":"cron","expr":"*/5 * * * *","tz":"Europe/Paris"}}'
    )
    first, second = Message.decode(body), Message.decode(body)
    assert first.trigger is not None and first.trigger is second.trigger
    assert first == Message.model_validate(first.model_dump())  # the same as validated anew
    known = len(cache)
    bad = body.replace(b'"Europe/Paris"', b'"Mars/Olympus"')
    for _ in range(2):
        with pytest.raises(DecodeError, match="unknown timezone"):
            Message.decode(bad)
    assert len(cache) == known, "a refusal is not remembered"
    monkeypatch.setattr(message_module, "_TRIGGERS_MOST", 3)
    for minute in range(10):  # bounded: forgotten in bulk when full
        Message.decode(body.replace(b"*/5", b"%d" % minute))
    assert 0 < len(cache) <= 3


def test_a_body_that_only_mentions_then_z_in_its_arguments_decodes_as_it_is() -> None:
    body = b'{"id":"m1","queue":"q","task":"t","args":["then_z"],"scheduled_at":1800000000000}'
    message = Message.decode(body)
    assert message.args == ["then_z"] and message.then == [] and message.chain == "m1"
    assert message.enqueued_at == message.scheduled_at == to_datetime(1_800_000_000_000)


def test_a_trigger_given_as_a_dict_holding_any_object_is_validated_as_before() -> None:
    class Calendar:  # what the holidays package's calendars answer: not JSON's
        country, subdivision = "FR", None

    trigger = {"kind": "cron", "expr": "0 9 * * *", "exclude": {"holidays": Calendar()}}
    fields = {"id": "m1", "queue": "q", "task": "t", "scheduled_at": 1_800_000_000_000}
    message = Message.model_validate({**fields, "trigger": trigger})
    assert message.trigger is not None and message.trigger.exclude is not None
    assert message.trigger.exclude.holidays == "FR"
