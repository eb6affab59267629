"""Encryption at rest on every backend: a message's arguments, what its run returned,
why a run failed and its history are stored encrypted (read through the backend without the key, no
byte of them is plain), while keys, scheduling and workers work as before; keys rotate
(the newest encrypts, every one decrypts); an app without the key gets one clear error
and loses nothing."""

from __future__ import annotations

import logging

import pytest
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, DecodeError, RetryPolicy, open_backend
from tickwork.scheduler.backends.codec import UNREADABLE
from tickwork.scheduler.encryption import MAGIC, Encryption
from tickwork.scheduler.errors import ConfigurationError
from tickwork.scheduler.schedules.ledger import message_subject
from tickwork.triggers import Cron

SECRET = "SECRET-4521"


def _encrypted_app(app: App, *keys: str) -> App:
    return App(app.settings.backend, hooks=[Encryption(list(keys))])


def test_what_is_stored_is_encrypted_and_runs_as_before(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tickwork")
    key = Encryption.new_key()
    secure = _encrypted_app(app, key)

    @secure.task(keep_result=True)
    def echo(text: str) -> str:
        return f"{text} and back"

    @secure.task(retry=RetryPolicy(retries=0), history=True)
    def fails(text: str) -> None:
        raise ValueError(f"refused {text}")

    echo.schedule(args=(SECRET,), trigger=Cron("0 9 * * *"), key="daily")
    done = echo.delay(SECRET)
    failed = fails.delay(SECRET)
    with running(secure):
        wait_for(lambda: done.status().value == "succeeded", timeout_s=30)
        wait_for(lambda: len(secure.backend.poison.list()) == 1, timeout_s=30)
    # through the app (its key): everything reads as before
    assert done.result() == f"{SECRET} and back"
    assert secure.get(key="daily").message.args == [SECRET]  # type: ignore[union-attr]
    (poisoned,) = secure.backend.poison.list()
    assert poisoned.failure.message == f"refused {SECRET}" and poisoned.envelope.id == failed
    (attempt,) = secure.run_history(failed)  # its history too
    assert attempt.error == f"ValueError: refused {SECRET}"
    # in the store, read without the key: nothing of it is plain
    raw = open_backend(app.settings.backend)
    try:
        stored = raw.messages.get_by_key("default", "daily")
        assert stored is not None and stored.envelope.key == "daily", "the envelope stays clear"
        assert (
            stored.envelope.body.startswith(MAGIC) and SECRET.encode() not in stored.envelope.body
        )
        (record,) = raw.results.get([done]).values()
        assert record.startswith(MAGIC) and SECRET.encode() not in record
        (raw_poisoned,) = raw.poison.list()
        assert SECRET not in raw_poisoned.failure.message + raw_poisoned.failure.traceback
        assert SECRET.encode() not in raw_poisoned.envelope.body
        (history,) = raw.ledger.read("default", message_subject(failed))
        assert history.startswith(MAGIC) and SECRET.encode() not in history
    finally:
        raw.close()
    # an app without the key: one clear error, the schedule left out of its list, nothing lost
    keyless = App(app.settings.backend)
    with pytest.raises(DecodeError, match="no key for it"):
        keyless.get(key="daily")
    assert keyless.schedules.list() == []
    page = TestClient(create_dashboard(keyless)).get("/poison").text
    assert UNREADABLE in page and SECRET not in page
    assert secure.schedules.list()[0].key == "daily"
    # nor does the worker's log hold the error text in clear
    assert "ValueError: (not logged: error texts are encrypted)" in caplog.text
    assert SECRET not in caplog.text


def test_keys_rotate_without_downtime(app: App) -> None:
    old, new = Encryption.new_key(), Encryption.new_key()
    before = _encrypted_app(app, old)
    ran: list[str] = []

    @before.task
    def note(text: str) -> None:
        ran.append(text)

    note.delay("written with the old key")
    after = _encrypted_app(app, new, old)  # the new key first, the old one still read
    after.include(note)
    after.enqueue(note.call("written with the new key"))
    with running(after):
        wait_for(lambda: len(ran) == 2, timeout_s=30)
    assert sorted(ran) == ["written with the new key", "written with the old key"]
    with pytest.raises(ConfigurationError, match="64 bytes"):
        Encryption(["c2hvcnQ="])
    with pytest.raises(ConfigurationError, match="at least one key"):
        Encryption([])
