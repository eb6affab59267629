"""A durable run's journal as operators see it (issue 50, 6): ``app.runs.journal``, then
``tickwork workflow show ID`` (and ``--json``) and ``GET /api/v1/runs/{id}/journal`` and
the Workflow page of ``tickwork dashboard -A``, each run as the docs start them, from
another directory: each entry with its state, attempts and value or error, and what the
run waits for (a sleep's wake-up, an event)."""

from __future__ import annotations

import base64
import json
import textwrap
import urllib.request
from pathlib import Path

from tests.support.helpers import running, wait_for
from tests.support.served import TOKEN, call_api, dashboard, run_tickwork
from tickwork import App, current_run

ROOT = Path(__file__).resolve().parents[2]

MODULE = """
from datetime import timedelta

from tickwork import App, RetryPolicy, current_run

app = App("sqlite:///{db}")


def flaky(seen=[0]):
    seen[0] += 1
    if seen[0] < 2:
        raise ConnectionError("carrier down")
    return "label-1"


@app.task(durable=True)
def ship(order: str) -> None:
    run = current_run()
    run.step("charge", lambda: {{"charge": order}})
    run.step("label", flaky, retry=RetryPolicy(retries=2, base_s=0.05, jitter=False))
    run.sleep(timedelta(days=3))


@app.task(durable=True)
def deliver(order: str) -> None:
    current_run().wait_for_event("order.delivered", key=order, timeout=timedelta(days=2))
"""


def test_a_journal_is_shown_by_the_cli_the_api_and_the_page(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    (tmp_path / "shop.py").write_text(textwrap.dedent(MODULE.format(db=tmp_path / "shop.db")))
    env = {**clean_env, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    app = App(f"sqlite:///{tmp_path / 'shop.db'}")

    # the producer's side declares the tasks by name (the worker runs shop.py's)
    @app.task(name="shop.ship", durable=True)
    def ship(order: str) -> None: ...

    @app.task(name="shop.deliver", durable=True)
    def deliver(order: str) -> None: ...

    shipping, delivering = ship.delay("A-1").id, deliver.delay("A-1").id
    worker = run_tickwork(tmp_path, env, "worker", "-A", "shop", "--burst")
    assert worker.returncode == 0, worker.stderr
    wait_for(lambda: app.runs.journal(shipping) is not None, timeout_s=10)

    journal = app.runs.journal(shipping)
    assert journal is not None and journal.status.value == "scheduled"
    assert [(s.kind, s.name, s.state, s.attempts) for s in journal.steps] == [
        ("step", "charge", "done", 1),
        ("step", "label", "done", 2),
        ("sleep", "sleep", "done", 1),
    ]
    assert journal.steps[1].value == "label-1"
    assert journal.waiting_for is not None and journal.waiting_for.startswith("a sleep until ")
    waiting = app.runs.journal(delivering)
    assert waiting is not None and waiting.waiting_for is not None
    assert waiting.waiting_for.startswith("event 'order.delivered' until ")

    other = tmp_path / "elsewhere"
    other.mkdir()
    shown = run_tickwork(other, env, "workflow", "show", "-A", "shop", shipping)
    assert shown.returncode == 0, shown.stderr
    assert f"durable run {shipping}: scheduled; 3 entries" in shown.stdout
    assert "label" in shown.stdout and "2 attempts" in shown.stdout
    assert "waiting for a sleep until" in shown.stdout
    as_json = run_tickwork(other, env, "workflow", "show", "-A", "shop", shipping, "--json")
    assert json.loads(as_json.stdout)["steps"][0]["value"] == {"charge": "A-1"}

    with dashboard("shop", tmp_path, env) as base:
        status, answer = call_api(base, "GET", f"/runs/{delivering}/journal")
        assert status == 200, answer
        assert isinstance(answer, dict) and answer["waiting_for"].startswith("event ")
        assert answer["steps"][0]["state"] == "waiting"
        status, missing = call_api(base, "GET", "/runs/no-such-run/journal")
        assert status == 404 and "has a journal" in json.dumps(missing)
        signed_in = {"authorization": "Basic " + base64.b64encode(f"ops:{TOKEN}".encode()).decode()}
        page = (
            urllib.request.urlopen(
                urllib.request.Request(f"{base}/workflow?id={shipping}", headers=signed_in),
                timeout=30,
            )
            .read()
            .decode()
        )
        assert f"durable run {shipping}: scheduled; 3 entries" in page
        assert "<td>label</td>" in page and "ConnectionError" not in page
    app.close()


def test_a_finished_runs_journal_shows_its_status(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task(durable=True, keep_result=True)
    def quick() -> int:
        return current_run().step("one", lambda: 1)

    handle = quick.delay()
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    journal = app.runs.journal(handle.id)
    assert journal is not None and journal.status.value == "succeeded"
    assert journal.waiting_for is None
    assert app.runs.journal("never-ran") is None
