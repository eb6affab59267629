"""The dashboard's queues-and-limits page over a real backend: paused and bounded queues,
each declared limit with how full its keys are while runs hold them, a key looked up by
value, and limits a live worker publishes that the dashboard's own app does not know."""

from __future__ import annotations

import threading

from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App


def _row(page: str, key: str) -> str:
    start = page.index(f'data-key="{key}"')
    return page[start : page.index("</tr>", start)]


def test_limits_show_what_runs_hold_and_what_waits(pair_app: App) -> None:
    app = pair_app
    release = threading.Event()

    @app.task(name="crm", concurrency_limit=2, limit_key="customer")
    def crm(customer: str) -> None:
        release.wait(20)

    @app.task(name="mail", rate_limit="5/m")
    def mail() -> None: ...

    @app.task(name="report", queue="reports")
    def report() -> None: ...

    for _ in range(3):
        crm.delay("acme")
    mail.delay()
    mail.delay()
    app.queues.pause("reports")
    app.queues.configure("default", max_pending=1000)
    dashboard = App(app.settings.backend)  # a dashboard started without the tasks' module
    try:
        client = TestClient(create_dashboard(dashboard))
        with running(app, registry_interval_s=0.1, concurrency=4):
            wait_for(lambda: app.backend.limits.usage(["crm:acme"])["crm:acme"] == (2, 1))
            wait_for(lambda: [w.holding for w in app.workers.live()] == [{"crm:acme": 2}])
            page = client.get("/limits").text
            acme = _row(page, "crm:acme")
            assert "2 at once per key" in acme and '<td class="used">2 running' in acme
            assert '<td class="waiting">1' in acme
            mails = _row(page, "mail")
            assert "5 per 60 s" in mails and '<td class="used">2 started in the period' in mails
            looked = client.get("/limits", params={"limit": "crm", "value": "globex"}).text
            assert '<td class="used">0 running' in _row(looked, "crm:globex")
            release.set()
        assert 'data-queue="reports"' in page and "resume" in page
        assert "<td>default</td><td>1000</td>" in page
        # the worker is gone: its limits go with it; the per-key limit shows no key
        assert "no task here or in a live worker declares a limit" in client.get("/limits").text
    finally:
        dashboard.close()
    own = TestClient(create_dashboard(app)).get("/limits").text  # the app knows its tasks
    assert 'data-limit="crm"' in own and "no key of it is running now" in own
