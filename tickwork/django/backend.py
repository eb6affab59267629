"""``TickworkBackend``: Django's tasks framework (``django.tasks``, or the ``django_tasks``
backport) on tickwork.

    TASKS = {"default": {"BACKEND": "tickwork.django.TickworkBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"url": "redis://localhost:6379/0"}}}

Django's ``@task`` functions then enqueue through the project's tickwork app
(``tickwork.django.get_app``): ``enqueue()`` and ``aenqueue()`` write a message (its
priority, its queue, its ``run_after`` as the due time) and return a ``TaskResult`` whose
id is the message id; ``tickwork worker`` (or ``manage.py tickwork worker``) runs it;
``get_result()`` reads it back, in Django's statuses:

- READY: waiting for its time or for a worker;
- RUNNING: a worker runs it;
- SUCCESSFUL: it returned (``return_value`` is what it returned, as JSON);
- FAILED: it raised (``errors``: each failed attempt's exception and traceback).

A message that was cancelled, or whose record has expired (``result_retention_s``), is
``TaskResultDoesNotExist``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.core import checks

from tickwork.django.compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from tickwork.django.project import get_app
from tickwork.django.results import read_result
from tickwork.django.runner import ARUN, RUN
from tickwork.scheduler import App, Call


class TickworkBackend(BaseTaskBackend):
    """Django tasks enqueued to tickwork and run by ``tickwork worker``."""

    supports_defer = True  # run_after: the message's due time
    supports_async_task = True  # async def tasks run on the worker's event loop
    supports_get_result = True  # results and each attempt are kept
    supports_priority = True  # tickwork's priority: higher runs first, as in Django

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        unknown = sorted(set(self.options) - {"url"})
        if unknown:
            raise InvalidTaskError(
                f"TASKS[{alias!r}]['OPTIONS']: unknown option(s) {unknown}; known: url"
            )

    @property
    def app(self) -> App:
        """The project's tickwork app."""
        return get_app()

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        self.validate_task(task)
        call, result = self._prepared(task, args, kwargs)
        message_id = self.app.enqueue(call)
        return self._enqueued(result, message_id)

    async def aenqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        """``enqueue`` from an event loop, without blocking it (``App.aenqueue``)."""
        self.validate_task(task)
        call, result = self._prepared(task, args, kwargs)
        message_id = await self.app.aenqueue(call)
        return self._enqueued(result, message_id)

    def get_result(self, result_id: str) -> TaskResult[Any]:
        return read_result(self.app, self.alias, result_id)

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        yield from super().check(**kwargs)
        url = self.options.get("url")
        if url is not None and url != self.app.settings.backend:
            yield checks.Error(
                f"TASKS[{self.alias!r}]['OPTIONS']['url'] differs from the project's "
                f"tickwork backend ({self.app.settings.backend})",
                hint="one tickwork app serves the project: set its backend in one place",
                id="tickwork.E001",
            )

    # -- helpers -----------------------------------------------------------------------

    def _prepared(
        self, task: Task[Any, Any], args: Any, kwargs: Any
    ) -> tuple[Call, TaskResult[Any]]:
        """The message's call and the ``TaskResult`` to return (its id still blank)."""
        enqueued_ms = time.time_ns() // 1_000_000
        result: TaskResult[Any] = TaskResult(
            task=task,
            id="",
            status=TaskResultStatus.READY,
            enqueued_at=datetime.fromtimestamp(enqueued_ms / 1000, UTC),
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=list(args),
            kwargs=dict(kwargs),
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )  # normalizes the arguments as JSON, as Django does: TypeError if they are not
        runner = ARUN if inspect.iscoroutinefunction(task.func) else RUN
        call = Call(
            runner,
            (task.module_path, normalize_json(result.args), normalize_json(result.kwargs)),
            {"enqueued_ms": enqueued_ms},
            at=task.run_after,
            queue=task.queue_name,
            priority=task.priority,
        )
        return call, result

    def _enqueued(self, result: TaskResult[Any], message_id: str) -> TaskResult[Any]:
        object.__setattr__(result, "id", message_id)
        task_enqueued.send(type(self), task_result=result)
        return result
