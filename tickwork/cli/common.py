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

from tickwork.scheduler import (
    App,
    BackendError,
    CalendarNotFound,
    ConfigurationError,
    InvalidMessage,
    QueueFull,
    ScheduleNotFound,
    TickworkError,
    WorkflowNotFound,
)
from tickwork.scheduler.backends import DEFAULT_URL, redacted, sqlite_file
from tickwork.scheduler.backends.records import QueueStats
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.loading import load_app

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
        except (ScheduleNotFound, WorkflowNotFound, CalendarNotFound) as err:
            not_found(str(err))
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
    """What the group passes to its commands: the app's module, the backend URL, and the
    App (built on first use: the module's, on the backend URL when one is given)."""

    def __init__(
        self, backend: str | None = None, as_json: bool = False, module: str | None = None
    ) -> None:
        self.backend = backend
        self.as_json = as_json
        self.module = module
        self._app: App | None = None

    def app(self, module: str | None = None, *, reading: bool = False) -> App:
        """The app of ``module`` (else of ``-A``/``$TICKWORK_APP``; else a bare ``App`` on
        the backend URL). ``reading``: a command that only reads refuses to open (and so
        create) a SQLite file that does not exist."""
        if self._app is None:
            module = module or self.module
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
        if reading:
            self._refuse_a_missing_file(self._app)
        return self._app

    def url(self) -> str:
        """The backend URL a command works on: ``--backend``, else the app's (``-A``),
        else ``$TICKWORK_BACKEND``, else the default."""
        if self.backend is not None:
            return self.backend
        if self.module is not None:
            return self.app().backend_url or DEFAULT_URL
        return os.environ.get("TICKWORK_BACKEND") or DEFAULT_URL

    def where(self) -> str:
        """Where the command looked, for a "not found" message."""
        url = self._app.backend_url if self._app is not None else self.url()
        if url is None:
            return "in the app's backend"
        path = sqlite_file(url)
        if path:
            return f"in {os.path.abspath(path)} ({redacted(url)})"
        return f"in {redacted(url)}"

    def _refuse_a_missing_file(self, app: App) -> None:
        url = app.backend_url
        path = sqlite_file(url) if url is not None else None
        if path and path != ":memory:" and not os.path.exists(path):
            fail(
                f"no tickwork database at {os.path.abspath(path)} ({redacted(url or '')}): "
                "name the app with -A/--app MODULE (or $TICKWORK_APP), or its backend "
                "with --backend URL (or $TICKWORK_BACKEND)",
                EXIT_NOT_FOUND,
            )


def not_found(what: str) -> NoReturn:
    """Exit 1 with ``what`` was not found, and where the command looked."""
    state = click.get_current_context().find_object(State)
    fail(f"{what} {state.where()}" if state is not None else what, EXIT_NOT_FOUND)


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
    "limits",
)


def _set_backend(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).backend = value


def _set_module(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).module = value


def _or_group_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    return value or ctx.ensure_object(State).as_json


APP_HELP = "Module (or module:attr) defining the App: its tasks, and its backend unless "
BACKEND_HELP = "Backend URL (sqlite:///file.db, redis://host:6379/0, ...)"


def app_options(command: Callable[P, R]) -> Callable[P, R]:
    """``-A/--app MODULE`` and ``--backend URL`` after the subcommand, overriding those
    given before it (or as ``$TICKWORK_APP`` / ``$TICKWORK_BACKEND``)."""
    command = click.option(
        "--backend",
        metavar="URL",
        expose_value=False,
        callback=_set_backend,
        help=f"{BACKEND_HELP}; overrides the app's (also before the subcommand, or "
        "$TICKWORK_BACKEND).",
    )(command)
    return click.option(
        "-A",
        "--app",
        "module",
        metavar="MODULE",
        expose_value=False,
        callback=_set_module,
        help=f"{APP_HELP}--backend is given (also before the subcommand, or $TICKWORK_APP).",
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
