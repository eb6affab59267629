"""Django ``@task`` functions and a tickwork task of the test project (found by
``tickwork.django``'s discovery of ``tasks`` modules)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from django.db import connection

from tickwork.django import get_app
from tickwork.django.compat import TaskContext, task  # django.tasks, or the backport


class PaymentRefused(Exception):
    pass


@task()
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name="emails", priority=10)
def send_welcome(email: str) -> dict[str, Any]:
    return {"sent_to": email}


@task()
def charge(amount: int) -> None:
    raise PaymentRefused(f"card declined for {amount}")


@task(takes_context=True)
async def attempt_of(context: TaskContext, label: str) -> list[Any]:
    await asyncio.sleep(0)
    return [label, context.attempt, context.task_result.id]


app = get_app()

#: the database connections seen by ``which_connection``'s runs (tests read it; kept
#: alive here, so that no two can share an identity)
CONNECTIONS: list[object] = []
_lock = threading.Lock()


@app.task(name="shop.which_connection")
def which_connection() -> None:
    """Records the identity of the database connection its thread uses."""
    connection.ensure_connection()
    with _lock:
        CONNECTIONS.append(connection.connection)


@app.task(name="shop.lookalike", keep_result=True)
def lookalike() -> dict[str, Any]:
    """A tickwork task whose value looks like what a Django task's run keeps."""
    return {"task": f"{__name__}.add", "args": [1, 2], "kwargs": {}, "value": 3}
