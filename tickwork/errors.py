"""Every error tickwork raises, in one place: ``from tickwork.errors import QueueFull``.

All are ``TickworkError`` s, bar the two a handler's time limits raise inside it
(``TimeLimitExceeded``, a ``BaseException`` so that ``except Exception`` does not swallow
it, and ``SoftTimeLimitExceeded``, which a handler may catch to stop cleanly) and
``NonDeterminismError`` (a durable run's replay that found another step than its
journal holds; a ``BaseException`` too, so the run never goes on mixed)."""

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
    InvalidTrigger,
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
from tickwork.scheduler.events.waits import WaitTimedOut
from tickwork.scheduler.model.handles import ResultTimeout, TaskFailed
from tickwork.scheduler.runs.context import Aborted, SoftTimeLimitExceeded, TimeLimitExceeded
from tickwork.scheduler.runs.durable_errors import (
    DurableRunError,
    JournalFull,
    NonDeterminismError,
    StepFailed,
)
from tickwork.scheduler.runs.step_options import StepTimeLimitExceeded
from tickwork.scheduler.workflows.graph_view import GraphFailed
from tickwork.scheduler.workflows.status import BatchFailed

__all__ = [
    "Aborted",
    "BackendError",
    "BackendFull",
    "BackendUnavailable",
    "BatchFailed",
    "BatchNotFound",
    "CalendarNotFound",
    "ConditionFailed",
    "ConfigurationError",
    "DecodeError",
    "DurableRunError",
    "GraphFailed",
    "InvalidMessage",
    "InvalidTrigger",
    "JournalFull",
    "KeyConflict",
    "LimitNotFound",
    "NonDeterminismError",
    "QueueFull",
    "QueueNotFound",
    "ReplicaTimeout",
    "ResultTimeout",
    "ScheduleNotFound",
    "SoftTimeLimitExceeded",
    "StepFailed",
    "StepTimeLimitExceeded",
    "TaskFailed",
    "TickworkError",
    "TimeLimitExceeded",
    "UnknownTask",
    "WaitTimedOut",
    "WorkflowNotFound",
]
