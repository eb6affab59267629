"""tickwork: tasks on run-once, repeating and cron triggers, run by workers over SQLite,
Redis or Cassandra.

Import what you use from here::

    from tickwork import App, Cron, Repeating, chain, current_run, graph

These names are the public API. The packages below them (``scheduler``, ``workers``,
``triggers``) stay importable, but their other names may change between releases. The
command line (``tickwork.cli``) and the dashboard (``tickwork.dashboard``) sit on top.
"""

from scheduler import (
    Aborted,
    App,
    BackendUnavailable,
    BatchOutcome,
    ConcurrencyLimit,
    ConfigurationError,
    InvalidMessage,
    KeyConflict,
    QueueFull,
    RateLimit,
    RetryPolicy,
    RunStatus,
    Snooze,
    TaskFailed,
    TaskHandle,
    TickworkError,
    UnknownTask,
    after,
    batch,
    chain,
    current_run,
    graph,
    group,
)
from scheduler.hooks import Hook
from scheduler.runs.context import RunInfo
from triggers import Cron, Exclusions, Misfire, Overlap, Repeating, RunOnce, preview
from workers import Worker, WorkerConfig

__all__ = [
    "Aborted",
    "App",
    "BackendUnavailable",
    "BatchOutcome",
    "ConcurrencyLimit",
    "ConfigurationError",
    "Cron",
    "Exclusions",
    "Hook",
    "InvalidMessage",
    "KeyConflict",
    "Misfire",
    "Overlap",
    "QueueFull",
    "RateLimit",
    "Repeating",
    "RetryPolicy",
    "RunInfo",
    "RunOnce",
    "RunStatus",
    "Snooze",
    "TaskFailed",
    "TaskHandle",
    "TickworkError",
    "UnknownTask",
    "Worker",
    "WorkerConfig",
    "after",
    "batch",
    "chain",
    "current_run",
    "graph",
    "group",
    "preview",
]
