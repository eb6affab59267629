"""``tickwork``: run workers, enqueue, inspect and cancel messages, manage the poison queue.

Exit codes: 0 success; 1 nothing found (``show``/``cancel``/``poison show``); 2 invalid
input or configuration; 3 the backend failed or is unreachable; 4 an unexpected error.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import wraps
from typing import Any, NoReturn, ParamSpec, TypeVar

import click
from pydantic import ValidationError as PydanticValidationError
from rich.console import Console
from rich.table import Table

from scheduler import (
    App,
    BackendError,
    Call,
    ConfigurationError,
    InvalidMessage,
    OnConflict,
    TickworkError,
)
from scheduler.backends import open_backend
from scheduler.clock import to_datetime
from scheduler.message import Message
from triggers import Cron, Repeating, Trigger
from workers import Worker, WorkerConfig, load_app

P = ParamSpec("P")
R = TypeVar("R")

EXIT_NOT_FOUND, EXIT_INVALID, EXIT_BACKEND, EXIT_INTERNAL = 1, 2, 3, 4


def fail(message: str, code: int = EXIT_INVALID) -> NoReturn:
    click.echo(f"tickwork: error: {message}", err=True)
    sys.exit(code)


def clean_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn our errors into one line on stderr and a meaningful exit code."""

    @wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (InvalidMessage, ConfigurationError) as err:
            fail(str(err))
        except PydanticValidationError as err:
            fail(" ; ".join(e["msg"] for e in err.errors()))
        except BackendError as err:
            fail(str(err), EXIT_BACKEND)
        except TickworkError as err:
            fail(str(err))
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as err:
            if os.environ.get("TICKWORK_DEBUG"):
                raise
            fail(
                f"unexpected {type(err).__name__}: {err} (set TICKWORK_DEBUG=1 for a traceback)",
                EXIT_INTERNAL,
            )

    return wrapper


class State:
    """What the group passes to its commands: the backend URL and a lazily built App."""

    def __init__(self, backend: str | None) -> None:
        self.backend = backend
        self._app: App | None = None

    def app(self, module: str | None = None) -> App:
        if self._app is None:
            if module is None:
                self._app = App(self.backend)
            else:
                if os.getcwd() not in sys.path:
                    sys.path.insert(0, os.getcwd())
                try:
                    self._app = load_app(module)
                except (ImportError, TypeError) as err:
                    fail(f"cannot load the app from {module!r}: {err}")
                if self.backend is not None:
                    self._app.use_backend(self.backend)
        return self._app


pass_state = click.make_pass_decorator(State)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def console() -> Console:
    """A console that does not squash tables when output goes to a pipe or a file."""
    return Console() if sys.stdout.isatty() else Console(width=220)


def iso(ms: int | None) -> str:
    return "-" if ms is None else to_datetime(ms).isoformat(timespec="milliseconds")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--backend",
    envvar="TICKWORK_BACKEND",
    metavar="URL",
    help="Backend URL (sqlite:///file.db, redis://host:6379/0, ...); "
    "default: $TICKWORK_BACKEND, else sqlite:///tickwork.db.",
)
@click.version_option(package_name="tickwork")
@click.pass_context
def cli(ctx: click.Context, backend: str | None) -> None:
    """tickwork: tasks on run-once, repeating and cron triggers."""
    ctx.obj = State(backend)


# -- worker ----------------------------------------------------------------------------------


@cli.command()
@click.option(
    "-A", "--app", "module", required=True, help="Module (or module:attr) defining the App."
)
@click.option("-Q", "--queue", "queues", multiple=True, help="Queue to consume (repeatable).")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option(
    "--pool", type=click.Choice(["thread", "process"]), default="thread", show_default=True
)
@click.option(
    "--prefetch",
    type=click.IntRange(min=0),
    help="Claims held beyond idle slots [2 x concurrency].",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--lookahead-ms", type=click.IntRange(min=0), default=500, show_default=True)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="Seconds running handlers get to finish on shutdown.",
)
@click.option("--duration", type=click.FloatRange(min=0), help="Stop gracefully after S seconds.")
@click.option("--burst", is_flag=True, help="Exit when nothing is due or running.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
)
@pass_state
@clean_errors
def worker(
    state: State,
    module: str,
    queues: tuple[str, ...],
    concurrency: int,
    pool: str,
    prefetch: int | None,
    batch_size: int,
    lookahead_ms: int,
    grace: float,
    duration: float | None,
    burst: bool,
    log_level: str,
) -> None:
    """Run a worker daemon for the app in MODULE."""
    logging.basicConfig(
        level=log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(message)s"
    )
    app = state.app(module)
    if not queues:
        queues = tuple(sorted({t.options.queue for t in app.tasks.values()} or {"default"}))
    config = WorkerConfig(
        queues=queues,
        concurrency=concurrency,
        pool=pool,
        prefetch=prefetch,
        batch_size=batch_size,
        lookahead_ms=lookahead_ms,
        grace_s=grace,
        burst=burst,
        app_reference=module,
    )
    runner = Worker(app, config)
    runner.run(duration)
    app.close()
    if runner.forced:
        os._exit(1)  # running handlers were abandoned: do not wait for their threads


# -- enqueue ---------------------------------------------------------------------------------


def parse_json(value: str | None, kind: type, what: str) -> Any:
    if value is None:
        return kind()
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as err:
        fail(f"{what} is not valid JSON: {err}")
    if not isinstance(parsed, kind):
        fail(f"{what} must be a JSON {'array' if kind is list else 'object'}")
    return parsed


@cli.command()
@click.argument("task")
@click.option(
    "-A", "--app", "module", required=True, help="Module defining the task (for validation)."
)
@click.option("--args", "args_json", metavar="JSON", help="Positional arguments, a JSON array.")
@click.option("--kwargs", "kwargs_json", metavar="JSON", help="Keyword arguments, a JSON object.")
@click.option("--key", help="Key to read, replace or cancel the message by.")
@click.option("--queue", help="Queue [the task's].")
@click.option("--priority", type=int, help="Higher runs first among due messages.")
@click.option("--at", "at", metavar="ISO8601", help="Run once at this aware time.")
@click.option(
    "--delay", type=click.FloatRange(min=0), metavar="SECONDS", help="Run once after S seconds."
)
@click.option(
    "--every", type=click.FloatRange(min=0.001), metavar="SECONDS", help="Repeat every S seconds."
)
@click.option("--times", type=click.IntRange(min=1), help="With --every: total number of runs.")
@click.option("--cron", metavar="EXPR", help="Cron expression (5 fields, or 6 with seconds first).")
@click.option("--tz", default="UTC", show_default=True, help="With --cron: IANA timezone.")
@click.option(
    "--on-conflict",
    type=click.Choice([m.value for m in OnConflict]),
    default="error",
    show_default=True,
)
@pass_state
@clean_errors
def enqueue(
    state: State,
    task: str,
    module: str,
    args_json: str | None,
    kwargs_json: str | None,
    key: str | None,
    queue: str | None,
    priority: int | None,
    at: str | None,
    delay: float | None,
    every: float | None,
    times: int | None,
    cron: str | None,
    tz: str,
    on_conflict: str,
) -> None:
    """Enqueue TASK; prints the message id."""
    chosen = [
        name
        for name, v in (("--at", at), ("--delay", delay), ("--every", every), ("--cron", cron))
        if v is not None
    ]
    if len(chosen) > 1:
        fail(f"give at most one of --at, --delay, --every, --cron (got {', '.join(chosen)})")
    if times is not None and every is None:
        fail("--times needs --every")
    app = state.app(module)
    when: datetime | None = None
    if at is not None:
        try:
            when = datetime.fromisoformat(at)
        except ValueError:
            fail(f"--at {at!r} is not an ISO 8601 time")
        if when.tzinfo is None:
            fail(f"--at {at!r} has no timezone; add one, e.g. {at}+00:00 or {at}Z")
    trigger: Trigger | None = None
    if every is not None:
        trigger = Repeating(interval=timedelta(seconds=every), repeat_count=times)
    elif cron is not None:
        trigger = Cron(cron, tz=tz)
    call = Call(
        task,
        parse_json(args_json, list, "--args"),
        parse_json(kwargs_json, dict, "--kwargs"),
        key=key,
        at=when,
        delay=None if delay is None else timedelta(seconds=delay),
        trigger=trigger,
        queue=queue,
        priority=priority,
    )
    click.echo(app.enqueue(call, on_conflict=on_conflict))
    app.close()


# -- show and cancel -------------------------------------------------------------------------


def one_of(key: str | None, message_id: str | None) -> None:
    if (key is None) == (message_id is None):
        fail("give exactly one of --key and --id")


@cli.command()
@click.option("--key")
@click.option("--id", "message_id")
@click.option("--queue", default=None, help="Queue of the key [default].")
@pass_state
@clean_errors
def cancel(state: State, key: str | None, message_id: str | None, queue: str | None) -> None:
    """Cancel a message by key or id (a running one finishes but does not reschedule)."""
    one_of(key, message_id)
    app = state.app()
    if not app.cancel(id=message_id, key=key, queue=queue):
        fail(
            f"nothing to cancel for {'key ' + repr(key) if key else 'id ' + repr(message_id)}",
            EXIT_NOT_FOUND,
        )
    click.echo("cancelled")


@cli.command()
@click.option("--key")
@click.option("--id", "message_id")
@click.option("--queue", default=None, help="Queue of the key [default].")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@clean_errors
def show(
    state: State, key: str | None, message_id: str | None, queue: str | None, as_json: bool
) -> None:
    """Show a scheduled or running message by key or id."""
    one_of(key, message_id)
    found = state.app().get(id=message_id, key=key, queue=queue)
    if found is None:
        fail(
            f"no message with {'key ' + repr(key) if key else 'id ' + repr(message_id)}",
            EXIT_NOT_FOUND,
        )
    data = found.as_dict()
    if as_json:
        emit_json(data)
        return
    for name, value in data.items():
        click.echo(f"{name:>13}: {json.dumps(value) if isinstance(value, list | dict) else value}")


# -- stats and schedules ---------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_state
@clean_errors
def stats(state: State, as_json: bool) -> None:
    """Per queue: ready, scheduled, in flight, poison, next due time and counters."""
    rows = state.app().backend.stats()
    if as_json:
        emit_json(
            [
                {
                    "queue": s.queue,
                    "ready": s.ready,
                    "scheduled": s.scheduled,
                    "in_flight": s.in_flight,
                    "poison": s.poison,
                    "next_due": iso(s.next_due_ms),
                    "counters": s.counters,
                    "shards": s.shards,
                }
                for s in rows
            ]
        )
        return
    table = Table(
        "queue",
        "ready",
        "scheduled",
        "in flight",
        "poison",
        "next due",
        "enqueued",
        "claimed",
        "acked",
        "redelivered",
        "retried",
        "poisoned",
        "empty polls",
    )
    for s in rows:
        c = s.counters
        table.add_row(
            s.queue,
            str(s.ready),
            str(s.scheduled),
            str(s.in_flight),
            str(s.poison),
            iso(s.next_due_ms),
            *(
                str(c.get(n, 0))
                for n in (
                    "enqueued",
                    "claimed",
                    "acked",
                    "redelivered",
                    "retried",
                    "poisoned",
                    "empty_polls",
                )
            ),
        )
    console().print(table)


@cli.command()
@click.option("--queue", default=None)
@click.option("--json", "as_json", is_flag=True)
@pass_state
@clean_errors
def schedules(state: State, queue: str | None, as_json: bool) -> None:
    """Keyed recurring messages: trigger, next run, last run, misfires."""
    rows = state.app().schedules(queue)
    if as_json:
        emit_json(
            [
                {
                    "queue": r.queue,
                    "key": r.key,
                    "task": r.task,
                    "trigger": r.trigger.model_dump(mode="json", exclude_defaults=True),
                    "next_run": r.next_run.isoformat(),
                    "last_run": r.last_run and r.last_run.isoformat(),
                    "misfires": r.misfires,
                    "state": str(r.state),
                }
                for r in rows
            ]
        )
        return
    table = Table("queue", "key", "task", "trigger", "next run", "last run", "misfires", "state")
    for r in rows:
        trigger = json.dumps(r.trigger.model_dump(mode="json", exclude_defaults=True))
        table.add_row(
            r.queue,
            r.key,
            r.task,
            trigger,
            r.next_run.isoformat(timespec="seconds"),
            r.last_run.isoformat(timespec="seconds") if r.last_run else "-",
            str(r.misfires),
            str(r.state),
        )
    console().print(table)


# -- poison ----------------------------------------------------------------------------------


@cli.group()
def poison() -> None:
    """Inspect, replay or purge messages that failed for good."""


def poison_dict(record: Any) -> dict[str, Any]:
    try:
        body: Any = Message.decode(record.envelope.body).model_dump(
            mode="json", exclude_defaults=True
        )
    except TickworkError:
        body = record.envelope.body.decode("utf-8", "replace")
    return {
        "id": record.envelope.id,
        "queue": record.envelope.queue,
        "key": record.envelope.key,
        "attempts": record.attempts,
        "failed_at": iso(record.failed_at_ms),
        "reason": record.failure.reason,
        "error_type": record.failure.error_type,
        "error": record.failure.message,
        "traceback": record.failure.traceback,
        "message": body,
    }


@poison.command("list")
@click.option("--queue", default=None)
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_state
@clean_errors
def poison_list(state: State, queue: str | None, limit: int, as_json: bool) -> None:
    """List poisoned messages, oldest first."""
    records = [poison_dict(r) for r in state.app().backend.poison_list(queue, limit)]
    if as_json:
        emit_json(records)
        return
    table = Table("id", "queue", "key", "attempts", "failed at", "error")
    for r in records:
        table.add_row(
            r["id"],
            r["queue"],
            r["key"] or "-",
            str(r["attempts"]),
            r["failed_at"],
            f"{r['error_type']}: {r['error']}"[:80],
        )
    console().print(table)


@poison.command("show")
@click.argument("message_id")
@pass_state
@clean_errors
def poison_show(state: State, message_id: str) -> None:
    """Show one poisoned message with its error and traceback."""
    record = state.app().backend.poison_get(message_id)
    if record is None:
        fail(f"no poisoned message with id {message_id!r}", EXIT_NOT_FOUND)
    emit_json(poison_dict(record))


@poison.command("replay")
@click.argument("message_id", required=False)
@click.option(
    "--all", "replay_all", is_flag=True, help="Replay every poisoned message (of --queue)."
)
@click.option("--queue", default=None)
@pass_state
@clean_errors
def poison_replay(
    state: State, message_id: str | None, replay_all: bool, queue: str | None
) -> None:
    """Move poisoned messages back to their queue, due now, with fresh attempts."""
    if (message_id is None) == (not replay_all):
        fail("give a message id or --all")
    moved = state.app().backend.poison_replay(None if replay_all else [message_id], queue)  # type: ignore[list-item]
    if message_id is not None and moved == 0:
        fail(f"no replayable poisoned message with id {message_id!r}", EXIT_NOT_FOUND)
    click.echo(f"replayed {moved}")


@poison.command("purge")
@click.option("--queue", default=None)
@pass_state
@clean_errors
def poison_purge(state: State, queue: str | None) -> None:
    """Delete poisoned messages (of --queue, or all)."""
    click.echo(f"purged {state.app().backend.poison_purge(queue)}")


# -- cassandra -------------------------------------------------------------------------------


@cli.group()
def cassandra() -> None:
    """Cassandra backend administration."""


@cassandra.command("create-schema")
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="For a new keyspace [the URL's replication_factor, else 1].",
)
@pass_state
@clean_errors
def create_schema(state: State, replication_factor: int | None) -> None:
    """Create the keyspace and tables named by --backend (idempotent)."""
    url = state.backend or os.environ.get("TICKWORK_BACKEND", "")
    if not url.startswith("cassandra://"):
        fail("give a cassandra:// URL with --backend or TICKWORK_BACKEND")
    if replication_factor is not None:
        url += ("&" if "?" in url else "?") + f"replication_factor={replication_factor}"
    backend = open_backend(url)  # creates the schema unless create_schema=false
    backend.close()
    click.echo("schema ready")


def main() -> None:
    cli(prog_name="tickwork")
