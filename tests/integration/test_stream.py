"""Live changes over Server-Sent Events (issue 52, item 2), the way the docs serve them:
``tickwork dashboard -A`` serves ``GET /api/v1/stream``, a ``tickwork worker`` runs what
the API enqueued, and a client of the stream hears each run start, report its progress
and end, filtered by task or by run, on a backend of each kind of feed (SQLite's polled
ledger, PostgreSQL's ``NOTIFY``, Redis's pub/sub)."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import backend_url
from tests.support.helpers import wait_for
from tests.support.served import EventStream, call_api, dashboard, worker
from tickwork.scheduler.backends import open_backend
from tickwork.scheduler.backends.roles.changes import ChangeFeed

ROOT = Path(__file__).resolve().parents[2]

APP = """
from tickwork import App, RetryPolicy, current_run

app = App()


@app.task
def greet(name: str) -> str:
    return f"hello {name}"


@app.task(retry=RetryPolicy(retries=0))
def bounce() -> None:
    raise ValueError("no such mailbox")


@app.task(keep_result=True)
def export(rows: int) -> int:
    current_run().progress(0.5, f"{rows // 2} of {rows} rows")
    return rows
"""


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def served(
    request: pytest.FixtureRequest, tmp_path: Path, clean_env: dict[str, str]
) -> Iterator[tuple[str, str]]:
    """The dashboard (and so the API) and a worker of the ``streamed`` app, each started as
    the docs start them, from a folder of their own; the dashboard's base URL and the
    backend's."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "streamed.py").write_text(textwrap.dedent(APP))
    url = backend_url(request.param, tmp_path)
    env = {**clean_env, "PYTHONPATH": f"{tmp_path / 'app'}:{ROOT}", "TICKWORK_BACKEND": url}
    with worker("streamed", tmp_path, env), dashboard("streamed", tmp_path, env) as base:
        yield base, url


def _enqueue(base: str, task: str, *args: Any) -> str:
    status, answer = call_api(base, "POST", "/messages", {"task": task, "args": list(args)})
    assert status == 200, answer
    assert isinstance(answer, dict)
    return str(answer["id"])


def test_a_stream_hears_each_run_of_its_task_start_and_end(served: tuple[str, str]) -> None:
    base, _ = served
    with EventStream(base, "task=streamed.greet") as stream:
        bounced = _enqueue(base, "streamed.bounce")
        greeted = _enqueue(base, "streamed.greet", "ann")
        heard = stream.take(2)
        assert [(name, data["event"], data["id"]) for name, data in heard] == [
            ("run", "started", greeted),
            ("run", "succeeded", greeted),
        ]
        ended = heard[1][1]
        assert ended["task"] == "streamed.greet" and ended["attempt"] == 1
        assert ended["run_s"] is not None and ended["worker"]
        assert stream.take(1, timeout_s=1.0) == [], f"{bounced} is another task's"


def test_a_stream_hears_a_run_report_its_progress(served: tuple[str, str]) -> None:
    base, _ = served
    with EventStream(base, "task=streamed.export") as stream:
        exported = _enqueue(base, "streamed.export", 10)
        heard = [data for _, data in stream.take(3)]
        assert [(data["event"], data["id"]) for data in heard] == [
            ("started", exported),
            ("progress", exported),
            ("succeeded", exported),
        ]
        assert (heard[1]["progress"], heard[1]["note"]) == (0.5, "5 of 10 rows")
        assert heard[2]["progress"] is None


def test_a_stream_hears_an_event_emitted(served: tuple[str, str]) -> None:
    """``POST /events`` (``app.emit``): the app that emits tells the streams, which
    filter by the event's name."""
    base, _ = served
    with EventStream(base, "name=order.paid") as by_name:
        status, answer = call_api(
            base, "POST", "/events", {"name": "order.paid", "payload": {"n": 1}, "key": "o-7"}
        )
        assert status == 200, answer
        assert isinstance(answer, dict)
        ((kind, emitted),) = by_name.take(1)
        assert kind == "run"
        assert (emitted["event"], emitted["id"], emitted["name"]) == (
            "emitted",
            answer["id"],
            "order.paid",
        )
        assert (emitted["task"], emitted["key"]) == ("tickwork.event", "o-7")
        call_api(base, "POST", "/events", {"name": "order.refunded"})
        assert by_name.take(1, timeout_s=1.0) == [], "another event's name"


def test_a_stream_of_one_run_hears_it_fail_for_good(served: tuple[str, str]) -> None:
    base, _ = served
    with EventStream(base, "task=streamed.bounce") as by_task:
        bounced = _enqueue(base, "streamed.bounce")
        assert [data["event"] for _, data in by_task.take(2)] == ["started", "poisoned"]
    with EventStream(base, f"run={bounced}") as by_run:
        other = _enqueue(base, "streamed.bounce")
        assert by_run.take(1, timeout_s=1.0) == [], f"{other} is another run"


@pytest.mark.parametrize("served", ["sqlite"], indirect=True)
def test_the_stream_needs_the_token(served: tuple[str, str]) -> None:
    base, _ = served
    import urllib.error
    import urllib.request

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/api/v1/stream", timeout=30)
    with refused.value as answer:
        assert answer.code == 401


def _heard(feed: ChangeFeed, seconds: float) -> list[bytes]:
    """What ``feed`` hears in the next ``seconds``."""
    heard: list[bytes] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        heard += feed.next(left)
    return heard


def test_workers_publish_nothing_while_no_stream_listens(served: tuple[str, str]) -> None:
    """Nobody pays for changes nobody reads: with no stream open, a feed of the backend
    opened here hears nothing of a run that ended; once a stream is open, the next run's
    changes reach both."""
    base, url = served
    with open_backend(url) as backend:
        feed = backend.changes.listen()
        try:
            quiet = _enqueue(base, "streamed.greet", "quiet")
            wait_for(lambda: call_api(base, "GET", f"/messages?id={quiet}")[0] == 404, 30)
            assert _heard(feed, 1.0) == [], "a worker published while no stream listened"
            with EventStream(base, "task=streamed.greet") as stream:
                loud = _enqueue(base, "streamed.greet", "loud")

                def ended() -> bool:
                    return any(
                        data["id"] == loud and data["event"] == "succeeded"
                        for _, data in stream.take(1, timeout_s=1.0)
                    )

                wait_for(ended, 30)
            assert loud.encode() in b"".join(_heard(feed, 2.0))
        finally:
            feed.close()
