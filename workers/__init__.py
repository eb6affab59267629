"""The dispatcher: consumer threads, a worker pool, a timing wheel and the daemon."""

from workers.execution import HandlerResult, Verdict, load_app
from workers.flow import Permits, WorkerStats
from workers.timing_wheel import TimingWheel
from workers.worker import Worker, WorkerConfig

__all__ = [
    "HandlerResult",
    "Permits",
    "TimingWheel",
    "Verdict",
    "Worker",
    "WorkerConfig",
    "WorkerStats",
    "load_app",
]
