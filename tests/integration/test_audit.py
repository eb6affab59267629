"""One operator core: the same action taken from Python, the command line, the HTTP API
and a dashboard page (the server the docs start, ``tickwork dashboard -A``) leaves the
same record in the audit log, each with its actor; and the command line's ``--json``
and the API show a poisoned message and a schedule in one shape."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.served import call_api, dashboard, page_post, run_tickwork
from tickwork.scheduler.schedules.actions import default_actor

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """``tickwork dashboard -A ops --token ...`` over an app whose backend is a file; the
    base URL, the directory commands run from and their environment."""
    (tmp_path / "ops.py").write_text(
        textwrap.dedent(f"""
            from tickwork import App

            app = App("sqlite:///{tmp_path / "ops.db"}")


            @app.task(queue="reports")
            def report() -> None:
                raise RuntimeError("the printer is on fire")
        """)
    )
    env = {**clean_env, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    with dashboard("ops", tmp_path, env) as base:
        yield base, tmp_path, env


def _cli(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = run_tickwork(cwd, env, *args)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def _api(base: str, method: str, path: str, body: object = None) -> object:
    status, answer = call_api(base, method, path, body)
    assert status == 200, answer
    return answer


def test_one_action_from_every_surface_leaves_the_same_record(
    served: tuple[str, Path, dict[str, str]],
) -> None:
    base, cwd, env = served
    from tickwork import App

    app = App(f"sqlite:///{cwd / 'ops.db'}")

    @app.task(queue="reports")  # the same queue as the served app's task
    def report() -> None: ...

    def pause_and_resume(pause: object, resume: object) -> None:
        assert callable(pause) and callable(resume)
        pause()
        resume()

    pause_and_resume(
        lambda: app.queues.pause("reports", actor="ada@python"),
        lambda: app.queues.resume("reports", actor="ada@python"),
    )
    pause_and_resume(
        lambda: _cli(cwd, env, "queues", "pause", "reports", "-A", "ops"),
        lambda: _cli(cwd, env, "queues", "resume", "reports", "-A", "ops"),
    )
    pause_and_resume(
        lambda: _api(base, "POST", "/queues/reports/pause", {}),
        lambda: _api(base, "POST", "/queues/reports/resume", {}),
    )
    pause_and_resume(
        lambda: page_post(base, "/queues/reports/pause") == 303 or pytest.fail("page"),
        lambda: page_post(base, "/queues/reports/resume") == 303 or pytest.fail("page"),
    )
    pauses = [
        (record.actor, record.target, record.outcome)
        for record in reversed(app.audit.recent())
        if record.action == "queue.pause"
    ]
    assert pauses == [
        ("ada@python", "reports", "paused"),
        (default_actor(), "reports", "paused"),
        ("api", "reports", "paused"),
        ("dashboard", "reports", "paused"),
    ]
    through_api = _api(base, "GET", "/audit?limit=8")
    assert isinstance(through_api, list)
    assert [(a["actor"], a["action"]) for a in through_api][::2] == [
        ("dashboard", "queue.resume"),
        ("api", "queue.resume"),
        (default_actor(), "queue.resume"),
        ("ada@python", "queue.resume"),
    ]
    app.close()


def test_the_command_line_and_the_api_show_one_shape(
    served: tuple[str, Path, dict[str, str]],
) -> None:
    base, cwd, env = served
    from tickwork import App

    _cli(cwd, env, "enqueue", "ops.report", "-A", "ops")
    _cli(cwd, env, "enqueue", "ops.report", "-A", "ops", "--cron", "0 9 * * *", "--key", "daily")
    _cli(cwd, env, "worker", "-A", "ops", "--burst", "--log-level", "error")
    from_cli = json.loads(_cli(cwd, env, "poison", "list", "-A", "ops", "--json"))
    from_api = _api(base, "GET", "/poison")
    assert from_cli == from_api and len(from_cli) == 1
    assert from_cli[0]["task"] == "ops.report" and "on fire" in from_cli[0]["error"]
    schedules_cli = json.loads(_cli(cwd, env, "schedules", "-A", "ops", "--json"))
    assert schedules_cli == _api(base, "GET", "/schedules")
    assert [row["trigger"] for row in schedules_cli] == ["cron 0 9 * * * UTC"]
    replayed = _api(base, "POST", "/poison/replay", {"queue": "reports"})
    assert replayed == {"count": 1}
    with App(f"sqlite:///{cwd / 'ops.db'}") as app:
        (record,) = [r for r in app.audit.recent() if r.action == "poison.replay"]
    assert (record.actor, record.target, record.outcome) == ("api", "queue=reports", "replayed 1")
