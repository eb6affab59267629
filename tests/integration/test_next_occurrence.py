"""A recurring chain's next occurrence written from its stored body (``reencode``, the
worker's path) is the message a copy of the decoded model would store, over triggers,
time zones, late runs, failed runs and the fields a schedule can carry."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

from tickwork.scheduler import App, Message
from tickwork.scheduler.clock import ManualClock
from tickwork.scheduler.model.message import reencode
from tickwork.triggers import Cron, Misfire, Repeating

_START = 1_800_000_000_000


def _stored(app: App, message_id: str) -> tuple[Message, bytes]:
    stored = app.backend.messages.get(message_id)
    assert stored is not None
    return Message.decode(stored.envelope.body), stored.envelope.body


def test_a_next_occurrence_from_the_body_is_the_one_from_the_model(sqlite_url: str) -> None:
    clock = ManualClock(_START)
    app = App(sqlite_url, clock=clock)

    @app.task(concurrency_limit=2, limit_key="customer", fair_key="customer", priority=3)
    def sync(customer: str, n: int = 0) -> None: ...

    triggers: list[Any] = [
        Repeating(interval=timedelta(seconds=7)),
        Repeating(interval=timedelta(seconds=7), misfire=Misfire.CATCH_UP),
        Cron(expr="*/5 * * * *", tz="Europe/Paris"),
        Cron(expr="30 2 * * *", tz="America/Santiago", misfire=Misfire.COALESCE),
    ]
    ids = [
        sync.schedule(
            args=("acme",),
            kwargs={"n": i},
            trigger=trigger,
            key=f"s{i}",
            headers={"team": "billing"} if i % 2 else None,
        )
        for i, trigger in enumerate(triggers)
    ]
    checked = 0
    for message_id, late_ms, succeeded in itertools.product(
        ids, (0, 3_000, 3_600_000 * 30), (True, False)
    ):
        message, body = _stored(app, message_id)
        for _ in range(3):  # a chain of occurrences, each written from the last one's body
            now = _START + late_ms
            model, model_misses = app.builder.following_run(message, now, succeeded)
            fast, fast_misses = app.builder.following_run(message, now, succeeded, body=body)
            assert model is not None and fast is not None
            assert fast._replace(body=b"") == model._replace(body=b"")
            assert fast_misses == model_misses
            assert Message.decode(fast.body) == Message.decode(model.body)
            assert len(fast.body) <= len(model.body)
            message, body = Message.decode(fast.body), fast.body
            checked += 1
    assert checked == len(ids) * 3 * 2 * 3


def test_reencode_leaves_out_what_is_at_its_default() -> None:
    body = (
        b'{"id":"a","queue":"q","task":"t","chain":"c","occurrence":4,'
        b'"scheduled_at":1800000000000,"misfires":2,"last_success_at":1800000000000}'
    )
    changed = reencode(body, {"id": "c", "occurrence": 0, "misfires": 0, "last_success_at": None})
    assert changed == b'{"id":"c","queue":"q","task":"t","scheduled_at":1800000000000}'
