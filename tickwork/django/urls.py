"""``path("tickwork/", include("tickwork.django.urls"))``: the dashboard (see
``tickwork.django.dashboard``)."""

from __future__ import annotations

from django.urls import path, re_path

from tickwork.django.dashboard import dashboard

app_name = "tickwork"
urlpatterns = [
    path("", dashboard, name="dashboard"),
    re_path(r"^(?P<subpath>.+)$", dashboard),
]
