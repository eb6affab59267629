"""Django's tasks framework on tickwork (``tickwork.django.TickworkBackend``), with the
real Django (5.2 with the ``django_tasks`` backport; Django 6's own ``django.tasks`` in
``make django6``), on SQLite, PostgreSQL and Redis: Django's
``@task`` functions enqueue through tickwork, run on a tickwork worker, and read back
with ``get_result`` in Django's statuses."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import django
import pytest

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.django_site.settings")
django.setup()

from django.utils import timezone  # noqa: E402

from tests.support.backends import backend_url  # noqa: E402
from tests.support.django_site.shop import tasks  # noqa: E402
from tests.support.helpers import running, wait_for  # noqa: E402
from tickwork.django import get_app  # noqa: E402
from tickwork.django.backend import TickworkBackend  # noqa: E402
from tickwork.django.compat import (  # noqa: E402
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from tickwork.scheduler import App  # noqa: E402
from tickwork.workers import Worker, WorkerConfig  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    """The project's app, on each backend in turn."""
    project_app = get_app()
    project_app.use_backend(backend_url(request.param, tmp_path))
    yield project_app
    project_app.close()


def _run_all(app: App) -> None:
    Worker(
        app,
        WorkerConfig(
            queues=("default", "emails"), burst=True, poll_interval_s=0.05, lookahead_ms=0
        ),
    ).run()


def test_the_backend_is_tickwork_and_says_what_it_supports() -> None:
    backend = task_backends["default"]
    assert isinstance(backend, TickworkBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority


def test_a_task_enqueues_runs_and_reads_back(app: App) -> None:
    seen: list[tuple[str, str, Any]] = []

    def record(signal: str) -> Any:
        def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
            seen.append((signal, task_result.id, task_result.status))

        return receiver

    receivers = [record("enqueued"), record("started"), record("finished")]
    for signal, receiver in zip(
        (task_enqueued, task_started, task_finished), receivers, strict=True
    ):
        signal.connect(receiver)
    try:
        result = tasks.add.enqueue(2, 3)
        assert result.status == TaskResultStatus.READY and result.id
        assert result.enqueued_at is not None and result.args == [2, 3]
        ready = tasks.add.get_result(result.id)
        assert ready.status == TaskResultStatus.READY and ready.args == [2, 3]
        _run_all(app)
        done = tasks.add.get_result(result.id)
    finally:
        for signal, receiver in zip(
            (task_enqueued, task_started, task_finished), receivers, strict=True
        ):
            signal.disconnect(receiver)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 5 and done.args == [2, 3] and done.kwargs == {}
    assert done.enqueued_at is not None and done.started_at is not None
    assert done.finished_at is not None and done.finished_at >= done.started_at
    assert done.attempts == 1 and len(done.worker_ids) == 1 and done.errors == []
    assert done.task.func is tasks.add.func
    result.refresh()  # the same object, refreshed in place
    refreshed: Any = result
    assert refreshed.status == TaskResultStatus.SUCCESSFUL and refreshed.return_value == 5
    assert [s for s, _, _ in seen] == ["enqueued", "started", "finished"]
    assert seen[-1][2] == TaskResultStatus.SUCCESSFUL


def test_queue_priority_and_run_after_reach_the_message(app: App) -> None:
    later = timezone.now() + timedelta(hours=1)
    result = tasks.send_welcome.using(run_after=later).enqueue("ada@example.com")
    stored = app.get(id=result.id, queue="emails")
    assert stored is not None
    assert stored.message.queue == "emails" and stored.message.priority == 10
    assert abs((stored.due_at - later).total_seconds()) < 0.01
    read = tasks.send_welcome.get_result(result.id)
    assert read.status == TaskResultStatus.READY and read.task.queue_name == "emails"
    _run_all(app)
    assert tasks.send_welcome.get_result(result.id).status == TaskResultStatus.READY


def test_a_failing_task_is_failed_with_its_error(app: App) -> None:
    result = tasks.charge.enqueue(42)
    _run_all(app)
    failed = tasks.charge.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    (error,) = failed.errors
    assert error.exception_class is tasks.PaymentRefused
    assert "card declined for 42" in error.traceback and "Traceback" in error.traceback
    assert failed.args == [42] and failed.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        _ = failed.return_value


def test_an_async_task_with_its_context(app: App) -> None:
    async def enqueue() -> Any:
        return await tasks.attempt_of.aenqueue("x")

    result = asyncio.run(enqueue())
    _run_all(app)
    done: Any = tasks.attempt_of.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == ["x", 1, result.id]


def test_what_is_not_a_django_task_does_not_exist(app: App) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result("no-such-id")
    handle = tasks.which_connection.delay()
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(str(handle))
    lookalike = tasks.lookalike.delay()
    _run_all(app)
    assert app.result(str(lookalike)).value["task"].endswith(".add")
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(str(lookalike))


def test_bad_input_is_refused_and_writes_nothing(app: App) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.add.enqueue(object(), 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidTaskError, match="Queue 'other'"):
        tasks.add.using(queue_name="other").enqueue(1, 2)
    assert all(s.ready + s.scheduled == 0 for s in app.backend.queues.stats())


def test_database_connections_are_renewed_around_each_run(app: App) -> None:
    """With ``CONN_MAX_AGE = 0``, as in a request, each run gets a fresh connection."""
    tasks.CONNECTIONS.clear()
    for _ in range(3):
        tasks.which_connection.delay()
    with running(app, concurrency=1):
        wait_for(lambda: len(tasks.CONNECTIONS) == 3)
    assert len({id(c) for c in tasks.CONNECTIONS}) == 3


def test_the_backends_options_are_checked(app: App) -> None:
    with pytest.raises(InvalidTaskError, match="unknown option"):
        TickworkBackend("other", {"OPTIONS": {"URL": "redis://elsewhere"}})
    elsewhere = TickworkBackend("other", {"OPTIONS": {"url": "redis://elsewhere:6379/0"}})
    (error,) = list(elsewhere.check())
    assert error.id == "tickwork.E001" and "differs from the project's" in error.msg
    same = TickworkBackend("same", {"OPTIONS": {"url": app.settings.backend}})
    assert list(same.check()) == []
