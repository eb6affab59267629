"""What a worker does with what its app's code declares, as boot steps (``BOOT_STEPS``,
in order): each ``check``s when the worker is made (a worker that cannot do what the
code asks fails at once, before it claims) and ``boot``s when it starts, before its
threads (installing what the code declares).

- features: the backend must offer what the tasks ask of it (fair share);
- periodic schedules: the app's ``@app.periodic`` schedules installed, and those the
  code no longer declares uninstalled (``reconcile_periodic``);
- subscriptions: the app's subscriptions to events, installed and reconciled the same way.

A new boot step is a class with ``check`` and ``boot`` in a module of its own and one
line adding it: ``BOOT_STEPS.add(WarmCaches())``.
"""

from __future__ import annotations

from typing import Protocol

from tickwork.scheduler.backends.base import Capability
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.config import WorkerConfig
from tickwork.workers.registered import Registered


class BootStep(Protocol):
    """Start-up work of one area."""

    def check(self, app: WorkerApp, config: WorkerConfig) -> None:
        """Raise ``ConfigurationError`` if the worker cannot do what the code asks."""
        ...

    def boot(self, app: WorkerApp, config: WorkerConfig) -> None:
        """Install what the code declares (before the worker's threads start)."""
        ...


class RequireFeatures:
    def check(self, app: WorkerApp, config: WorkerConfig) -> None:
        backend = app.backend
        for task in app.tasks.values():
            if task.options.fair_key is not None:
                backend.require(Capability.FAIR_SHARE, f"task {task.name!r} (its fair_key)")

    def boot(self, app: WorkerApp, config: WorkerConfig) -> None:
        pass


class InstallPeriodics:
    def check(self, app: WorkerApp, config: WorkerConfig) -> None:
        pass

    def boot(self, app: WorkerApp, config: WorkerConfig) -> None:
        if config.install_periodic:
            app.schedules.install(app.registry.periodics, config.reconcile_periodic)


class InstallSubscriptions:
    def check(self, app: WorkerApp, config: WorkerConfig) -> None:
        pass

    def boot(self, app: WorkerApp, config: WorkerConfig) -> None:
        if config.install_periodic:
            app.events.install(config.reconcile_periodic)


#: the boot steps, checked and booted in this order
BOOT_STEPS: Registered[BootStep] = Registered(
    RequireFeatures(), InstallPeriodics(), InstallSubscriptions()
)
