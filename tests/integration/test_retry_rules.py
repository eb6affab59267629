"""Retry rules (issue 51, 4): ``retry_on`` and ``dont_retry_on`` exception types per task,
the poison record naming the rule that refused a retry; ``raise Retry(delay)`` to choose
the delay (a 429's Retry-After), not counted against ``retries`` unless ``counts=True``.
On every backend."""

from __future__ import annotations

import pytest

from tests.support.helpers import running, wait_for
from tickwork import App, Retry, current_run
from tickwork.errors import InvalidMessage


def _poison_reasons(app: App) -> dict[str, str]:
    return {r.envelope.id: r.failure.reason for r in app.backend.poison.list()}


def test_dont_retry_on_poisons_at_once_and_names_the_rule(app: App) -> None:
    seen: list[tuple[str, int]] = []

    @app.task(retries=3, dont_retry_on=(ValueError,))
    def parse(kind: str) -> None:
        attempt = current_run().attempt
        seen.append((kind, attempt))
        if kind == "bad":
            raise ValueError("not a number")
        if attempt == 1:
            raise KeyError("flaky")  # retried: not a ValueError

    bad, flaky = parse.delay("bad"), parse.delay("flaky")
    with running(app) as worker:
        wait_for(lambda: worker.stats.poisoned == 1 and worker.stats.acked == 1)
    assert _poison_reasons(app) == {bad: "dont_retry_on"}
    assert sorted(seen) == [("bad", 1), ("flaky", 1), ("flaky", 2)]
    assert app.get(id=flaky) is None


def test_retry_on_retries_only_what_it_names(app: App) -> None:
    seen: list[tuple[str, int]] = []

    @app.task(retries=2, retry_on=(ConnectionError,))
    def fetch(kind: str) -> None:
        attempt = current_run().attempt
        seen.append((kind, attempt))
        if kind == "typo":
            raise TypeError("a bug: never retried")
        if attempt == 1:
            raise ConnectionError("the network: retried")

    typo = fetch.delay("typo")
    fetch.delay("network")
    with running(app) as worker:
        wait_for(lambda: worker.stats.poisoned == 1 and worker.stats.acked == 1)
    assert _poison_reasons(app) == {typo: "retry_on"}
    assert sorted(seen) == [("network", 1), ("network", 2), ("typo", 1)]


def test_a_handler_chooses_its_delay_without_using_its_retries(app: App) -> None:
    attempts: list[int] = []

    @app.task(retries=0)
    def call_api() -> str:
        attempts.append(current_run().attempt)
        if len(attempts) < 3:
            raise Retry(0.2, reason="429: Retry-After 0.2")
        return "ok"

    message = call_api.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 1)
    assert attempts == [1, 1, 1]  # never counted: retries=0 did not poison it
    assert worker.stats.snoozed == 2 and worker.stats.poisoned == 0
    assert app.get(id=message) is None


def test_a_counted_retry_uses_the_retries_then_poisons(app: App) -> None:
    attempts: list[int] = []

    @app.task(retries=1)
    def call_api() -> None:
        attempts.append(current_run().attempt)
        raise Retry(0.1, counts=True, reason="503")

    message = call_api.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.poisoned == 1)
    assert attempts == [1, 2] and worker.stats.retried == 1
    (record,) = app.backend.poison.list()
    assert record.envelope.id == message and "503" in record.failure.message


def test_a_rule_that_is_not_an_exception_class_is_refused(app: App) -> None:
    with pytest.raises(InvalidMessage, match="retry_on takes exception classes"):

        @app.task(retry_on=("ValueError",))  # type: ignore[arg-type]
        def wrong() -> None: ...
