"""A small Django project for the tests of ``tickwork.django``: Django's tasks framework on
tickwork, tickwork's own tasks, a database of its own (a file: worker threads share it).
The tests point ``TICKWORK`` at each backend with ``override_settings``."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import django

SECRET_KEY = "tickwork-tests"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    # Django 6 has its tasks framework built in; before, the backport is an app
    *(["django_tasks"] if django.VERSION < (6,) else []),
    "tickwork.django",
    "tests.support.django_site.shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.support.django_site.urls"
LOGIN_URL = "/login/"
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]


def _database_file() -> str:
    """The test's database, or one in a folder of this process's own, removed at exit."""
    given = os.environ.get("TICKWORK_TEST_DJANGO_DB")
    if given:
        return given
    folder = tempfile.mkdtemp(prefix="tickwork-django-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return os.path.join(folder, "site.db")


DATABASE_FILE = _database_file()
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATABASE_FILE,
        "CONN_MAX_AGE": 0,
    }
}
TASKS = {
    "default": {
        "BACKEND": "tickwork.django.TickworkBackend",
        "QUEUES": ["default", "emails"],
    }
}
TICKWORK = {"BACKEND": os.environ.get("TICKWORK_BACKEND", f"sqlite:///{DATABASE_FILE}.tickwork")}
