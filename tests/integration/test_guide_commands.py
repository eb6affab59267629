"""Every ``tickwork`` line of the guide and the operations page runs (issue 49), as the
README's tour does (``test_readme_tour.py``), in a directory holding the guide's app:
the README's quickstart with what the guide's lines read (a schedule keyed ``report``, a
task with ``history=True``), importable as ``app`` and as ``myapp.tasks``. A line's
placeholders (``KEY``, ``ID``, ``N``, ``ISO``...) get values, its optional parts
(``[--json]``) are given, each alternative runs; a worker line runs with ``--burst``;
a server starts, answers and stops. Two substitutions, said where they happen: a port
shown (``9740``, ``8080``) becomes a free one, and ``--host 0.0.0.0`` becomes
``127.0.0.1`` (servers here listen on loopback only). The test fails if a page shows a
line it did not run.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.support.servers import free_port
from tests.support.tour import Tour, python, shown
from tests.unit.test_docs_code import COMMANDS

pytestmark = pytest.mark.slow

PAGES = ("docs/guide.md", "docs/operations.md")

_EXTRA = """

@app.task(history=True)
def sync_account(account: str) -> None: ...


if __name__ == "__main__":
    send_report.schedule(args=(7,), trigger=Cron("0 * * * *"), key="report")
"""

_UNDECODABLE = """
from app import app
from tickwork.scheduler.backends import Envelope
now = app.backend.now_ms()
app.backend.messages.enqueue([Envelope("garbled", "default", None, 0, now, 30_000, b"bad")])
"""


def _lines() -> list[str]:
    return [shown(line) for where, line in COMMANDS if where.split(":")[0] in PAGES]


@pytest.fixture
def guide(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[Tour]:
    section = (ROOT / "README.md").read_text().split("## Quickstart", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    source = found[1] + _EXTRA
    (tmp_path / "app.py").write_text(source)
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "tasks.py").write_text(source)
    env = {key: value for key, value in clean_env.items() if not key.startswith("TICKWORK_")}
    python(tmp_path, env, "import runpy; runpy.run_path('app.py', run_name='__main__')")
    yield Tour(tmp_path, env)


def test_every_command_line_of_the_guide_and_operations_runs(guide: Tour) -> None:
    lines = _lines()

    def line(start: str) -> str:
        """The one shown line that is ``start`` or begins with it."""
        if start in lines:
            return start
        (found,) = {x for x in lines if x.startswith(start)}
        return found

    burst = ("--burst",)
    tour = guide
    tour.run(
        line('tickwork cron explain "30 2'),
        "cron",
        "explain",
        "30 2 * * *",
        "--tz",
        "Europe/Paris",
        "-n",
        "10",
    )
    tour.run(
        line("tickwork cron explain @daily"),
        "cron",
        "explain",
        "@daily",
        "--tz",
        "America/New_York",
        "--dst-gap",
        "skip",
        "--dst-repeat",
        "both",
    )
    preview = line("tickwork schedules preview")
    tour.run(preview, "schedules", "preview", "report:42", "-n", "10")
    assert (
        len(
            json.loads(tour.run(preview, "schedules", "preview", "report:42", "-n", "10", "--json"))
        )
        == 10
    )

    steer = line("tickwork schedules pause KEY")
    tour.run(steer, "schedules", "pause", "report:42")
    tour.run(
        steer,
        "schedules",
        "resume",
        "report:42",
        "--misfire",
        "catch_up",
        "--limit",
        "3",
        "--spacing",
        "1",
    )
    tour.run(steer, "schedules", "trigger", "report:42")
    backfill = line("tickwork schedules backfill")
    tour.run(
        backfill,
        "schedules",
        "backfill",
        "report:42",
        "--start",
        "2026-11-02T00:00:00+00:00",
        "--end",
        "2026-11-05T00:00:00+00:00",
        "--limit",
        "3",
        "--spacing",
        "1",
        "--json",
    )

    tour.run(
        line("tickwork schedules pause report --note"),
        "schedules",
        "pause",
        "report",
        "--note",
        "the CRM is down",
    )
    actions = line("tickwork schedules history report --actions")
    tour.run(actions, "schedules", "history", "report", "--actions")
    (paused,) = json.loads(
        tour.run(actions, "schedules", "history", "report", "--actions", "--json")
    )
    assert paused["action"] == "pause" and paused["note"] == "the CRM is down", paused

    tour.run("", "worker", "-A", "app", *burst)  # the triggered run and the backfill run
    ledger = line("tickwork schedules history KEY")
    tour.run(ledger, "schedules", "history", "report:42")
    assert json.loads(tour.run(ledger, "schedules", "history", "report:42", "-n", "2", "--json"))
    one_off = python(
        tour.cwd, tour.env, "from app import sync_account; print(sync_account.delay('acme'))"
    )
    tour.run("", "worker", "-A", "app", *burst)
    history = line("tickwork history --id")
    tour.run(history, "history", "--id", one_off)
    assert json.loads(tour.run(history, "history", "--id", one_off, "--json"))

    quickstart = line("tickwork worker -A examples.quickstart")
    elsewhere = {"TICKWORK_BACKEND": f"sqlite:///{tour.cwd / 'quickstart.db'}"}
    for options in (
        ("--queue", "default", "--queue", "reports"),
        ("--concurrency", "4"),
        ("--pool", "thread"),
        ("--pool", "process"),
    ):
        tour.run(
            quickstart,
            "worker",
            "-A",
            "examples.quickstart",
            *options,
            *burst,
            cwd=ROOT,
            env=elsewhere,
        )
    workers = line("tickwork workers")
    tour.run(workers, "workers")
    tour.run(workers, "workers", "--json")
    metrics = line("tickwork worker -A app --metrics-port")
    tour.run(metrics, "worker", "-A", "app", "--metrics-port", str(free_port()), *burst)
    port = free_port()
    assert b"tickwork_" in tour.serve(
        line("tickwork exporter"), ["exporter", "--port", str(port)], port, "/metrics"
    )

    password = secrets.token_hex(8)
    hashed = tour.run(
        line("tickwork users hash"), "users", "hash", typed=f"{password}\n{password}\n"
    )
    assert hashed.startswith("scrypt$"), hashed
    token_line = line("tickwork users token")
    users = tour.run(token_line, "users", "token", "deploy-bot", "--role", "operator")
    (tour.cwd / "users.toml").write_text(users)  # the line appends it: >> users.toml
    port = free_port()
    signed = line("tickwork dashboard -A app --users")
    tour.serve(
        signed,
        [
            "dashboard",
            "-A",
            "app",
            "--users",
            "users.toml",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        port,
        "/",
        401,
    )
    port = free_port()
    assert (
        b"tickwork"
        in tour.serve(
            line("tickwork dashboard -A app --port"),
            ["dashboard", "-A", "app", "--port", str(port)],
            port,
            "/",
        ).lower()
    )
    port = free_port()
    tour.serve(
        line("tickwork dashboard --host"),
        ["dashboard", "--host", "127.0.0.1", "--port", str(port)],
        port,
        "/",
        401,  # TICKWORK_DASHBOARD_TOKEN=... asks for it
        env={"TICKWORK_DASHBOARD_TOKEN": secrets.token_hex(8)},
    )
    port = free_port()
    read_only = ["dashboard", "--read-only", "--host", "127.0.0.1", "--port", str(port)]
    tour.serve(line("tickwork dashboard --read-only"), read_only, port, "/")

    for shown_line in (
        line("tickwork worker -A myapp.tasks --concurrency"),
        line("tickwork worker -A myapp.tasks --pool"),
    ):
        args = shown_line.split()[1:]
        tour.run(shown_line, *args, *burst)

    tour.run(
        line("tickwork queues set imports --max-pending"),
        "queues",
        "set",
        "imports",
        "--max-pending",
        "500000",
    )
    assert "imports" in tour.run(line("tickwork queues list"), "queues", "list")
    tour.run(
        line("tickwork queues set imports --unbounded"), "queues", "set", "imports", "--unbounded"
    )

    python(tour.cwd, tour.env, _UNDECODABLE)
    tour.run("", "worker", "-A", "app", *burst)
    listing = line("tickwork poison list")
    tour.run(listing, "poison", "list")
    rows = json.loads(tour.run(listing, "poison", "list", "--queue", "default", "--json"))
    (row,) = [row for row in rows if row["id"] == "garbled"]
    tour.run(line("tickwork poison show"), "poison", "show", row["id"])
    replay = line("tickwork poison replay")
    tour.run(replay, "poison", "replay", row["id"])
    tour.run("", "worker", "-A", "app", *burst)
    tour.run(replay, "poison", "replay", "--all", "--queue", "default")
    tour.run("", "worker", "-A", "app", *burst)
    purge = line("tickwork poison purge")
    tour.run(purge, "poison", "purge", row["id"])
    tour.run(purge, "poison", "purge", "--queue", "default")

    # last: what this worker writes (the next occurrences) is encrypted, and no worker
    # without the keys reads it
    key = tour.run(line("tickwork encryption-key"), "encryption-key").strip()
    keys = f"{key},{tour.run('', 'encryption-key').strip()}"
    tour.run(
        line("tickwork worker -A app"),
        "worker",
        "-A",
        "app",
        *burst,
        env={"TICKWORK_ENCRYPTION_KEYS": keys},
    )

    assert set(lines) - tour.ran == set(), "lines of the guide that did not run"
