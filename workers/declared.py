"""What a worker does with what its app's code declares, before its threads start: the
backend must offer what the tasks ask of it, and the periodic schedules and the
subscriptions to events are installed (those the code no longer declares uninstalled)."""

from __future__ import annotations

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.backends.base import Capability
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.config import WorkerConfig


def require_features(app: WorkerApp, backend: Backend) -> None:
    """Fail at once (``ConfigurationError``) if a task needs what ``backend`` lacks."""
    for task in app.tasks.values():
        if task.options.fair_key is not None:
            backend.require(Capability.FAIR_SHARE, f"task {task.name!r} (its fair_key)")


def install_declared(app: WorkerApp, config: WorkerConfig) -> None:
    """Install the app's ``@app.periodic`` schedules and its subscriptions (unless
    ``install_periodic`` is off), reconciling them unless ``reconcile_periodic`` is."""
    if config.install_periodic:
        app.schedules.install(app.registry.periodics, config.reconcile_periodic)
        app.events.install(config.reconcile_periodic)
