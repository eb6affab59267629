"""The test project's URLs: the dashboard behind Django's login."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def login(request: HttpRequest) -> HttpResponse:
    return HttpResponse("log in here")


urlpatterns = [
    path("login/", login),
    path("ops/tickwork/", include("tickwork.django.urls")),
]
