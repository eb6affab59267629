"""The example shop's settings: SQLite for Django and for tickwork (two files next to
``manage.py``, or ``DJANGO_SITE_DATA``), Django's tasks framework on tickwork, the
dashboard behind Django's login."""

from __future__ import annotations

import os
from pathlib import Path

import django

DATA = Path(os.environ.get("DJANGO_SITE_DATA", Path(__file__).resolve().parents[1]))
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "only-for-the-example")
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
USE_TZ = True
ROOT_URLCONF = "site_config.urls"
LOGIN_URL = "/accounts/login/"

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    # Django 6 has its tasks framework built in; before, the backport is an app
    *(["django_tasks"] if django.VERSION < (6,) else []),
    "tickwork.django",  # discovers tasks.py modules; manage.py tickwork; the permission
    "shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA / "shop.db")},
}

# the project's tickwork app: tickwork.django.get_app()
TICKWORK = {
    "BACKEND": os.environ.get("TICKWORK_BACKEND", f"sqlite:///{DATA / 'tickwork.db'}"),
    "KEEP_RESULTS": True,
}
# Django's own @task functions run on tickwork too
TASKS = {"default": {"BACKEND": "tickwork.django.TickworkBackend"}}
