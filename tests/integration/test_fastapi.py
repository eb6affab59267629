"""tickwork in a FastAPI service (``tickwork.fastapi``), through the runnable example
``examples/fastapi_app.py`` with FastAPI's test client and a worker running: a POST
enqueues from the event loop, the result is read back, the dashboard sits behind the
service's own dependency and keeps its CSRF check."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from examples import fastapi_app
from tests.support.backends import backend_url
from tests.support.helpers import running, wait_for
from tickwork.fastapi import TickworkApp, lifespan
from tickwork.scheduler import App, BackendUnavailable

OPERATOR = {"x-api-key": fastapi_app.API_KEY}


@pytest.fixture(params=["sqlite", "redis"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    fastapi_app.app.use_backend(backend_url(request.param, tmp_path))
    with TestClient(fastapi_app.api) as service:
        yield service
    fastapi_app.app.close()


def test_a_post_enqueues_and_the_result_reads_back(client: TestClient) -> None:
    job = client.post("/orders", json={"customer": "ada", "cents": 1250})
    assert job.status_code == 202
    job_id = job.json()["job"]
    assert client.get(f"/orders/{job_id}").json()["status"] in ("ready", "scheduled")
    with running(fastapi_app.app):
        wait_for(lambda: client.get(f"/orders/{job_id}").json()["status"] == "succeeded")
    assert client.get(f"/orders/{job_id}").json()["value"] == {
        "customer": "ada",
        "charged_cents": 1250,
    }


def test_bad_input_is_refused_and_writes_nothing(client: TestClient) -> None:
    assert client.post("/orders", json={"customer": "ada", "cents": "lots"}).status_code == 422
    assert all(s.ready + s.scheduled == 0 for s in fastapi_app.app.backend.queues.stats())


def test_the_dashboard_sits_behind_the_services_dependency(client: TestClient) -> None:
    client.post("/orders", json={"customer": "ada", "cents": 1})
    assert client.get("/ops/tickwork/").status_code == 401
    page = client.get("/ops/tickwork/", headers=OPERATOR)
    assert page.status_code == 200 and 'href="/ops/tickwork/schedules"' in page.text
    form = re.search(
        r'action="(/ops/tickwork/queues/default/pause)".*?name="csrf" value="([^"]+)"',
        page.text,
        re.S,
    )
    assert form is not None
    target, token = form.groups()
    refused = client.post(
        target, data={"csrf": "forged", "next": "/ops/tickwork/"}, headers=OPERATOR
    )
    assert refused.status_code == 403
    done = client.post(
        target,
        data={"csrf": token, "next": "/ops/tickwork/"},
        headers=OPERATOR,
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"].startswith("/ops/tickwork/")
    assert fastapi_app.app.backend.queues.paused() == ["default"]
    assert client.post(target, data={"csrf": token}).status_code == 401, "the dependency first"


def test_an_unreachable_backend_stops_the_start_up() -> None:
    app = App("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout_s=1")
    with pytest.raises(BackendUnavailable), TestClient(FastAPI(lifespan=lifespan(app))):
        pass


def test_the_dependency_needs_the_lifespan() -> None:
    service = FastAPI()

    @service.get("/")
    async def home(tickwork: TickworkApp) -> str:
        return tickwork.settings.backend

    with (
        pytest.raises(RuntimeError, match="lifespan=lifespan"),
        TestClient(service) as client,
    ):
        client.get("/")
