"""The dispatcher: consumer, timer, settler and heartbeat threads around a handler pool."""

from tickwork.scheduler.loading import load_app
from tickwork.workers.config import WorkerConfig
from tickwork.workers.intake.flow import WorkerStats
from tickwork.workers.worker import Worker

__all__ = ["Worker", "WorkerConfig", "WorkerStats", "load_app"]
