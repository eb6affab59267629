"""The project's app, for ``tickwork worker -A tickwork.django.current`` (what
``manage.py tickwork worker`` and ``tickwork worker --django SETTINGS`` pass): importing
this module sets Django up (``DJANGO_SETTINGS_MODULE``) if it is not yet, so worker
processes a supervisor starts find the same app."""

from __future__ import annotations

import django
from django.apps import apps
from django.utils.module_loading import autodiscover_modules

from tickwork.django.project import get_app

if not apps.ready:
    django.setup()
autodiscover_modules("tasks")  # also when tickwork.django is not an installed app

app = get_app()
