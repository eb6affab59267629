"""tickwork's core: tasks, messages, the producer API and the storage backends.

These names are the public API; everything else is importable from its module but may
change between releases.
"""

from scheduler.app import App
from scheduler.backends import Backend, OnConflict, Outcome, State, open_backend
from scheduler.batch_status import (
    BatchFailed,
    BatchHandle,
    BatchOutcome,
    BatchStatus,
)
from scheduler.batches import Batch, Group, batch, group
from scheduler.clock import Clock
from scheduler.context import Aborted, RunContext, current_run
from scheduler.control import AbortResult, Resumed, ScheduleInfo
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
from scheduler.limits import ConcurrencyLimit, RateLimit
from scheduler.message import Message, ScheduledMessage
from scheduler.reports import EnqueueReport
from scheduler.results import ResultTimeout, RunStatus, TaskFailed, TaskHandle, TaskInfo
from scheduler.retry import RetryPolicy
from scheduler.settings import Settings
from scheduler.tasks import Call, TaskClass, TaskFunction
from scheduler.workflows import chain

__all__ = [
    "AbortResult",
    "Aborted",
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
    "State",
    "TaskClass",
    "TaskFailed",
    "TaskFunction",
    "TaskHandle",
    "TaskInfo",
    "TickworkError",
    "UnknownTask",
    "WorkflowNotFound",
    "batch",
    "chain",
    "current_run",
    "group",
    "open_backend",
]
