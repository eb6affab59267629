"""The README's tour of the command line runs as shown (issue 49): its quickstart saved
as ``app.py`` in a directory of the test's own and run, then every ``tickwork`` line of
the tour through the installed console script, from that directory, in order. A line
with alternatives (``pause K | resume K``) runs each; a placeholder (``ID``, ``Q``, ``K``,
``N``) is given a value the earlier lines made. A worker line runs with ``--burst`` (it
would run until stopped), a server's (``exporter``, ``dashboard``) is started, answers
one request and is stopped. The test fails if the README shows a line it did not run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.served import run_tickwork
from tests.support.servers import free_port
from tests.support.tour import Tour, python, shown

pytestmark = pytest.mark.slow


def _readme() -> tuple[str, list[str]]:
    """The quickstart's source and the tour's command lines (their comments dropped)."""
    section = (ROOT / "README.md").read_text().split("## Quickstart", 1)[1]
    found = re.search(r"```python\n(.*?)```\n+```\n(.*?)```", section, re.S)
    assert found is not None, "the README has a quickstart and its tour"
    lines = [shown(line) for line in found[2].splitlines()]
    return found[1], [line for line in lines if line.startswith("tickwork ")]


@pytest.fixture
def tour(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[Tour]:
    env = {key: value for key, value in clean_env.items() if not key.startswith("TICKWORK_")}
    yield Tour(tmp_path, env)


def test_every_line_of_the_readme_tour_runs_as_shown(tour: Tour) -> None:
    quickstart, lines = _readme()
    (tour.cwd / "app.py").write_text(quickstart)
    python(tour.cwd, tour.env, "import runpy; runpy.run_path('app.py', run_name='__main__')")
    line: Callable[[str], str] = lambda start: next(x for x in lines if x.startswith(start))  # noqa: E731

    shown = line("tickwork worker -A app")
    assert shown == "tickwork worker -A app"
    tour.run(shown, "worker", "-A", "app", "--burst")
    assert "report:42" in tour.run(line("tickwork schedules"), "schedules")
    assert "report:42" in tour.run(line("tickwork schedules -A"), "schedules", "-A", "app")
    tour.run(line("tickwork schedules history"), "schedules", "history", "report:42")
    fires = tour.run(
        line("tickwork schedules preview"), "schedules", "preview", "report:42", "-n", "5"
    )
    assert fires.count("09:00") >= 5, fires
    steer = line("tickwork schedules pause")
    for verb in ("pause", "resume", "trigger"):
        tour.run(steer, "schedules", verb, "report:42")
    backfill = tour.run(
        line("tickwork schedules backfill"),
        *("schedules", "backfill", "report:42", "--start", "2026-11-01", "--end", "2026-11-08"),
    )
    assert "enqueued 5" in backfill, backfill
    tour.run(
        line("tickwork schedules check"), "schedules", "check", "--max-late", "10m", codes=(0, 1)
    )
    tour.run(line("tickwork cron explain"), "cron", "explain", "30 2 * * *", "--tz", "Europe/Paris")
    assert "default" in tour.run(line("tickwork stats"), "stats")
    tour.run(line("tickwork workers"), "workers")
    metrics = str(free_port())
    tour.run(
        line("tickwork worker -A app --metrics-port"),
        "worker",
        "-A",
        "app",
        "--metrics-port",
        metrics,
        "--burst",
    )
    logged = run_tickwork(
        tour.cwd, tour.env, "worker", "-A", "app", "--log-format", "json", "--burst"
    )
    assert logged.returncode == 0 and json.loads(logged.stderr.splitlines()[-1]), logged.stderr
    tour.ran.add(line("tickwork worker -A app --log-format"))
    tour.run(
        line("tickwork worker -A app --processes"),
        "worker",
        "-A",
        "app",
        "--processes",
        "2",
        "--burst",
    )
    port = free_port()
    scraped = tour.serve(
        line("tickwork exporter"), ["exporter", "--port", str(port)], port, "/metrics"
    )
    assert b"tickwork_" in scraped

    tour.run(
        line("tickwork enqueue"),
        *("enqueue", "app.send_report", "-A", "app", "--args", "[7]", "--cron", "0 9 * * *"),
        *("--tz", "Europe/Paris", "--key", "r7"),
    )
    shown_r7 = json.loads(tour.run(line("tickwork show"), "show", "--key", "r7", "--json"))
    assert shown_r7["key"] == "r7" and shown_r7["task"] == "app.send_report"
    tour.run(line("tickwork cancel"), "cancel", "--key", "r7")
    pending = python(tour.cwd, tour.env, _PENDING)
    tour.run(line("tickwork abort"), "abort", "--id", pending)

    # a message no worker can decode, for the poison queue's verbs
    python(tour.cwd, tour.env, _UNDECODABLE)
    tour.run("", "worker", "-A", "app", "--burst")
    poison = line("tickwork poison list")
    listed = json.loads(tour.run(poison, "poison", "list", "--json"))
    (poisoned,) = [row["id"] for row in listed]
    tour.run(poison, "poison", "show", poisoned)
    tour.run(poison, "poison", "replay", poisoned)
    tour.run("", "worker", "-A", "app", "--burst")  # poisoned again
    tour.run(poison, "poison", "replay", "--all")
    tour.run("", "worker", "-A", "app", "--burst")
    tour.run(poison, "poison", "purge", poisoned)
    assert json.loads(tour.run(poison, "poison", "list", "--json")) == []

    queues = line("tickwork queues list")
    assert "default" in tour.run(queues, "queues", "list")
    tour.run(queues, "queues", "pause", "default")
    tour.run(queues, "queues", "resume", "default")
    bound = line("tickwork queues set")
    tour.run(bound, "queues", "set", "default", "--max-pending", "1000")
    tour.run(bound, "queues", "set", "default", "--unbounded")

    workflow = line("tickwork workflow show")
    batch_id = python(tour.cwd, tour.env, _GROUP)
    python(tour.cwd, tour.env, _KEYED_CHAIN)
    tour.run(workflow, "workflow", "show", batch_id)
    tour.run(workflow, "workflow", "show", "--key", "etl", "--json")

    tour.run(line("tickwork emit"), "emit", "order.placed", '{"total": 40}', "--key", "o-1")
    events = line("tickwork events subscriptions")
    tour.run(events, "events", "subscriptions")
    tour.run("", "worker", "-A", "app", "--burst")  # delivers it
    assert "order.placed" in tour.run(events, "events", "recent")

    port = free_port()
    page = tour.serve(
        line("tickwork dashboard"), ["dashboard", "-A", "app", "--port", str(port)], port, "/"
    )
    assert b"tickwork" in page.lower()

    assert set(lines) - tour.ran == set(), "lines of the README's tour that did not run"


_PENDING = """
from app import send_report
print(send_report.schedule(args=(8,), delay=3600))
"""
_GROUP = """
from app import send_report
from tickwork import group
print(group([send_report.call(1), send_report.call(2)]).delay().id)
"""
_KEYED_CHAIN = """
from app import send_report
from tickwork import chain
chain(send_report.si(3), send_report.si(4)).apply_async(key="etl")
"""
_UNDECODABLE = """
from app import app
from tickwork.scheduler.backends import Envelope
now = app.backend.now_ms()
app.backend.messages.enqueue([Envelope("garbled", "default", None, 0, now, 30_000, b"not json")])
"""
