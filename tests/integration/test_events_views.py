"""Events seen from outside the code: ``tickwork emit`` and ``tickwork events`` (JSON
and tables, bad input refused), and the dashboard's events page, over a real backend."""

from __future__ import annotations

import json

from click.testing import CliRunner
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.cli import cli
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App
from tickwork.scheduler.model.event_names import Event


def test_emit_from_the_command_line_and_read_back(pair_app: App) -> None:
    app = pair_app
    seen: list[object] = []

    @app.task(on_events=["invoice.*"])
    def book(event: Event) -> None:
        seen.append(event.payload)

    app.events.install()
    runner = CliRunner()
    url = app.settings.backend

    def invoke(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli, ["--backend", url, *args])
        return result.exit_code, result.output

    code, out = invoke("emit", "invoice.paid", '{"total": 40}', "--key", "inv-7", "--id", "ev-7")
    assert (code, out.strip()) == (0, "ev-7")
    code, out = invoke("emit", "invoice.paid", "{not json")
    assert code != 0 and "PAYLOAD is not valid JSON" in out
    code, out = invoke("emit", "invoice paid")
    assert code != 0 and "bad event name" in out
    with running(app):
        wait_for(lambda: seen == [{"total": 40}], timeout_s=20)
        wait_for(lambda: len(app.events.recent()) == 1, timeout_s=20)
    code, out = invoke("--json", "events", "subscriptions")
    assert code == 0
    (stored,) = json.loads(out)
    assert (stored["task"], stored["patterns"]) == (book.name, ["invoice.*"])
    code, out = invoke("events", "recent", "--json")
    (recent,) = json.loads(out)
    assert recent["event"]["id"] == "ev-7" and recent["subscribers"] == [book.name]
    code, out = invoke("events", "recent")
    assert code == 0 and "invoice.paid" in out and "inv-7" in out

    page = TestClient(create_dashboard(App(url))).get("/events").text
    assert f'data-task="{book.name}"' in page and "<code>invoice.*</code>" in page
    assert 'data-event="ev-7"' in page and book.name in page
    filtered = TestClient(create_dashboard(App(url))).get("/events", params={"name": "other"})
    assert 'data-event="ev-7"' not in filtered.text and "no event was delivered" in filtered.text
    code, out = invoke("emit", "order.lost")
    assert code == 0 and "note: no task subscribes to 'order.lost'" in out, "said, not silent"
