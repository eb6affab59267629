"""The tickwork ``App`` of a Django project, configured from Django's settings.

One app per project (``get_app()``), found in this order:

- ``TICKWORK = {"APP": "myproject.jobs:app"}``: an ``App`` of your own (``module`` or
  ``module:attribute``), with its own settings;
- ``TICKWORK = {"BACKEND": "redis://...", "KEEP_RESULTS": True, ...}``: an app built from
  these tickwork settings (names as in ``tickwork.toml``, any case);
- else the ``url`` in the ``OPTIONS`` of a ``TASKS`` backend that is
  ``tickwork.django.TickworkBackend``;
- else tickwork's own defaults (``TICKWORK_*`` environment variables, ``tickwork.toml``).

The app gets the hook that keeps Django's database connections fresh around every run
(``DjangoConnections``) and the tasks that run Django's ``@task`` functions
(``tickwork.django.runner``).
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, reset_queries

from tickwork.scheduler import App
from tickwork.scheduler.hooks import Hook
from tickwork.scheduler.loading import load_app
from tickwork.scheduler.runs.context import RunInfo
from tickwork.scheduler.settings import Settings

#: the dotted path of the Django tasks backend, as written in ``TASKS``
BACKEND_PATH = "tickwork.django.TickworkBackend"

_lock = threading.Lock()
_app: App | None = None


class DjangoConnections(Hook):
    """Around each run, in the thread that runs it, what Django does around a request:
    queries logged under ``DEBUG`` are dropped and connections that are broken or past
    their ``CONN_MAX_AGE`` are closed (the next query opens a fresh one)."""

    def before_handler(self, run: RunInfo) -> None:
        reset_queries()
        close_old_connections()

    def after_handler(self, run: RunInfo) -> None:
        close_old_connections()


def get_app() -> App:
    """The project's tickwork app, built once a process, on first use (see the module
    docstring); tasks are registered on it, so it stays: a test points it at another
    backend with ``get_app().use_backend(url)``."""
    global _app
    with _lock:
        if _app is None:
            app = _configured_app()
            prepare(app)
            _app = app
        return _app


def prepare(app: App) -> None:
    """Give ``app`` what a Django project needs (once): the connection hook and the tasks
    that run Django's ``@task`` functions."""
    from tickwork.django.runner import register_runners

    if not any(isinstance(hook, DjangoConnections) for hook in app.hooks):
        app.add_hook(DjangoConnections())
    register_runners(app)


def _configured_app() -> App:
    config: dict[str, Any] = dict(getattr(django_settings, "TICKWORK", None) or {})
    reference = config.pop("APP", None) or config.pop("app", None)
    if reference is not None:
        if config:
            raise ImproperlyConfigured(
                "settings.TICKWORK names an APP, which has settings of its own: "
                f"remove {sorted(config)} or drop APP"
            )
        try:
            return load_app(str(reference))
        except (ImportError, TypeError) as err:
            raise ImproperlyConfigured(f"settings.TICKWORK['APP']: {err}") from err
    values = {name.lower(): value for name, value in config.items()}
    unknown = sorted(set(values) - set(Settings.model_fields))
    if unknown:
        raise ImproperlyConfigured(
            f"settings.TICKWORK: unknown setting(s) {unknown}; "
            f"known: APP, {', '.join(n.upper() for n in Settings.model_fields)}"
        )
    if "backend" not in values:
        url = _url_from_tasks_setting()
        if url is not None:
            values["backend"] = url
    return App(settings=Settings.load(**values))


def _url_from_tasks_setting() -> str | None:
    """The ``url`` option of the first ``TASKS`` backend that is tickwork's."""
    tasks: dict[str, dict[str, Any]] = getattr(django_settings, "TASKS", None) or {}
    for alias, params in tasks.items():
        if params.get("BACKEND") == BACKEND_PATH:
            url = (params.get("OPTIONS") or {}).get("url")
            if url is not None:
                if not isinstance(url, str):
                    raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']['url'] is a URL")
                return url
    return None
