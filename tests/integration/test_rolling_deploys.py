"""Rolling deploys (issue 56): a message for a task a worker does not know waits for a
worker that does. Two apps share one queue, as two versions of one app do during a
deploy: version 1 without the task, version 2 with it. On SQLite and Redis."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.backends import backend_url
from tests.support.helpers import running, wait_for
from tests.support.served import run_tickwork
from tickwork import App, Repeating
from tickwork.scheduler.schedules.ledger import RunOutcome


class Versions:
    """Version 1 and version 2 of one app, on one backend."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.v1, self.v2 = App(url), App(url)
        self.ran: list[int] = []

        @self.v1.task(name="shop.restock")
        def restock_v1() -> None: ...

        @self.v2.task(name="shop.restock")
        def restock_v2() -> None: ...

        @self.v2.task(name="shop.new_report")
        def new_report(n: int) -> None:
            self.ran.append(n)

        self.new_report = new_report

    def poisoned(self) -> list[str]:
        return [record.failure.message for record in self.v1.backend.poison.list()]

    def close(self) -> None:
        self.v1.close()
        self.v2.close()


@pytest.fixture(params=["sqlite", "redis"])
def versions(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Versions]:
    made = Versions(backend_url(request.param, tmp_path))
    yield made
    made.close()


def test_an_old_worker_gives_the_new_task_back_until_a_new_worker_runs_it(
    versions: Versions,
) -> None:
    message = versions.new_report.delay(1)
    with running(versions.v1, unknown_task_grace_s=10.0) as old:
        wait_for(lambda: old.stats.deferred >= 2)  # taken and given back, more than once
        assert versions.poisoned() == []
        assert versions.v1.get(id=message) is not None
        assert old.stats.poisoned == 0 and old.stats.retried == 0
        with running(versions.v2) as new:
            wait_for(lambda: versions.ran == [1])
            wait_for(lambda: versions.v2.get(id=message) is None)
        assert new.stats.acked == 1
    assert versions.ran == [1] and versions.poisoned() == []


def test_with_no_grace_an_old_worker_poisons_it_at_once(versions: Versions) -> None:
    message = versions.new_report.delay(2)
    with running(versions.v1, unknown_task_grace_s=0.0) as old:
        wait_for(lambda: old.stats.poisoned == 1)
    assert old.stats.deferred == 0
    assert versions.poisoned() == ["no task named 'shop.new_report' is registered here"]
    assert versions.v1.get(id=message) is None and versions.ran == []


def test_past_the_grace_it_is_poisoned_saying_how_long_it_waited(versions: Versions) -> None:
    versions.new_report.delay(3)
    with running(versions.v1, unknown_task_grace_s=1.0) as old:
        wait_for(lambda: old.stats.poisoned == 1)
    assert old.stats.deferred >= 1
    (why,) = versions.poisoned()
    assert why.startswith("no task named 'shop.new_report' is registered here (no worker")
    waited = float(why.rsplit("took it in ", 1)[1].split(" s)")[0])
    assert waited >= 1.0, why  # past the grace, however long the machine took
    assert versions.ran == []


def test_a_schedules_ledger_records_the_deferral(
    versions: Versions, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    versions.new_report.schedule(
        args=(4,), key="hourly-report", trigger=Repeating(interval=timedelta(seconds=1))
    )
    with running(versions.v1, unknown_task_grace_s=10.0) as old:
        wait_for(lambda: old.stats.deferred >= 1)
    history = versions.v2.schedules.history("hourly-report")
    assert history[0].outcome is RunOutcome.DEFERRED
    assert "no task named 'shop.new_report' is registered here" in (history[0].error or "")
    # the dead man's check says why the schedule is late, from another directory
    done = run_tickwork(
        tmp_path, clean_env, "--backend", versions.url, "schedules", "check", "--max-late", "0s"
    )
    assert done.returncode == 1, done.stderr
    assert "waiting for a worker that knows its task 'shop.new_report'" in done.stdout


def test_a_renamed_task_runs_the_messages_stored_under_its_old_name(tmp_path: Path) -> None:
    url = backend_url("sqlite", tmp_path)
    with App(url) as before, App(url) as after:

        @before.task(name="billing.send_invoice")
        def send_invoice(customer: str) -> None: ...

        sent: list[str] = []

        @after.task(name="invoices.send", aliases=["billing.send_invoice"])
        def send(customer: str) -> None:
            sent.append(customer)

        stored = send_invoice.delay("ada")
        assert "billing.send_invoice" not in after.tasks  # an alias is not listed
        with running(after):
            wait_for(lambda: sent == ["ada"])
            wait_for(lambda: after.get(id=stored) is None)
