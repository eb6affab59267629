"""Django's tasks framework: ``django.tasks`` (Django 6) or its backport ``django_tasks``
(Django 5.2, an installed app), the same API under two names; ``BACKPORT`` says which.
Code that runs on both imports ``task``, ``TaskContext``, ... from here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import get_exception_traceback, get_module_path, normalize_json

    BACKPORT: bool
else:
    try:
        from django.tasks import TaskContext, TaskResult, TaskResultStatus, task, task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskError
        from django.tasks.exceptions import InvalidTask as InvalidTaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        def get_module_path(value: object) -> str:
            return f"{value.__module__}.{value.__qualname__}"

        def get_exception_traceback(exc: BaseException) -> str:
            import traceback

            return "".join(traceback.format_exception(exc))

        BACKPORT = False
    except ImportError:
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
        from django_tasks.utils import (
            get_exception_traceback,
            get_module_path,
            normalize_json,
        )

        BACKPORT = True

__all__ = [
    "BACKPORT",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "get_exception_traceback",
    "get_module_path",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
