"""The command line, through click's runner and through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.served import ROOT, run_tickwork
from tickwork.cli import cli


@pytest.fixture
def run(sqlite_url: str):  # type: ignore[no-untyped-def]
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, ["--backend", sqlite_url, *args], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return invoke


def test_enqueue_show_cancel_by_key(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(
        "enqueue",
        "tests.support.cli_tasks.greet",
        "-A",
        "tests.support.cli_tasks",
        "--args",
        '["ada"]',
        "--kwargs",
        '{"times": 2}',
        "--key",
        "g1",
        "--delay",
        "60",
    )
    assert code == 0
    message_id = out.strip()
    code, out, _ = run("show", "--key", "g1", "--json")
    data = json.loads(out)
    assert code == 0 and data["id"] == message_id and data["args"] == ["ada"]
    assert data["kwargs"] == {"times": 2} and data["state"] == "scheduled"
    code, out, _ = run("show", "--id", message_id)
    assert code == 0 and "scheduled" in out
    assert run("cancel", "--key", "g1")[0] == 0
    code, _, err = run("cancel", "--key", "g1")
    assert code == 1 and err.count("\n") == 1 and "nothing to cancel" in err


def test_show_by_id_tells_what_a_run_returned(run) -> None:  # type: ignore[no-untyped-def]
    args = ("enqueue", "tests.support.cli_tasks.total", "-A", "tests.support.cli_tasks")
    code, out, _ = run(*args, "--args", "[[1, 2, 3]]")
    message_id = out.strip()
    shown = json.loads(run("show", "--id", message_id, "--json")[1])
    assert shown["state"] == "ready" and "status" not in shown, "no record kept yet"
    run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    code, out, _ = run("show", "--id", message_id, "--json")
    shown = json.loads(out)
    assert code == 0 and shown["status"] == "succeeded"
    assert shown["result_value"] == {"total": 6} and shown["result_attempt"] == 1
    assert 'result_value: {"total": 6}' in run("show", "--id", message_id)[1]


def test_workers_lists_the_registry(run, sqlite_url: str) -> None:  # type: ignore[no-untyped-def]
    from tickwork.scheduler import App

    app = App(sqlite_url)
    app.backend.now_ms()  # the database exists, no worker has registered yet
    code, out, _ = run("workers", "--json")
    assert (code, json.loads(out)) == (0, [])
    record = {
        "id": "w1",
        "host": "h",
        "pid": 7,
        "queues": ["default"],
        "concurrency": 8,
        "pool": "thread",
        "started_at": "2026-11-23T00:00:00Z",
        "last_seen": "2026-11-23T00:00:01Z",
        "interval_s": 5.0,
    }
    app.backend.registry.put("w1", json.dumps(record).encode(), 60_000)
    app.close()
    (row,) = json.loads(run("workers", "--json")[1])
    assert row["id"] == "w1" and row["alive"] is False, "not seen for days: gone"
    code, out, _ = run("workers")
    assert code == 0 and "w1" in out and "gone" in out and "thread x8" in out


def test_abort_a_running_and_a_pending_message(run, sqlite_url: str) -> None:  # type: ignore[no-untyped-def]
    from tickwork.scheduler import App

    for key in ("running", "pending"):
        args = ("enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks")
        assert run(*args, "--args", '["ada"]', "--key", key)[0] == 0
    app = App(sqlite_url)
    claims = app.backend.leases.claim("default", 1).claims  # as a worker would: now it runs
    running_key = claims[0].key
    pending_key = "pending" if running_key == "running" else "running"
    code, out, _ = run("abort", "--key", running_key, "--end-chain")
    assert code == 0 and "abort requested" in out
    (request,) = app.backend.aborts.pending()
    assert request.message_id == claims[0].id and not request.continue_chain
    code, out, _ = run("abort", "--key", pending_key)
    assert code == 0 and "cancelled" in out
    code, _, err = run("abort", "--key", pending_key)
    assert code == 1 and err.count("\n") == 1 and "nothing to abort" in err
    app.close()
    code, _, err = run("show", "--key", "g1")
    assert code == 1 and "no message" in err


def test_enqueue_repeating_and_cron_then_schedules(run) -> None:  # type: ignore[no-untyped-def]
    assert (
        run(
            "enqueue",
            "tests.support.cli_tasks.greet",
            "-A",
            "tests.support.cli_tasks",
            "--args",
            '["a"]',
            "--every",
            "30",
            "--times",
            "3",
            "--key",
            "every",
        )[0]
        == 0
    )
    assert (
        run(
            "enqueue",
            "tests.support.cli_tasks.greet",
            "-A",
            "tests.support.cli_tasks",
            "--args",
            '["b"]',
            "--cron",
            "0 9 * * MON-FRI",
            "--tz",
            "Europe/Paris",
            "--key",
            "cron",
        )[0]
        == 0
    )
    code, out, _ = run("schedules", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == {"every", "cron"}
    assert rows["cron"]["trigger_spec"]["tz"] == "Europe/Paris"
    assert rows["every"]["trigger_spec"]["repeat_count"] == 3
    code, out, _ = run("schedules")
    assert code == 0 and "every" in out


def test_on_conflict_modes(run) -> None:  # type: ignore[no-untyped-def]
    base = (
        "enqueue",
        "tests.support.cli_tasks.greet",
        "-A",
        "tests.support.cli_tasks",
        "--key",
        "k",
        "--delay",
        "60",
    )
    assert run(*base, "--args", '["a"]')[0] == 0
    code, _, err = run(*base, "--args", '["b"]')
    assert code == 2 and "already has a message with key" in err
    assert run(*base, "--args", '["c"]', "--on-conflict", "replace")[0] == 0
    assert json.loads(run("show", "--key", "k", "--json")[1])["args"] == ["c"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--args", "[1, 2"], "not valid JSON"),
        (["--args", '{"a": 1}'], "JSON array"),
        (["--args", '["x"]', "--kwargs", '{"times": "many"}'], "times"),
        (["--args", '["x"]', "--at", "2030-01-01T00:00:00"], "no timezone"),
        (["--args", '["x"]', "--at", "tomorrow"], "ISO 8601"),
        (["--args", '["x"]', "--delay", "5", "--every", "5"], "at most one"),
        (["--args", '["x"]', "--times", "5"], "--times needs --every"),
        (["--args", '["x"]', "--cron", "61 * * * *"], "the minute field '61' takes 0-59"),
        (["--args", '["x"]', "--cron", "* * * * *", "--tz", "Nowhere/City"], "unknown timezone"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(  # type: ignore[no-untyped-def]
    run, sqlite_url: str, args: list[str], needle: str
) -> None:
    from tickwork.scheduler import App

    with App(sqlite_url) as app:
        app.backend.now_ms()  # the database exists: the check below reads it
    code, _out, err = run(
        "enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks", *args
    )
    assert code == 2, err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert "pydantic" not in err, "in tickwork's words"
    stats = json.loads(run("stats", "--json")[1])
    assert sum(q["ready"] + q["scheduled"] for q in stats) == 0


def test_unknown_task_and_module(run) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run("enqueue", "nope", "-A", "tests.support.cli_tasks")
    assert code == 2 and "no task named 'nope'" in err
    assert "the app's tasks: tests.support.cli_tasks.explode, " in err, "what there is"
    code, _, err = run("enqueue", "greet", "-A", "tests.support.cli_tasks")
    assert code == 2 and "did you mean 'tests.support.cli_tasks.greet'?" in err
    code, _, err = run("enqueue", "tests.support.cli_tasks.gret", "-A", "tests.support.cli_tasks")
    assert "did you mean 'tests.support.cli_tasks.greet'?" in err, "a typo"
    code, _, err = run("enqueue", "nope", "-A", "no_such_module_anywhere")
    assert code == 2 and "cannot load the app" in err


def test_worker_burst_stats_and_poison(run) -> None:  # type: ignore[no-untyped-def]
    run(
        "enqueue",
        "tests.support.cli_tasks.greet",
        "-A",
        "tests.support.cli_tasks",
        "--args",
        '["w"]',
    )
    run("enqueue", "tests.support.cli_tasks.explode", "-A", "tests.support.cli_tasks")
    code, _, _ = run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    assert code == 0
    stats = {q["queue"]: q for q in json.loads(run("stats", "--json")[1])}
    counters = stats["default"]["counters"]
    assert (
        counters["acked"] == 1 and counters["poisoned"] == 1 and stats["default"]["poisoned"] == 1
    )
    code, out, _ = run("stats")
    assert code == 0 and "default" in out
    (record,) = json.loads(run("poison", "list", "--json")[1])
    assert record["error_type"] == "RuntimeError" and "kaboom" in record["error"]
    shown = json.loads(run("poison", "show", record["id"])[1])
    assert "Traceback" in shown["traceback"]
    assert run("poison", "show", "missing")[0] == 1
    assert run("poison", "replay", record["id"])[1].strip() == "replayed 1"
    run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    assert run("poison", "replay", "--all")[1].strip() == "replayed 1"
    assert run("poison", "replay")[0] == 2
    assert run("poison", "purge")[1].strip() == "purged 0"
    run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    # a filter that matches nothing takes nothing; one that matches takes it
    assert run("poison", "replay", "--all", "--task", "greet")[1].strip() == "replayed 0"
    assert run("poison", "purge", "--match", "no such error")[1].strip() == "purged 0"
    assert run("poison", "purge", "--queue", "other", record["id"])[1].strip() == "purged 0"
    explode = "tests.support.cli_tasks.explode"
    assert run("poison", "replay", "--all", "--task", explode, "--match", "KABOOM")[1].strip() == (
        "replayed 1"
    )
    run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    assert run("poison", "purge", "--queue", "default", "--reason", "exception")[1].strip() == (
        "purged 1"
    )


def test_the_real_console_script(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**clean_env, "TICKWORK_BACKEND": sqlite_url, "PYTHONPATH": str(ROOT)}
    done = run_tickwork(tmp_path, env, "--help")
    assert done.returncode == 0 and "worker" in done.stdout and "poison" in done.stdout
    greet = ("-A", "tests.support.cli_tasks")
    done = run_tickwork(
        tmp_path, env, "enqueue", "tests.support.cli_tasks.greet", *greet, "--args", '["cli"]'
    )
    assert done.returncode == 0, done.stderr
    done = run_tickwork(tmp_path, env, "worker", *greet, "--burst", "--log-level", "debug")
    assert done.returncode == 0 and "hello cli" in done.stdout
    assert "fire tests.support.cli_tasks.greet" in done.stderr and "scheduled=" in done.stderr
    done = run_tickwork(tmp_path, env, "--backend", "nosuch://x", "stats")
    assert (
        done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown backend" in done.stderr
    )
    missing = f"sqlite:///{tmp_path}/no/dir/x.db"
    done = run_tickwork(tmp_path, env, "--backend", missing, "queues", "pause", "default")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    done = run_tickwork(tmp_path, env, "--backend", missing, "stats")
    assert done.returncode == 1 and "no tickwork database at" in done.stderr


def test_a_script_run_directly_names_tasks_as_its_worker_will(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """``python app.py`` enqueues ``app.send``, the task ``tickwork worker -A app`` runs."""
    script = tmp_path / "app.py"
    script.write_text(
        "from tickwork.scheduler import App\n"
        "app = App()\n"
        "@app.task\n"
        "def send(n: int) -> None: print('sent', n)\n"
        "if __name__ == '__main__':\n"
        "    print(sorted(app.tasks)); send.delay(1)\n"
    )
    env = {**clean_env, "TICKWORK_BACKEND": f"sqlite:///{tmp_path / 'app.db'}"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and "['app.send']" in done.stdout, done.stderr
    worker = subprocess.run(
        [sys.executable, "-m", "tickwork", "worker", "-A", "app", "--burst"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert worker.returncode == 0 and "sent 1" in worker.stdout, worker.stderr


def test_global_options_after_the_subcommand(sqlite_url: str, tmp_path: Path) -> None:
    runner = CliRunner()

    def invoke(*args: str) -> tuple[int, str, str]:
        result = runner.invoke(cli, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    other = f"sqlite:///{tmp_path}/other.db"
    code, _, err = invoke(
        "enqueue",
        "tests.support.cli_tasks.greet",
        "-A",
        "tests.support.cli_tasks",
        "--args",
        '["after"]',
        "--backend",
        sqlite_url,
    )
    assert code == 0, err
    # after the subcommand wins over before it
    code, out, _ = invoke("--backend", other, "stats", "--json", "--backend", sqlite_url)
    assert code == 0 and json.loads(out)[0]["ready"] == 1
    code, _, err = invoke(
        "worker",
        "-A",
        "tests.support.cli_tasks",
        "--burst",
        "--log-level",
        "warning",
        "--backend",
        other,
    )
    assert code == 0, err
    code, out, _ = invoke("--json", "--backend", sqlite_url, "stats")
    assert code == 0 and json.loads(out)[0]["ready"] == 1
    code, out, _ = invoke("--json", "--backend", sqlite_url, "poison", "list")
    assert code == 0 and json.loads(out) == []
    code, _, err = invoke("--json", "--backend", sqlite_url, "cancel", "--key", "k")
    assert code == 2 and "--json applies to" in err and err.count("\n") == 1


def test_queues_pause_resume_list(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("queues", "pause", "default")
    assert code == 0 and out.strip() == "paused default"
    assert run("queues", "pause", "default")[1].strip() == "default was already paused"
    run(
        "enqueue",
        "tests.support.cli_tasks.greet",
        "-A",
        "tests.support.cli_tasks",
        "--args",
        '["p"]',
    )
    (row,) = json.loads(run("queues", "list", "--json")[1])
    assert row.pop("counters")["enqueued"] == 1 and row.pop("next_due") is not None
    assert row == {
        "queue": "default",
        "paused": True,
        "ready": 1,
        "scheduled": 0,
        "in_flight": 0,
        "poisoned": 0,
        "pending": 1,
        "max_pending": None,
    }
    (stats,) = json.loads(run("stats", "--json")[1])
    assert stats["paused"] is True
    assert set(stats) == {*row, "counters", "next_due", "shards"}, "the API's view, and shards"
    code, _, _ = run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    assert code == 0 and json.loads(run("stats", "--json")[1])[0]["ready"] == 1
    assert run("queues", "resume", "default")[1].strip() == "resumed default"
    code, _, err = run("queues", "resume", "default")
    assert code == 1 and "not paused" in err
    run("worker", "-A", "tests.support.cli_tasks", "--burst", "--log-level", "warning")
    assert json.loads(run("stats", "--json")[1])[0]["ready"] == 0


def test_queues_set_a_bound_that_enqueue_honours(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("queues", "set", "default", "--max-pending", "1")
    assert code == 0 and out.strip() == "default: at most 1 pending"
    greet = ("enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks")
    assert run(*greet, "--args", '["a"]')[0] == 0
    (row,) = json.loads(run("queues", "list", "--json")[1])
    assert (row["pending"], row["max_pending"]) == (1, 1)
    assert json.loads(run("stats", "--json")[1])[0]["max_pending"] == 1
    assert "1/1" in run("queues", "list")[1]
    code, _, err = run(*greet, "--args", '["x"]', "--no-block")
    assert code == 5 and "queue 'default' is full (max_pending 1)" in err
    code, _, err = run(*greet, "--args", '["x"]', "--block-timeout", "0.2")
    assert code == 5 and "after waiting 0.2 s" in err
    code, _, err = run("queues", "set", "default")
    assert code == 2 and "exactly one of --max-pending N and --unbounded" in err
    code, _, err = run("queues", "set", "default", "--max-pending", "0")
    assert code == 2
    code, out, _ = run("queues", "set", "default", "--unbounded")
    assert code == 0 and out.strip() == "default: unbounded"
    assert run(*greet, "--args", '["b"]')[0] == 0
    assert json.loads(run("queues", "list", "--json")[1])[0]["max_pending"] is None


def test_cron_explain_and_schedules_preview(run) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("cron", "explain", "30 2 * * *", "--tz", "Europe/Paris", "-n", "3")
    assert code == 0 and "fixed-time schedule" in out and out.count("02:30:00") == 3
    code, out, _ = run("--json", "cron", "explain", "*/15 * * * *", "-n", "4")
    fires = json.loads(out)
    assert code == 0 and [f["occurrence"] for f in fires] == [0, 1, 2, 3]
    code, _, err = run("cron", "explain", "61 * * * *")
    assert code == 2 and err.count("\n") == 1
    code, _, _ = run(
        "enqueue",
        "tests.support.cli_tasks.greet",
        "-A",
        "tests.support.cli_tasks",
        "--args",
        '["c"]',
        "--cron",
        "0 9 * * *",
        "--tz",
        "Asia/Tokyo",
        "--key",
        "morning",
    )
    assert code == 0
    code, out, _ = run("schedules", "preview", "morning", "-n", "2", "--json")
    fires = json.loads(out)
    assert code == 0 and len(fires) == 2 and all("T09:00:00+09:00" in f["wall"] for f in fires)
    code, out, _ = run("schedules")
    assert code == 0 and "morning" in out and "cron 0 9 * * * Asia/Tokyo" in out
    assert "09:00:00 JST" in out, "next run in the schedule's own timezone"
    (row,) = json.loads(run("schedules", "--json")[1])
    assert row["trigger"] == "cron 0 9 * * * Asia/Tokyo" and row["timezone"] == "Asia/Tokyo"
    assert row["next_run"].endswith("T00:00:00Z"), "UTC in JSON"
    code, _, err = run("schedules", "preview", "missing")
    assert code == 1 and "no schedule holds the key 'missing'" in err


def test_schedules_pause_resume_trigger(run) -> None:  # type: ignore[no-untyped-def]
    args = ("enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks")
    assert run(*args, "--args", '["d"]', "--every", "3600", "--key", "hourly")[0] == 0
    code, out, _ = run("schedules", "pause", "hourly")
    assert (code, out.strip()) == (0, "paused")
    assert run("schedules", "pause", "hourly")[1].strip() == "already paused"
    (row,) = json.loads(run("schedules", "--json")[1])
    assert row["state"] == "paused" and row["paused_at"] is not None
    assert "paused" in run("schedules")[1]
    code, out, _ = run("schedules", "trigger", "hourly")
    assert code == 0
    shown = json.loads(run("show", "--id", out.strip(), "--json")[1])
    headers = {"tickwork-origin": "manual", "tickwork-schedule": "hourly"}
    assert shown["headers"] == headers and shown["args"] == ["d"]
    code, out, _ = run("schedules", "resume", "hourly", "--misfire", "coalesce")
    assert code == 0 and out.startswith("resumed: next run") and "skipped 0" in out
    assert run("schedules", "resume", "hourly")[1].strip() == "not paused"
    (row,) = json.loads(run("schedules", "--json")[1])
    assert row["state"] in ("scheduled", "ready") and row["paused_at"] is None
    for command in ("pause", "resume", "trigger"):
        code, _, err = run("schedules", command, "missing")
        assert code == 1 and err.count("\n") == 1 and "'missing'" in err, command
    code, _, err = run("schedules", "resume", "hourly", "--misfire", "later")
    assert code == 2


def test_schedules_backfill(run) -> None:  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime, timedelta

    args = ("enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks")
    assert run(*args, "--args", '["e"]', "--cron", "0 * * * *", "--key", "hourly")[0] == 0
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = (hour - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S")  # bare: UTC
    code, out, _ = run("schedules", "backfill", "hourly", "--start", start, "--end", "2100-01-01")
    assert (code, out.strip()) == (
        0,
        "3 occurrence(s) in the range: enqueued 3, 0 backfilled before",
    )
    code, out, _ = run(
        "schedules", "backfill", "hourly", "--start", start, "--end", hour.isoformat(), "--json"
    )
    done = json.loads(out)
    assert code == 0 and (done["enqueued"], done["already"]) == (0, 3)
    assert done["occurrences"][0] == (hour - timedelta(hours=2)).isoformat()
    code, _, err = run("schedules", "backfill", "hourly", "--start", "yesterday", "--end", start)
    assert code == 2 and "not an ISO 8601 time" in err
    code, _, err = run(
        "schedules", "backfill", "hourly", "--start", "2000-01-01", "--end", start, "--limit", "5"
    )
    assert code == 2 and err.count("\n") == 1 and "more than 5 occurrences" in err


def test_schedules_check_is_a_dead_mans_switch(run, sqlite_url: str) -> None:  # type: ignore[no-untyped-def]
    import time as time_module
    from datetime import timedelta

    from tests.support import cli_tasks
    from tickwork.scheduler import App, Call
    from tickwork.scheduler.clock import ManualClock
    from tickwork.triggers import Repeating

    args = ("enqueue", "tests.support.cli_tasks.greet", "-A", "tests.support.cli_tasks")
    assert run(*args, "--args", '["e"]', "--every", "3600", "--key", "hourly")[0] == 0
    code, out, _ = run("schedules", "check", "--max-late", "5m")
    assert (code, out.strip()) == (0, "all 1 schedules on time")
    for bad, why in (("-1h", "must not be negative"), ("soon", "is not a duration")):
        code, _, err = run("schedules", "check", "--max-late", bad)
        assert code == 2 and why in err, bad
    # a schedule enqueued two hours ago, due then, that never ran: overdue
    two_hours_ago = int(time_module.time() * 1000) - 2 * 3600 * 1000
    app = App(sqlite_url, clock=ManualClock(two_hours_ago))
    app.include(cli_tasks.greet)
    every_hour = Repeating(interval=timedelta(hours=1))
    app.enqueue(Call(cli_tasks.greet.name, ("h",), trigger=every_hour, key="stale"))
    app.close()
    code, out, _ = run("schedules", "check", "--max-late", "5m")
    assert code == 1 and out.count("overdue:") == 1 and "stale" in out and "never" in out
    code, out, _ = run("schedules", "check", "--max-late", "5m", "--json")
    (late,) = json.loads(out)
    assert code == 1 and late["key"] == "stale" and late["last_success"] is None
    assert run("schedules", "check", "--max-late", "3h")[0] == 0


def test_worker_json_logs_carry_the_message_fields(
    sqlite_url: str, clean_env: dict[str, str]
) -> None:
    import subprocess
    import sys

    from tests.support import cli_tasks

    cli_tasks.app.use_backend(sqlite_url)
    message_id = cli_tasks.greet.schedule(args=("ada",), key="hello")
    cli_tasks.app.close()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tickwork",
            "worker",
            "-A",
            "tests.support.cli_tasks",
            "--burst",
            "--log-format",
            "json",
            "--log-level",
            "debug",
            "--backend",
            sqlite_url,
        ],
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    fired = [line for line in lines if line["message"].startswith("fire ")]
    finished = [line for line in lines if line["message"].startswith("done ")]
    assert len(fired) == 1 and len(finished) == 1
    for line in (*fired, *finished):
        assert line["message_id"] == message_id and line["task"] == cli_tasks.greet.name
        assert line["key"] == "hello" and line["attempt"] == 1 and line["queue"] == "default"
        assert line["lateness_ms"] >= 0
    assert finished[0]["run_ms"] >= 0


def test_worker_log_lines_are_buffered_but_seen_while_it_runs(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    """Info and debug lines go out in batches (every 0.1 s), not one write each: a running
    worker's lines (a run's, at debug) reach its log without waiting for it to exit."""
    import time as time_module

    from tests.support import cli_tasks

    cli_tasks.app.use_backend(sqlite_url)
    message_id = cli_tasks.greet.delay("ada")
    cli_tasks.app.close()
    log = tmp_path / "worker.log"
    command = [sys.executable, "-m", "tickwork", "worker", "-A", "tests.support.cli_tasks"]
    with log.open("wb") as stderr:
        worker = subprocess.Popen(
            [*command, "--backend", sqlite_url, "--log-level", "debug"],
            env=clean_env,
            stderr=stderr,
        )
    try:
        deadline = time_module.monotonic() + 60
        while f"done {cli_tasks.greet.name} id={message_id}" not in log.read_text():
            assert worker.poll() is None, log.read_text()
            assert time_module.monotonic() < deadline, "the run's line never reached the log"
            time_module.sleep(0.05)
    finally:
        worker.terminate()
        worker.wait(30)
    assert "worker stopped" in log.read_text(), "the last lines are written at exit"
