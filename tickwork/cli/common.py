"""Shared by every command: exit codes, error handling, the state the group passes down,
the options accepted after a subcommand too, and output helpers."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, ParamSpec, TypeVar

import click
from pydantic import ValidationError as PydanticValidationError
from rich.console import Console

from scheduler import (
    App,
    BackendError,
    ConfigurationError,
    InvalidMessage,
    QueueFull,
    ScheduleNotFound,
    TickworkError,
    WorkflowNotFound,
)
from scheduler.backends.records import QueueStats
from scheduler.clock import to_datetime
from workers import load_app

P = ParamSpec("P")
R = TypeVar("R")

EXIT_NOT_FOUND, EXIT_INVALID, EXIT_BACKEND, EXIT_INTERNAL, EXIT_FULL = 1, 2, 3, 4, 5


def fail(message: str, code: int = EXIT_INVALID) -> NoReturn:
    click.echo(f"tickwork: error: {message}", err=True)
    sys.exit(code)


def clean_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn our errors into one line on stderr and a meaningful exit code."""

    @wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (ScheduleNotFound, WorkflowNotFound) as err:
            fail(str(err), EXIT_NOT_FOUND)
        except (InvalidMessage, ConfigurationError) as err:
            fail(str(err))
        except PydanticValidationError as err:
            fail(" ; ".join(e["msg"] for e in err.errors()))
        except BackendError as err:
            fail(str(err), EXIT_BACKEND)
        except QueueFull as err:
            fail(str(err), EXIT_FULL)
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

    def __init__(self, backend: str | None, as_json: bool = False) -> None:
        self.backend = backend
        self.as_json = as_json
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


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=str))


def console() -> Console:
    """A console that does not squash tables when output goes to a pipe or a file."""
    return Console() if sys.stdout.isatty() else Console(width=220)


def iso(ms: int | None) -> str:
    return "-" if ms is None else to_datetime(ms).isoformat(timespec="milliseconds")


def fill(stats: QueueStats) -> str:
    """A bounded queue's fill as "pending/max_pending" ("-" without a bound)."""
    if stats.max_pending is None:
        return "-"
    return f"{stats.pending}/{stats.max_pending}"


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


def one_of(key: str | None, message_id: str | None) -> None:
    if (key is None) == (message_id is None):
        fail("give exactly one of --key and --id")


pass_state = click.make_pass_decorator(State)

#: Commands that can print JSON; ``tickwork --json`` before any other is an error.
JSON_COMMANDS = (
    "show",
    "history",
    "stats",
    "schedules",
    "poison",
    "queues",
    "cron",
    "workers",
    "workflow",
    "events",
    "calendars",
)


def _set_backend(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).backend = value


def _or_group_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    return value or ctx.ensure_object(State).as_json


def backend_option(command: Callable[P, R]) -> Callable[P, R]:
    """``--backend URL`` after the subcommand, overriding the one given before it."""
    return click.option(
        "--backend",
        metavar="URL",
        expose_value=False,
        callback=_set_backend,
        help="Backend URL (also accepted before the subcommand, or as $TICKWORK_BACKEND).",
    )(command)


def json_option(command: Callable[P, R]) -> Callable[P, R]:
    """``--json`` (also accepted before the subcommand), passed as ``as_json``."""
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        callback=_or_group_json,
        help="Print JSON instead of a table.",
    )(command)
