"""The app found the same way by every command: ``-A/--app`` (before or after the
command, or ``$TICKWORK_APP``) reads and writes the app's own backend, from a directory
other than the app's, through the installed console script; a read never creates a
database file; "not found" says where the command looked."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.served import run_tickwork

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shop(tmp_path: Path, clean_env: dict[str, str]) -> tuple[Path, Path, dict[str, str]]:
    """An app module in a folder of its own whose backend is a file in another folder;
    the directory commands run from (a third one); the environment that imports it."""
    app_dir, data_dir, elsewhere = (tmp_path / "app", tmp_path / "data", tmp_path / "cwd")
    for folder in (app_dir, data_dir, elsewhere):
        folder.mkdir()
    (app_dir / "shop.py").write_text(
        textwrap.dedent(f"""
            from datetime import timedelta

            from tickwork import App, Repeating

            app = App("sqlite:///{data_dir / "shop.db"}")


            @app.task(keep_result=True)
            def restock(item: str) -> str:
                return f"restocked {{item}}"


            @app.task
            def broken() -> None:
                raise RuntimeError("out of stock")


            @app.periodic(Repeating(interval=timedelta(hours=1)), key="hourly-restock")
            def hourly() -> None:
                pass
        """)
    )
    env = {**clean_env, "PYTHONPATH": f"{app_dir}:{ROOT}"}
    return elsewhere, data_dir, env


def test_every_read_given_the_app_finds_what_it_wrote(
    shop: tuple[Path, Path, dict[str, str]],
) -> None:
    cwd, data_dir, env = shop

    def ok(*args: str) -> str:
        done = run_tickwork(cwd, env, *args)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    message_id = ok("enqueue", "-A", "shop", "shop.restock", "--args", '["tea"]', "--key", "tea")
    message_id = message_id.strip()
    ok("-A", "shop", "enqueue", "shop.broken")
    ok("worker", "-A", "shop", "--burst", "--log-level", "warning")
    assert (data_dir / "shop.db").exists() and list(cwd.iterdir()) == []

    shown = json.loads(ok("show", "-A", "shop", "--id", message_id, "--json"))
    assert shown["status"] == "succeeded" and shown["result_value"] == "restocked tea"
    stats = json.loads(ok("-A", "shop", "stats", "--json"))
    assert [row["queue"] for row in stats] == ["default"]
    assert [row["queue"] for row in json.loads(ok("queues", "list", "-A", "shop", "--json"))] == [
        "default"
    ]
    schedules = json.loads(ok("schedules", "-A", "shop", "--json"))
    assert [row["key"] for row in schedules] == ["hourly-restock"]
    history = json.loads(ok("schedules", "history", "hourly-restock", "-A", "shop", "--json"))
    assert [entry["outcome"] for entry in history] == ["succeeded"]
    poisoned = json.loads(ok("poison", "list", "-A", "shop", "--json"))
    assert [record["error"] for record in poisoned] == ["out of stock"]
    assert "out of stock" in ok("poison", "show", poisoned[0]["id"], "-A", "shop")
    assert json.loads(ok("workers", "-A", "shop", "--json")) == []  # the burst worker left
    assert json.loads(ok("calendars", "list", "-A", "shop", "--json")) == {}

    # the same through the environment, as a shell profile or a container would set it
    by_env = {**env, "TICKWORK_APP": "shop"}
    done = run_tickwork(cwd, by_env, "show", "--key", "hourly-restock", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["task"] == "shop.hourly"
    assert list(cwd.iterdir()) == [], "no command wrote a file where it ran"


def test_a_read_without_the_app_names_what_it_missed_and_creates_nothing(
    shop: tuple[Path, Path, dict[str, str]],
) -> None:
    cwd, data_dir, env = shop
    for args in (("show", "--key", "tea"), ("schedules",), ("poison", "list"), ("stats",)):
        done = run_tickwork(cwd, env, *args)
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.count("\n") == 1, done.stderr
        assert f"no tickwork database at {cwd / 'tickwork.db'}" in done.stderr
        assert "-A/--app" in done.stderr
    assert list(cwd.iterdir()) == [], "a read created no database file"

    enqueued = run_tickwork(cwd, env, "-A", "shop", "enqueue", "shop.restock", "--args", '["tea"]')
    assert enqueued.returncode == 0, enqueued.stderr
    done = run_tickwork(cwd, env, "show", "-A", "shop", "--key", "nothing-here")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert f"no message with key 'nothing-here' in {data_dir / 'shop.db'}" in done.stderr
    done = run_tickwork(cwd, env, "schedules", "pause", "nothing-here", "-A", "shop")
    assert done.returncode == 1 and str(data_dir / "shop.db") in done.stderr

    done = run_tickwork(cwd, env, "enqueue", "shop.restock")
    assert done.returncode == 2 and "-A/--app MODULE" in done.stderr
