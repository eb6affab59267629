"""tickwork: tasks on run-once, repeating and cron triggers, run by workers over SQLite,
PostgreSQL, Redis or Cassandra.

Import what you use from here::

    from tickwork import App, Cron, Repeating, chain, current_run, graph

and the rest from the documented sub-namespaces: ``tickwork.triggers`` (every trigger
and its options: ``Exclusions``, ``Window``, ``Specs``, ``Overlap``, ``preview``),
``tickwork.workflows``, ``tickwork.events``, ``tickwork.errors``, ``tickwork.encryption``,
``tickwork.testing``, ``tickwork.spark``, ``tickwork.fastapi`` and ``tickwork.django``.
These are the public API; ``tickwork.scheduler`` and ``tickwork.workers`` (the core and
the worker, ``tickwork.triggers`` beside them) are importable, but their other names may
change between releases. The command line (``tickwork.cli``) and the dashboard
(``tickwork.dashboard``) sit on top.
"""

from tickwork.scheduler.app import App
from tickwork.scheduler.errors import InvalidMessage, TickworkError
from tickwork.scheduler.hooks import Hook
from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.handles import RunStatus, TaskFailed, TaskHandle
from tickwork.scheduler.model.limits import ConcurrencyLimit, RateLimit
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.model.shapes import batch, group
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.producing.chains import chain
from tickwork.scheduler.runs.context import Aborted, RunInfo, current_run
from tickwork.scheduler.runs.skip import Skip
from tickwork.scheduler.runs.snooze import Retry, Snooze
from tickwork.scheduler.workflows.graphs import after, graph
from tickwork.scheduler.workflows.status import BatchOutcome
from tickwork.triggers import Cron, Misfire, Repeating, RunOnce
from tickwork.workers import Worker, WorkerConfig

#: the one list of tickwork's top-level public names
__all__ = [
    "Aborted",
    "App",
    "BatchOutcome",
    "Call",
    "ConcurrencyLimit",
    "Cron",
    "Debounce",
    "Hook",
    "InvalidMessage",
    "Misfire",
    "RateLimit",
    "Repeating",
    "Retry",
    "RetryPolicy",
    "RunInfo",
    "RunOnce",
    "RunStatus",
    "Skip",
    "Snooze",
    "TaskFailed",
    "TaskHandle",
    "TickworkError",
    "Worker",
    "WorkerConfig",
    "after",
    "batch",
    "chain",
    "current_run",
    "graph",
    "group",
]
