"""The dispatcher: consumer, timer, settler and heartbeat threads around a handler pool."""

from workers.config import WorkerConfig
from workers.execution import load_app
from workers.flow import WorkerStats
from workers.worker import Worker

__all__ = ["Worker", "WorkerConfig", "WorkerStats", "load_app"]
