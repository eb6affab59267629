"""Every example runs (its enqueue side) against a fresh database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.backends import backend_url
from tests.support.served import run_command, run_tickwork
from tickwork import App
from tickwork.scheduler import Message

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p.stem
    for p in (ROOT / "examples").glob("*.py")
    if p.stem not in ("__init__", "demo") and not p.stem.startswith("test_")
)
APP_OF = {"spark_invoices": "examples.billing.tasks"}  # examples whose app lives elsewhere
#: examples whose worker poisons a message on purpose (to show a replay, a retry rule...)
POISONS_ON_PURPOSE = {
    "abort": {"examples.abort.export"},  # aborted mid-run: recorded as failed for good
    "dashboard": {"examples.dashboard.charge"},  # a refused payment for the poison page
    "results": {"examples.results.charge"},  # a closed account: TaskFailed shown
    "retries_poison": {"examples.retries_poison.fragile"},  # retried, then poisoned
    "time_limits": {"examples.time_limits.stuck_report"},  # past its hard limit
    "throttle": {"examples.throttle.notify"},  # calls over the throttle: dropped, recorded
    "batching": {"examples.batching.notify"},  # addresses the provider refuses for good
    "workflows": {"examples.workflows.thumbnail"},  # a corrupt photo in a batch
}
#: examples that need a PostgreSQL server
ON_POSTGRES = {"postgres_orders", "postgres_sqlalchemy", "postgres_django"}


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_runs(name: str, tmp_path: Path, clean_env: dict[str, str]) -> None:
    url = backend_url("postgres" if name in ON_POSTGRES else "sqlite", tmp_path)
    env = {**clean_env, "TICKWORK_BACKEND": url, "PYSPARK_PYTHON": sys.executable}
    done = run_command([sys.executable, "-m", f"examples.{name}"], ROOT, env)
    assert done.returncode == 0, done.stderr
    if name in ON_POSTGRES:  # what was rolled back left nothing behind
        assert "messages waiting: 1" in done.stdout, done.stdout
    module = APP_OF.get(name, f"examples.{name}")
    options = ("--duration", "2", "--log-level", "warning")
    worker = run_tickwork(ROOT, env, "worker", "-A", module, *options)
    assert worker.returncode == 0, worker.stderr
    # and what it ran ended as the example means it to: nothing poisoned but what the
    # example poisons on purpose
    with App(url) as app:
        poisoned = {Message.decode(r.envelope.body).task for r in app.backend.poison.list()}
    expected = POISONS_ON_PURPOSE.get(name, set())
    assert poisoned == expected, (poisoned, worker.stderr[-3000:])


def test_the_example_tests_pass_with_the_plugin_alone(clean_env: dict[str, str]) -> None:
    """``examples/test_signup.py`` uses ``tickwork.testing``'s fixture with no conftest:
    the plugin comes with the installed package (its ``pytest11`` entry point)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["--rootdir", str(ROOT / "examples"), "examples/test_signup.py"]
    done = run_command(command, ROOT, clean_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_make_demo_shows_each_firing_none_early_then_the_schedules_and_stats(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """``make demo``, as the README says, from another directory (shorter, and its
    database in a scratch directory; the virtual environment is not remade): a line per
    firing (its key, occurrence, due and run times, lateness), three occurrences of one
    repeating schedule, a cron firing, the cancel by key, a summary that counts none
    early; then ``tickwork schedules`` lists the cron left and ``tickwork stats`` its
    queue."""
    demo = tmp_path / "demo"
    command = ["make", "-C", str(ROOT), "-o", ".venv/.installed", "demo"]
    done = subprocess.run(
        [*command, f"DEMO_DIR={demo}", "DEMO_SECONDS=10"],
        cwd=tmp_path,
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (demo / "tickwork.db").exists()
    shown = done.stdout.split("see them in the dashboard:", 1)[1]
    schedules, stats = shown.split("tickwork stats", 1)
    assert "heartbeat" in schedules and "report:42" in schedules, shown
    assert "default" in stats and "acked" in stats, shown
    lines = [line for line in done.stdout.splitlines() if not line.startswith("make")]
    fired = [line for line in lines if line.startswith("fired ")]
    assert all(line.count("fired") == 1 and " due " in line for line in fired), fired
    repeating = [line for line in fired if "key=report:42" in line]
    assert [line.split()[3] for line in repeating[:3]] == ["#1", "#2", "#3"], fired
    assert any("key=heartbeat" in line for line in fired), fired
    assert "enqueued and cancelled by key: report:5 (cancelled)" in lines
    assert not any("key=report:5" in line for line in fired), "a cancelled schedule never runs"
    (summary,) = [line for line in lines if "firings; lateness p50" in line]
    assert summary.startswith(f"{len(fired)} firings") and summary.endswith("early 0")
    (dashboard,) = [line for line in lines if line.startswith("see them in the dashboard:")]
    assert dashboard.startswith("see them in the dashboard: tickwork dashboard --backend sqlite")
