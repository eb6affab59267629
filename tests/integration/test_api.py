"""The HTTP API (``/api/v1``) over SQLite and a Redis Cluster, through the dashboard's
own application: enqueue checked as ``delay()`` checks (bad input is one error shape
with a stable code and nothing stored), reads, cancels and aborts, schedules steered
with the actor recorded, results, the poison store, queues, workers and events; the
guard (token, read-only, JSON only); the OpenAPI document valid and the same as the
copy in ``docs/``; and a fuzz test of the inputs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_spec_validator import validate
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.api.openapi import document
from tickwork.dashboard import Access, create_dashboard
from tickwork.scheduler import App, RetryPolicy

ROOT = Path(__file__).resolve().parents[2]


def _client(app: App, **access: Any) -> TestClient:
    return TestClient(create_dashboard(app, Access(**access)), base_url="http://testserver")


def _stored(app: App) -> int:
    return sum(s.ready + s.scheduled for s in app.backend.queues.stats())


def _error(answer: Any, status: int, code: str) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return str(body["error"]["message"])


def test_messages_are_enqueued_read_and_cancelled(app: App) -> None:

    @app.task(keep_result=True)
    def add(a: int, b: int) -> int:
        return a + b

    api = _client(app)
    done = api.post("/api/v1/messages", json={"task": add.name, "args": [2, 3]})
    assert done.status_code == 200
    message_id = done.json()["id"]
    read = api.get("/api/v1/messages", params={"id": message_id}).json()
    assert (read["task"], read["args"], read["state"]) == (add.name, [2, 3], "ready")
    assert "invalid arguments" in _error(
        api.post("/api/v1/messages", json={"task": add.name, "args": ["two", 3]}), 422, "invalid"
    )
    _error(api.post("/api/v1/messages", json={"task": "nope.nothing"}), 404, "unknown_task")
    _error(api.post("/api/v1/messages", json={"task": add.name, "extra": 1}), 422, "invalid")
    naive = {"task": add.name, "args": [1, 1], "at": "2030-01-01T00:00:00"}
    _error(api.post("/api/v1/messages", json=naive), 422, "invalid")
    assert _stored(app) == 1, "nothing of the refused ones is stored"
    # an Idempotency-Key makes a retried request store the message once
    once = {"Idempotency-Key": "order-17"}
    first = api.post("/api/v1/messages", json={"task": add.name, "args": [1, 1]}, headers=once)
    again = api.post("/api/v1/messages", json={"task": add.name, "args": [1, 1]}, headers=once)
    assert first.json() == again.json() and _stored(app) == 2
    # keys conflict as enqueue's do
    keyed = {"task": add.name, "args": [5, 5], "key": "nightly", "cron": {"expr": "0 2 * * *"}}
    assert api.post("/api/v1/messages", json=keyed).status_code == 200
    _error(api.post("/api/v1/messages", json={**keyed, "args": [6, 6]}), 409, "key_conflict")
    both = {**keyed, "every_s": 60}
    assert "at most one of" in _error(api.post("/api/v1/messages", json=both), 422, "invalid")
    with running(app):
        wait_for(lambda: api.get(f"/api/v1/results/{message_id}").json().get("value") == 5)
    gone = api.request(
        "DELETE", "/api/v1/messages", params={"key": "nightly"}, json={"note": "moved"}
    )
    assert gone.json() == {"done": True}
    _error(api.get("/api/v1/messages", params={"key": "nightly"}), 404, "not_found")
    _error(api.get("/api/v1/messages"), 422, "invalid")


def test_schedules_are_steered_with_the_api_as_the_actor(app: App) -> None:

    @app.task
    def report() -> None: ...

    api = _client(app)
    body = {"task": report.name, "key": "report", "cron": {"expr": "0 9 * * *", "tz": "Asia/Tokyo"}}
    assert api.post("/api/v1/messages", json=body).status_code == 200
    (listed,) = api.get("/api/v1/schedules").json()
    assert (listed["key"], listed["timezone"], listed["paused"]) == ("report", "Asia/Tokyo", False)
    assert len(api.get("/api/v1/schedules/report/preview", params={"count": 3}).json()) == 3
    paused = api.post("/api/v1/schedules/report/pause", json={"note": "partner down"})
    assert paused.json() == {"done": True}
    assert api.post("/api/v1/schedules/report/resume", json={"misfire": "skip"}).json()["done"]
    run = api.post("/api/v1/schedules/report/trigger", json={}).json()["id"]
    assert api.get("/api/v1/messages", params={"id": run}).status_code == 200
    actions = app.schedules.actions("report")
    assert [(a.action, a.actor) for a in actions][-2:] == [("resume", "api"), ("pause", "api")]
    assert actions[-1].note == "partner down"
    now = datetime.now(UTC)
    span = {"start": (now - timedelta(days=3)).isoformat(), "end": now.isoformat()}
    filled = api.post("/api/v1/schedules/report/backfill", json={**span, "note": "outage"})
    assert filled.json()["enqueued"] == filled.json()["occurrences"] >= 2
    again = api.post("/api/v1/schedules/report/backfill", json=span).json()
    assert again["enqueued"] == 0 and again["already"] == filled.json()["enqueued"]
    _error(api.post("/api/v1/schedules/nothing/pause", json={}), 404, "not_found")
    hours = {"windows": [{"start": "09:00", "end": "17:00", "days": [0, 1, 2, 3, 4]}]}
    stored = api.put("/api/v1/calendars/desk", json={"rules": hours, "note": "office"})
    assert stored.json() == {"done": True}
    assert api.get("/api/v1/calendars").json()["desk"]["windows"][0]["start"] == "09:00:00"
    bad = {"rules": {"ranges": [["2030-02-01", "2030-01-01"]]}}
    said = _error(api.put("/api/v1/calendars/bad", json=bad), 422, "invalid")
    assert said.startswith("bad calendar: Exclusions: ") and "pydantic" not in said, said
    assert app.schedules.calendars.history("desk")[0].actor == "api"
    gone = api.request("DELETE", "/api/v1/calendars/desk", json={})
    assert gone.json() == {"done": True}
    _error(api.post("/api/v1/schedules/report/resume", json={"misfire": "later"}), 422, "invalid")
    _error(api.get("/api/v1/schedules/report/history", params={"limit": "x"}), 422, "invalid")


def test_poison_queues_workers_and_events(app: App) -> None:
    seen: list[Any] = []

    @app.task(retry=RetryPolicy(retries=0))
    def fails() -> None:
        raise ValueError("the partner refused it")

    @app.task(on_events="invoice.*")
    def book(event: dict[str, Any]) -> None:
        seen.append(event["payload"])

    api = _client(app)
    api.post("/api/v1/messages", json={"task": fails.name})
    emitted = api.post("/api/v1/events", json={"name": "invoice.paid", "payload": {"n": 1}})
    assert emitted.status_code == 200
    _error(api.post("/api/v1/events", json={"name": "bad name"}), 422, "invalid")
    with running(app, registry_interval_s=0.1):
        wait_for(lambda: len(api.get("/api/v1/poison").json()) == 1)
        wait_for(lambda: seen == [{"n": 1}])
        workers = api.get("/api/v1/workers").json()
        assert len(workers) == 1 and workers[0]["queues"] == ["default"]
    (poisoned,) = api.get("/api/v1/poison").json()
    assert poisoned["error"] == "the partner refused it" and poisoned["task"] == fails.name
    _error(api.post("/api/v1/poison/replay", json={}), 422, "invalid")
    assert api.post("/api/v1/poison/replay", json={"ids": [poisoned["id"]]}).json() == {"count": 1}
    assert api.post("/api/v1/poison/purge", json={"queue": "default"}).json() == {"count": 0}
    assert api.put("/api/v1/queues/default/bound", json={"max_pending": 50}).json()["done"]
    assert app.backend.queues.bounds() == {"default": 50}
    _error(api.put("/api/v1/queues/default/bound", json={"max_pending": 0}), 422, "invalid")
    assert api.put("/api/v1/queues/default/bound", json={"max_pending": None}).json()["done"]
    assert api.post("/api/v1/queues/default/pause", json={}).json() == {"done": True}
    (queue,) = [q for q in api.get("/api/v1/queues").json() if q["queue"] == "default"]
    assert queue["paused"] and queue["ready"] == 1


def test_the_guard_and_the_media_type(app: App) -> None:

    @app.task
    def noop() -> None: ...

    closed = _client(app, token="s3cret")
    _error(closed.get("/api/v1/queues"), 401, "unauthorized")
    bearer = {"Authorization": "Bearer s3cret"}
    assert closed.get("/api/v1/queues", headers=bearer).status_code == 200
    reader = _client(app, read_only=True)
    assert reader.get("/api/v1/schedules").status_code == 200
    _error(reader.post("/api/v1/messages", json={"task": noop.name}), 403, "forbidden")
    api = _client(app)
    form = api.post("/api/v1/messages", data={"task": noop.name})  # what a page could send
    _error(form, 415, "unsupported_media_type")
    _error(api.get("/api/v1/nowhere"), 404, "not_found")
    _error(api.put("/api/v1/queues", json={}), 405, "method_not_allowed")
    huge = {"task": noop.name, "kwargs": {"pad": "x" * 70_000}}
    _error(api.post("/api/v1/messages", json=huge), 413, "too_large")
    assert _stored(app) == 0


def test_the_openapi_document_is_valid_and_checked_in(sqlite_app: App) -> None:
    served = _client(sqlite_app).get("/api/v1/openapi.json").json()
    validate(served)
    assert served == document()
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert checked_in == served, "run: tickwork openapi > docs/openapi.json"
    assert set(served["paths"]) >= {"/messages", "/schedules/{key}/pause", "/events"}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries(
        {"task": st.sampled_from(["t.noop", "t.add", "", "x" * 400])},
        optional={
            "args": _json,
            "kwargs": _json,
            "key": _json,
            "at": st.sampled_from(["2030-01-01T00:00:00Z", "yesterday", "2030-01-01T00:00:00"]),
            "delay_s": _json,
            "every_s": _json,
            "cron": st.one_of(_json, st.fixed_dictionaries({"expr": st.text(max_size=15)})),
            "on_conflict": st.sampled_from(["error", "ignore", "replace", "never"]),
        },
    ),
)


@pytest.mark.slow
def test_every_bad_input_is_a_4xx_with_nothing_written(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task(name="t.noop")
    def noop() -> None: ...

    @app.task(name="t.add")
    def add(a: int, b: int) -> int:
        return a + b

    api = _client(app)
    tried = {"total": 0, "refused": 0}

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=_bodies, path=st.sampled_from(["/messages", "/events", "/schedules/k/pause"]))
    def one(body: Any, path: str) -> None:
        before = _stored(app)
        answer = api.post(f"/api/v1{path}", content=json.dumps(body).encode(),
                          headers={"content-type": "application/json"})  # fmt: skip
        tried["total"] += 1
        if answer.status_code == 200:
            return
        tried["refused"] += 1
        assert 400 <= answer.status_code < 500, (body, answer.text)
        assert set(answer.json()) == {"error"}
        assert _stored(app) == before, (body, answer.text)

    one()
    assert tried["refused"] > tried["total"] // 2
    print(f"api fuzz: {tried['total']} inputs, {tried['refused']} refused, nothing written")
