"""Running one handler, in a pool thread or a pool process, and describing what happened."""

from __future__ import annotations

import importlib
import traceback
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scheduler import App, InvalidMessage, UnknownTask


class Verdict(StrEnum):
    ACK = "ack"  # the handler returned
    REDELIVER = "redeliver"  # the handler returned False: no ack, due again after its lease
    FAIL = "fail"  # the handler raised: retry with backoff, or poison
    POISON = "poison"  # the message can never run (unknown task, arguments no longer valid)


@dataclass(frozen=True, slots=True)
class HandlerResult:
    verdict: Verdict
    error_type: str = ""
    error: str = ""
    traceback: str = ""
    duration_ms: float = 0.0


def run_handler(app: App, task_name: str, args: list[Any], kwargs: dict[str, Any]) -> HandlerResult:
    """Run a task's handler and classify the outcome. Never raises."""
    import time

    started = time.perf_counter()
    try:
        task = app.lookup(task_name)
        returned = task.run(args, kwargs)
    except (UnknownTask, InvalidMessage) as err:
        return HandlerResult(Verdict.POISON, type(err).__name__, str(err), traceback.format_exc())
    except Exception as err:
        return HandlerResult(
            Verdict.FAIL,
            type(err).__qualname__,
            str(err),
            traceback.format_exc(),
            (time.perf_counter() - started) * 1000,
        )
    elapsed = (time.perf_counter() - started) * 1000
    if returned is False:
        return HandlerResult(Verdict.REDELIVER, duration_ms=elapsed)
    return HandlerResult(Verdict.ACK, duration_ms=elapsed)


def load_app(reference: str) -> App:
    """Import ``module`` or ``module:attribute`` and return its ``App``."""
    module_name, _, attribute = reference.partition(":")
    module = importlib.import_module(module_name)
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, App):
            raise TypeError(f"{reference!r} is not a tickwork App")
        return found
    apps = [value for value in vars(module).values() if isinstance(value, App)]
    if len(apps) != 1:
        raise TypeError(
            f"module {module_name!r} defines {len(apps)} App objects; "
            f"name one as {module_name}:NAME"
        )
    return apps[0]


# -- the process pool's side ---------------------------------------------------------------

_process_app: App | None = None


def init_process(reference: str) -> None:
    """Process pool initializer: import the app once per child process."""
    global _process_app
    _process_app = load_app(reference)


def run_in_process(task_name: str, args: list[Any], kwargs: dict[str, Any]) -> HandlerResult:
    assert _process_app is not None, "init_process was not called"
    return run_handler(_process_app, task_name, args, kwargs)
