"""tickwork's core: tasks, messages, the producer API and the storage backends."""

from scheduler.app import App, EnqueueReport, Periodic, ScheduleInfo
from scheduler.backends import Backend, OnConflict, Outcome, State, open_backend
from scheduler.clock import Clock, ManualClock, SystemClock
from scheduler.errors import (
    BackendError,
    BackendUnavailable,
    ConfigurationError,
    DecodeError,
    InvalidMessage,
    KeyConflict,
    TickworkError,
    UnknownTask,
)
from scheduler.message import Message, ScheduledMessage
from scheduler.retry import RetryPolicy
from scheduler.settings import Settings
from scheduler.tasks import Call, TaskClass, TaskFunction

__all__ = [
    "App",
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "Call",
    "Clock",
    "ConfigurationError",
    "DecodeError",
    "EnqueueReport",
    "InvalidMessage",
    "KeyConflict",
    "ManualClock",
    "Message",
    "OnConflict",
    "Outcome",
    "Periodic",
    "RetryPolicy",
    "ScheduleInfo",
    "ScheduledMessage",
    "Settings",
    "State",
    "SystemClock",
    "TaskClass",
    "TaskFunction",
    "TickworkError",
    "UnknownTask",
    "open_backend",
]
