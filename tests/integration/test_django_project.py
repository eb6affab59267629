"""tickwork in a Django project (``tickwork.django``): enqueue when Django's transaction
commits, the worker started through ``manage.py tickwork`` and ``tickwork worker
--django``, with the test project's settings (``tests.support.django_site``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import django
import pytest

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.django_site.settings")
django.setup()

from django.db import transaction  # noqa: E402

from tests.support.backends import backend_url  # noqa: E402
from tests.support.django_site.shop import tasks  # noqa: E402
from tickwork.django import enqueue_on_commit, get_app  # noqa: E402
from tickwork.django.compat import TaskResultStatus  # noqa: E402
from tickwork.django.management.commands.tickwork import tickwork_argv  # noqa: E402
from tickwork.scheduler import App, InvalidMessage  # noqa: E402

SETTINGS = "tests.support.django_site.settings"


@pytest.fixture(params=["sqlite", "redis"])
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    project_app = get_app()
    project_app.use_backend(backend_url(request.param, tmp_path))
    yield project_app
    project_app.close()


class Refused(Exception):
    pass


def test_enqueue_on_commit_writes_at_the_commit_and_never_on_rollback(app: App) -> None:
    with transaction.atomic():
        kept = enqueue_on_commit(tasks.which_connection.call())
        assert app.get(id=kept) is None, "not before the commit"
    assert app.get(id=kept) is not None
    with pytest.raises(Refused), transaction.atomic():
        lost = enqueue_on_commit(tasks.which_connection.call())
        raise Refused
    assert app.get(id=lost) is None
    at_once = enqueue_on_commit(tasks.which_connection.call())  # no atomic(): at once
    assert app.get(id=at_once) is not None


def test_enqueue_on_commit_refuses_a_bad_call_at_once(app: App) -> None:
    with pytest.raises(InvalidMessage), transaction.atomic():
        enqueue_on_commit(tasks.which_connection.call(1))  # type: ignore[call-arg]
    assert all(s.ready + s.scheduled == 0 for s in app.backend.queues.stats())


def test_the_worker_gets_its_app_from_the_project() -> None:
    assert tickwork_argv(["worker", "--burst"]) == [
        "worker",
        "-A",
        "tickwork.django.current:app",
        "--burst",
    ]
    assert tickwork_argv(["worker", "-A", "mine"]) == ["worker", "-A", "mine"]
    assert tickwork_argv(["stats"]) == ["stats"]


@pytest.mark.parametrize(
    "command",
    [
        [sys.executable, "-m", "django", "tickwork", "worker", "--burst", "-Q", "default"],
        [sys.executable, "-m", "tickwork", "worker", "--django", SETTINGS, "--burst"],
    ],
    ids=["manage.py tickwork worker", "tickwork worker --django"],
)
def test_a_worker_started_for_the_project_runs_django_tasks(
    command: list[str], tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url("sqlite", tmp_path)
    app = get_app()
    app.use_backend(url)
    try:
        result = tasks.add.enqueue(20, 22)
        env = {**clean_env, "TICKWORK_BACKEND": url, "DJANGO_SETTINGS_MODULE": SETTINGS}
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        finished = tasks.add.get_result(result.id)
        assert finished.status == TaskResultStatus.SUCCESSFUL and finished.return_value == 42
    finally:
        app.close()


def test_manage_py_tickwork_runs_the_other_commands(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url("sqlite", tmp_path)
    app = get_app()
    app.use_backend(url)
    try:
        tasks.add.enqueue(1, 2)
        env = {**clean_env, "TICKWORK_BACKEND": url, "DJANGO_SETTINGS_MODULE": SETTINGS}
        done = subprocess.run(
            [sys.executable, "-m", "django", "tickwork", "--json", "stats"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert '"ready": 1' in done.stdout
    finally:
        app.close()
