"""Names are checked where they enter, by one rule each (``scheduler/model/names.py``),
the same through Python, the command line and the API: a bad queue name or key is one
``InvalidMessage`` that says the rule, and nothing is stored (issue 59)."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.served import call_api, dashboard, run_tickwork
from tickwork.errors import InvalidMessage
from tickwork.scheduler import App
from tickwork.triggers import Exclusions

ROOT = Path(__file__).resolve().parents[2]
BAD_QUEUES = {
    "": "a queue name is a non-empty string",
    " ": "a queue name has no whitespace or control characters",
    "a b": "a queue name has no whitespace or control characters",
    "a\nb": "a queue name has no whitespace or control characters",
    "q" * 201: "a queue name has at most 200 characters, not 201",
}
BAD_KEYS = {
    "": "a key is a non-empty string",
    "a\nb": "a key has no control characters",
    "tab\there": "a key has no control characters",
    "k" * 1025: "a key has at most 1024 characters, not 1025",
}


def _stored(app: App) -> int:
    return sum(s.ready + s.scheduled for s in app.queues.stats())


def test_python_refuses_bad_names_and_stores_nothing(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def greet(name: str) -> None: ...

    for queue, rule in BAD_QUEUES.items():
        with pytest.raises(InvalidMessage, match=rule):
            greet.schedule(args=("x",), queue=queue)
    for key, rule in BAD_KEYS.items():
        with pytest.raises(InvalidMessage, match=rule):
            greet.schedule(args=("x",), key=key)
    assert _stored(app) == 0
    with pytest.raises(InvalidMessage, match="a task's name has no whitespace"):
        app.task(name="send report")(lambda: None)
    with pytest.raises(InvalidMessage, match="a queue name has no whitespace"):
        app.task(queue="slow lane")(lambda: None)
    with pytest.raises(InvalidMessage, match="a calendar's name has no whitespace"):
        app.schedules.calendars.put("desk hours", Exclusions())
    # any text but control characters in a key; dots, dashes and underscores in a queue
    later = timedelta(hours=1)
    greet.schedule(args=("x",), queue="emails.eu-west_1", key="café: ünïcode 42", delay=later)
    assert _stored(app) == 1


def test_the_command_line_refuses_them_and_stores_nothing(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = f"sqlite:///{tmp_path / 'names.db'}"
    env = {**clean_env, "PYTHONPATH": str(ROOT)}

    def tickwork(*args: str) -> subprocess.CompletedProcess[str]:
        return run_tickwork(tmp_path, env, "--backend", url, *args)

    greet = ("enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks")
    for option, value, rule in (
        ("--queue", "a b", BAD_QUEUES["a b"]),
        ("--key", "a\nb", BAD_KEYS["a\nb"]),
    ):
        done = tickwork(*greet, "--args", '["x"]', option, value)
        assert done.returncode == 2 and rule in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1, "one line"
    stats = json.loads(tickwork("stats", "--json").stdout)
    assert sum(q["ready"] + q["scheduled"] for q in stats) == 0


def test_the_api_refuses_them_and_stores_nothing(tmp_path: Path, clean_env: dict[str, str]) -> None:
    """Through the server the docs start (``tickwork dashboard -A``), over HTTP."""
    url = f"sqlite:///{tmp_path / 'names.db'}"
    (tmp_path / "names_app.py").write_text(
        f"from tickwork import App\n\napp = App({url!r})\n\n\n"
        "@app.task\ndef greet(name: str) -> None: ...\n"
    )
    env = {**clean_env, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    with dashboard("names_app", tmp_path, env) as base:
        for field, value, rule in (
            ("queue", "a b", BAD_QUEUES["a b"]),
            ("key", "tab\there", BAD_KEYS["tab\there"]),
            ("queue", "q" * 201, BAD_QUEUES["q" * 201]),
        ):
            body = {"task": "names_app.greet", "args": ["x"], field: value}
            status, answer = call_api(base, "POST", "/messages", body)
            assert status == 422, answer
            assert isinstance(answer, dict) and rule in answer["error"]["message"]
        status, answer = call_api(
            base, "POST", "/messages", {"task": "names_app.greet", "args": ["x"]}
        )
        assert status in (200, 201), answer  # the same call with good names is stored
    with App(url) as app:
        assert _stored(app) == 1
