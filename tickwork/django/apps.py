"""The Django app ``tickwork.django``: imports every installed app's ``tasks`` module
when Django starts, so their tasks are registered before a worker or a view needs them."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class TickworkConfig(AppConfig):
    name = "tickwork.django"
    label = "tickwork"
    verbose_name = "tickwork"
    # the id type of its one model (the dashboard's permission, as migrated), so Django
    # does not warn (W042) in a project that sets no DEFAULT_AUTO_FIELD
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        autodiscover_modules("tasks")
