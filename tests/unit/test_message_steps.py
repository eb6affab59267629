"""A chain's later steps in the stored message: inline when short, compressed when long,
and a message stored either way reads back the same."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tickwork.scheduler.errors import DecodeError
from tickwork.scheduler.model.message import PACK_STEPS_OVER, Message, encode_fields
from tickwork.scheduler.model.places import Step

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def _message(steps: int) -> Message:
    then = [Step(task="etl.increment", takes_result=True, queue="q") for _ in range(steps)]
    return Message(
        id="c1",
        queue="q",
        task="etl.start",
        chain="c1",
        scheduled_at=NOW,
        enqueued_at=NOW,
        then=then,
    )


def test_short_steps_stay_inline_and_long_ones_are_packed() -> None:
    short, long = _message(3), _message(1000)
    assert b'"then":[' in short.encode() and b"then_z" not in short.encode()
    body = long.encode()
    assert b"then_z" in body and b'"then":' not in body
    assert len(body) < 4096 < len(_message(1000).model_dump_json()), "1,000 steps pack small"
    assert Message.decode(body) == long
    assert Message.decode(short.encode()) == short


def test_the_bulk_encoder_packs_as_the_model_does() -> None:
    message = _message(200)
    fields = message.model_dump(mode="json", exclude_defaults=True)
    body = encode_fields(
        id="c1",
        queue="q",
        task="etl.start",
        chain="c1",
        scheduled_at=NOW,
        enqueued_at=NOW,
        args=[],
        kwargs={},
        key=None,
        priority=0,
        trigger=None,
        occurrence=0,
        max_attempts=1,
        timeout_s=300.0,
        headers=None,
        misfires=0,
        then=fields["then"],
    )
    assert Message.decode(body) == message and b"then_z" in body
    assert len(fields["then"]) * 40 > PACK_STEPS_OVER


def test_a_message_stored_with_inline_steps_still_reads() -> None:
    old = _message(1000).model_dump_json(exclude_defaults=True).encode()  # the old format
    assert b'"then":[' in old
    assert Message.decode(old) == _message(1000)


def test_garbage_packed_steps_are_one_decode_error() -> None:
    body = _message(1000).encode().replace(b'"then_z":"', b'"then_z":"!!', 1)
    with pytest.raises(DecodeError, match="not a tickwork message"):
        Message.decode(body)
