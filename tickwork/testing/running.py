"""``run_task``: one task run the way a worker runs it, in the test's thread."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from pydantic_core import from_json, to_json

from tickwork.scheduler import App
from tickwork.scheduler.model.tasks import TaskFunction
from tickwork.scheduler.runs.context import RunContext, RunInfo, enter, leave
from tickwork.scheduler.runs.results import encode_value


def run_task(task: TaskFunction[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one task the way a worker would, in this thread: its arguments validated and
    through JSON, its ``current_run()`` context, an ``async def`` one awaited on a loop
    of its own, what it returns through JSON; returns that, or raises what it raised. A
    return value a worker could not keep fails here too (``TypeError``)."""
    json_args, json_kwargs = task.arguments.to_json(args, kwargs)
    json_args, json_kwargs = from_json(to_json((json_args, json_kwargs)))
    info = RunInfo(f"test-{task.name}", task.name, task.options.queue, None, 1, True)
    token = enter(RunContext(info))
    try:
        returned = task.run(json_args, json_kwargs)
        if inspect.isawaitable(returned):
            returned = asyncio.run(_awaited(returned))
    finally:
        leave(token)
    max_bytes = task.app.settings.max_payload_bytes if isinstance(task.app, App) else 1 << 20
    return from_json(encode_value(returned, max_bytes))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
