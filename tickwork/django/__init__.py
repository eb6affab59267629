"""tickwork in a Django project.

- ``INSTALLED_APPS += ["tickwork.django"]``: every installed app's ``tasks.py`` is
  imported at startup (tickwork's ``@app.task`` and Django's ``@task`` functions alike),
  and ``python manage.py tickwork worker|schedules|stats|...`` runs tickwork's commands
  for the project's app.
- ``TICKWORK = {...}``: the project's app (``get_app``; see ``tickwork.django.project``).
- ``TASKS = {"default": {"BACKEND": "tickwork.django.TickworkBackend"}}``: Django's tasks
  framework on tickwork (``tickwork.django.backend``).
- ``enqueue_on_commit`` (every backend) and ``same_transaction`` (PostgreSQL): enqueue
  with Django's transactions (``tickwork.django.transactions``).
- ``tickwork.django.urls``: the dashboard in the project's URLs, behind Django's login.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwork.django.backend import TickworkBackend
    from tickwork.django.project import get_app
    from tickwork.django.transactions import enqueue_on_commit, same_transaction

__all__ = ["TickworkBackend", "enqueue_on_commit", "get_app", "same_transaction"]

_WHERE = {
    "TickworkBackend": "tickwork.django.backend",
    "get_app": "tickwork.django.project",
    "enqueue_on_commit": "tickwork.django.transactions",
    "same_transaction": "tickwork.django.transactions",
}


def __getattr__(name: str) -> Any:
    """Import on first use, so that Django can load ``tickwork.django.apps`` early."""
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'tickwork.django' has no attribute {name!r}")
