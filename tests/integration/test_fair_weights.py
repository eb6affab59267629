"""Weighted fair share end to end: a fair-share key given weight 3 in a queue runs three
of its messages for one of a key of weight 1 while both have a backlog, on every backend
that offers fair share (Cassandra refuses, with the reason); the command line and the
API the docs show set and read the weights; bad input is one clear error."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.helpers import running, wait_for
from tests.support.served import call_api, dashboard, page_get, page_post, run_tickwork
from tickwork.errors import ConfigurationError, InvalidMessage, QueueNotFound
from tickwork.scheduler import App
from tickwork.scheduler.backends.base import Capability

ROOT = Path(__file__).resolve().parents[2]


def test_a_tenant_of_weight_three_runs_three_for_another_s_one(app: App) -> None:
    if Capability.FAIR_SHARE not in app.backend.capabilities:
        with pytest.raises(ConfigurationError, match="not offered on Cassandra"):
            app.queues.weigh("default", "acme", 3)
        return
    ran: list[str] = []

    @app.task(fair_key="tenant")
    def report(tenant: str, n: int) -> None:
        ran.append(tenant)

    app.queues.weigh("default", "acme", 3)
    assert app.queues.weights().weights == {"acme": 3}
    for n in range(80):
        report.delay("acme", n)
        report.delay("globex", n)
    with running(app, concurrency=1):
        wait_for(lambda: len(ran) == 160, timeout_s=60)
    acme = ran[:80].count("acme")
    # 3:1 while both wait: 60 of the first 80 (a Redis Cluster's three shards each take
    # their own turns, so a little less exact there)
    assert 54 <= acme <= 66, ran[:80]
    app.queues.weigh("default", "acme", None)
    assert app.queues.weights().weights == {}


def test_bad_weights_are_one_clear_error(sqlite_app: App) -> None:
    for weight in (0, 1001, 2.5, True):
        with pytest.raises(InvalidMessage, match="weight must be a whole number from 1 to 1000"):
            sqlite_app.queues.weigh("default", "acme", weight)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessage, match="a fair-share key is a non-empty string"):
        sqlite_app.queues.weigh("default", "", 3)
    with pytest.raises(QueueNotFound, match="no queue is named 'nightly'"):
        sqlite_app.queues.weigh("nightly", "acme", 3)
    assert sqlite_app.queues.weights().weights == {}


@pytest.fixture
def served(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """``tickwork dashboard -A ops`` over an app with a fair-share task in ``reports``."""
    (tmp_path / "ops.py").write_text(
        textwrap.dedent(f"""
            from tickwork import App

            app = App("sqlite:///{tmp_path / "ops.db"}")


            @app.task(fair_key="tenant", queue="reports")
            def report(tenant: str) -> None: ...
        """)
    )
    env = {**clean_env, "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    with dashboard("ops", tmp_path, env) as base:
        yield base, tmp_path, env


def test_the_command_line_the_api_and_the_page_weigh_a_key(
    served: tuple[str, Path, dict[str, str]],
) -> None:
    base, cwd, env = served
    done = run_tickwork(cwd, env, "queues", "weigh", "reports", "acme", "3", "-A", "ops")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "reports: acme has weight 3"
    status, answer = call_api(base, "GET", "/queues/reports/weights")
    assert status == 200 and answer == {"queue": "reports", "weights": {"acme": 3}}, answer
    status, answer = call_api(base, "PUT", "/queues/reports/weights/globex", {"weight": 2})
    assert status == 200 and answer == {"queue": "reports", "weights": {"acme": 3, "globex": 2}}
    listed = run_tickwork(cwd, env, "queues", "weights", "reports", "--json", "-A", "ops")
    assert '"globex": 2' in listed.stdout, listed.stdout
    status, answer = call_api(base, "PUT", "/queues/reports/weights/acme", {"weight": None})
    assert status == 200 and answer == {"queue": "reports", "weights": {"globex": 2}}, answer
    assert 'data-queue="reports" data-key="globex"' in page_get(base, "/limits")
    fields = {"queue": "reports", "key": "initech", "weight": "5"}
    assert page_post(base, "/weights/weigh", fields) == 303
    status, answer = call_api(base, "GET", "/queues/reports/weights")
    assert answer == {"queue": "reports", "weights": {"globex": 2, "initech": 5}}, answer
    assert page_post(base, "/weights/weigh", {**fields, "weight": "1"}) == 303
    status, answer = call_api(base, "GET", "/queues/reports/weights")
    assert answer == {"queue": "reports", "weights": {"globex": 2}}, answer
    # bad input, in tickwork's words, from each surface
    status, answer = call_api(base, "PUT", "/queues/reports/weights/acme", {"weight": 0})
    assert status == 422, answer
    refused = run_tickwork(cwd, env, "queues", "weigh", "nightly", "acme", "3", "-A", "ops")
    assert refused.returncode != 0 and "no queue is named 'nightly'" in refused.stderr
    assert "Traceback" not in refused.stderr
    status, audit = call_api(base, "GET", "/audit?limit=10")
    assert isinstance(audit, list)
    weighed = [(a["actor"], a["target"]) for a in audit if a["action"] == "queue.weigh"]
    assert weighed[:4] == [
        ("dashboard", "reports/initech"),
        ("dashboard", "reports/initech"),
        ("api", "reports/acme"),
        ("api", "reports/globex"),
    ], weighed
