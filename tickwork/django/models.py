"""No tables: one unmanaged model that carries the dashboard's permission, so that it can
be given to users and groups like any other (superusers hold it)."""

from __future__ import annotations

from django.db import models


class Dashboard(models.Model):
    """The tickwork dashboard (``tickwork.django.urls``), as Django's permissions see it."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("act_on_dashboard", "Can act on the tickwork dashboard (pause, cancel, replay)")
        ]
