"""tickwork's core: tasks, messages, the producer API and the storage backends.

Its names serve tickwork's own packages; users import from ``tickwork`` and its
documented sub-namespaces (``tickwork.errors``, ``tickwork.workflows``...), whose names
are kept from release to release.
"""

from tickwork.scheduler.app import App
from tickwork.scheduler.backends import Backend, OnConflict, Outcome, State, open_backend
from tickwork.scheduler.clock import Clock
from tickwork.scheduler.errors import (
    BackendError,
    BackendFull,
    BackendUnavailable,
    BatchNotFound,
    CalendarNotFound,
    ConditionFailed,
    ConfigurationError,
    DecodeError,
    InvalidMessage,
    KeyConflict,
    LimitNotFound,
    QueueFull,
    QueueNotFound,
    ReplicaTimeout,
    ScheduleNotFound,
    TickworkError,
    UnknownTask,
    WorkflowNotFound,
)
from tickwork.scheduler.events.waits import WaitTimedOut, wait_for
from tickwork.scheduler.events.workflows import EVENT
from tickwork.scheduler.model.debounce import Debounce
from tickwork.scheduler.model.event_names import Event
from tickwork.scheduler.model.handles import (
    ResultTimeout,
    RunStatus,
    TaskFailed,
    TaskHandle,
    TaskInfo,
)
from tickwork.scheduler.model.limits import ConcurrencyLimit, RateLimit
from tickwork.scheduler.model.message import Message, ScheduledMessage
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.model.shapes import Batch, Group, batch, group
from tickwork.scheduler.model.tasks import Call, TaskClass, TaskFunction
from tickwork.scheduler.producing.chains import chain
from tickwork.scheduler.producing.reports import EnqueueReport
from tickwork.scheduler.runs.context import (
    Aborted,
    RunContext,
    SoftTimeLimitExceeded,
    TimeLimitExceeded,
    current_run,
)
from tickwork.scheduler.runs.skip import Skip
from tickwork.scheduler.runs.snooze import Retry, Snooze
from tickwork.scheduler.schedules.control import AbortResult, Resumed, ScheduleInfo
from tickwork.scheduler.settings import Settings
from tickwork.scheduler.workflows.graph_view import GraphFailed, GraphHandle
from tickwork.scheduler.workflows.graphs import After, Graph, after, graph
from tickwork.scheduler.workflows.status import (
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
    "BackendFull",
    "BackendUnavailable",
    "Batch",
    "BatchFailed",
    "BatchHandle",
    "BatchNotFound",
    "BatchOutcome",
    "BatchStatus",
    "CalendarNotFound",
    "Call",
    "Clock",
    "ConcurrencyLimit",
    "ConditionFailed",
    "ConfigurationError",
    "Debounce",
    "DecodeError",
    "EnqueueReport",
    "Event",
    "Graph",
    "GraphFailed",
    "GraphHandle",
    "Group",
    "InvalidMessage",
    "KeyConflict",
    "LimitNotFound",
    "Message",
    "OnConflict",
    "Outcome",
    "QueueFull",
    "QueueNotFound",
    "RateLimit",
    "ReplicaTimeout",
    "ResultTimeout",
    "Resumed",
    "Retry",
    "RetryPolicy",
    "RunContext",
    "RunStatus",
    "ScheduleInfo",
    "ScheduleNotFound",
    "ScheduledMessage",
    "Settings",
    "Skip",
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
