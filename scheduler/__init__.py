"""tickwork's core: tasks, messages, the producer API and the storage backends.

These names are the public API; everything else is importable from its module but may
change between releases.
"""

from scheduler.app import App
from scheduler.backends import Backend, OnConflict, Outcome, State, open_backend
from scheduler.clock import Clock
from scheduler.errors import (
    BackendError,
    BackendUnavailable,
    BatchNotFound,
    ConfigurationError,
    DecodeError,
    InvalidMessage,
    KeyConflict,
    QueueFull,
    QueueNotFound,
    ReplicaTimeout,
    ScheduleNotFound,
    TickworkError,
    UnknownTask,
    WorkflowNotFound,
)
from scheduler.events.names import Event
from scheduler.events.waits import WaitTimedOut, wait_for
from scheduler.events.workflows import EVENT
from scheduler.limits.declared import ConcurrencyLimit, RateLimit
from scheduler.model.message import Message, ScheduledMessage
from scheduler.model.tasks import Call, TaskClass, TaskFunction
from scheduler.producing.reports import EnqueueReport
from scheduler.runs.context import (
    Aborted,
    RunContext,
    SoftTimeLimitExceeded,
    TimeLimitExceeded,
    current_run,
)
from scheduler.runs.results import ResultTimeout, RunStatus, TaskFailed, TaskHandle, TaskInfo
from scheduler.runs.retry import RetryPolicy
from scheduler.runs.snooze import Snooze
from scheduler.schedules.control import AbortResult, Resumed, ScheduleInfo
from scheduler.settings import Settings
from scheduler.workflows.chains import chain
from scheduler.workflows.graph_view import GraphFailed, GraphHandle
from scheduler.workflows.graphs import After, Graph, after, graph
from scheduler.workflows.shapes import Batch, Group, batch, group
from scheduler.workflows.status import (
    BatchFailed,
    BatchHandle,
    BatchOutcome,
    BatchStatus,
)

__all__ = [
    "EVENT",
    "AbortResult",
    "Aborted",
    "After",
    "App",
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "Batch",
    "BatchFailed",
    "BatchHandle",
    "BatchNotFound",
    "BatchOutcome",
    "BatchStatus",
    "Call",
    "Clock",
    "ConcurrencyLimit",
    "ConfigurationError",
    "DecodeError",
    "EnqueueReport",
    "Event",
    "Graph",
    "GraphFailed",
    "GraphHandle",
    "Group",
    "InvalidMessage",
    "KeyConflict",
    "Message",
    "OnConflict",
    "Outcome",
    "QueueFull",
    "QueueNotFound",
    "RateLimit",
    "ReplicaTimeout",
    "ResultTimeout",
    "Resumed",
    "RetryPolicy",
    "RunContext",
    "RunStatus",
    "ScheduleInfo",
    "ScheduleNotFound",
    "ScheduledMessage",
    "Settings",
    "Snooze",
    "SoftTimeLimitExceeded",
    "State",
    "TaskClass",
    "TaskFailed",
    "TaskFunction",
    "TaskHandle",
    "TaskInfo",
    "TickworkError",
    "TimeLimitExceeded",
    "UnknownTask",
    "WaitTimedOut",
    "WorkflowNotFound",
    "after",
    "batch",
    "chain",
    "current_run",
    "graph",
    "group",
    "open_backend",
    "wait_for",
]
