"""The dashboard in a Django project's URLs (``tickwork.django.urls``), behind Django's
login, the ``tickwork.act_on_dashboard`` permission and Django's CSRF check, through
Django's test client (a real project, its database migrated)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.django_site.settings")
django.setup()

from django.contrib.auth.models import Permission, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from tests.support.backends import backend_url  # noqa: E402
from tests.support.django_site.shop import tasks  # noqa: E402
from tickwork.django import get_app  # noqa: E402
from tickwork.scheduler import App  # noqa: E402

ROOT = "/ops/tickwork/"


@pytest.fixture(scope="module", autouse=True)
def database() -> None:
    call_command("migrate", verbosity=0)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    project_app = get_app()
    project_app.use_backend(backend_url("sqlite", tmp_path))
    tasks.which_connection.delay()  # a queue to show
    yield project_app
    project_app.close()


def _client(name: str, *, staff: bool = True, acts: bool = False) -> Client:
    user, _ = User.objects.get_or_create(username=name)
    user.is_staff = staff
    user.save()
    if acts:
        user.user_permissions.add(Permission.objects.get(codename="act_on_dashboard"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _pause_form(page: str) -> dict[str, str]:
    """The hidden fields of the page's "pause" form of the default queue."""
    form = re.search(r'<form[^>]*action="([^"]*/queues/default/pause)"(.*?)</form>', page, re.S)
    assert form is not None, "a pause button"
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(2)))
    fields["_action"] = form.group(1)
    return fields


def test_djangos_checks_find_nothing_to_say_of_tickwork() -> None:
    from django.apps import apps
    from django.core import checks

    found = checks.run_checks(app_configs=[apps.get_app_config("tickwork")])
    assert [message.id for message in found] == [], "no W042 on a project's migrate"


def test_anonymous_users_are_sent_to_log_in(app: App) -> None:
    response = Client().get(ROOT)
    assert response.status_code == 302 and response["Location"].startswith("/login/?next=")


def test_staff_see_it_and_only_with_the_permission_may_act(app: App) -> None:
    viewer = _client("viewer")
    page = viewer.get(ROOT)
    assert page.status_code == 200 and "default" in page.content.decode()
    assert f'href="{ROOT}schedules"' in page.content.decode(), "links below the mount"
    assert "/queues/default/pause" not in page.content.decode(), "no action without the right"
    assert viewer.get(ROOT + "schedules").status_code == 200
    refused = viewer.post(ROOT + "queues/default/pause", {"next": ROOT})
    assert refused.status_code == 403
    assert _client("nobody", staff=False).get(ROOT).status_code == 302


def test_an_action_passes_djangos_csrf_check(app: App) -> None:
    operator = _client("operator", acts=True)
    page = operator.get(ROOT).content.decode()
    fields = _pause_form(page)
    target = fields.pop("_action")
    assert target == ROOT + "queues/default/pause"
    assert "csrfmiddlewaretoken" in fields, "the form carries Django's token"
    forged = {k: v for k, v in fields.items() if k != "csrfmiddlewaretoken"}
    assert operator.post(target, forged).status_code == 403, "Django's CSRF check"
    assert app.backend.queues.paused() == []
    done: Any = operator.post(target, fields)
    assert done.status_code == 303 and done["Location"].startswith(ROOT)
    assert app.backend.queues.paused() == ["default"]


def test_the_api_takes_json_writes_and_pages_keep_their_security_headers(app: App) -> None:
    """The HTTP API below the mount, as a signed-in superuser's script calls it: JSON
    bodies with Django's CSRF token in the header (a POST, a PUT and a DELETE)."""
    admin, _ = User.objects.get_or_create(username="admin", is_staff=True, is_superuser=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    page = client.get(ROOT)
    assert page["Content-Security-Policy"].startswith("default-src")
    assert page["X-Content-Type-Options"] == "nosniff" and page["X-Frame-Options"] == "DENY"
    assert page["Referrer-Policy"] == "same-origin", "no-referrer would fail Django's CSRF"
    token = {"X-CSRFToken": client.cookies["csrftoken"].value}
    paused = client.post(
        ROOT + "api/v1/queues/default/pause", "{}", content_type="application/json", headers=token
    )
    assert paused.status_code == 200, paused.content
    assert paused.json() == {"done": True} and app.backend.queues.paused() == ["default"]
    bound = client.put(
        ROOT + "api/v1/queues/default/bound",
        '{"max_pending": 50}',
        content_type="application/json",
        headers=token,
    )
    assert bound.status_code == 200 and app.queues.bounds() == {"default": 50}
    enqueued = client.post(
        ROOT + "api/v1/messages",
        '{"task": "shop.which_connection", "key": "k"}',
        content_type="application/json",
        headers=token,
    )
    assert enqueued.status_code == 200, enqueued.content
    cancelled = client.delete(
        ROOT + "api/v1/messages?key=k", "{}", content_type="application/json", headers=token
    )
    assert cancelled.json() == {"done": True}
    (pause,) = [r for r in app.audit.recent() if r.action == "queue.pause"]
    assert pause.actor == "admin (dashboard)"


def test_the_dashboard_app_alone_serves_nothing_without_its_host(app: App) -> None:
    from starlette.testclient import TestClient

    from tickwork.dashboard import HostChecked, create_dashboard

    direct = TestClient(create_dashboard(app, HostChecked()))
    assert direct.get("/").status_code == 403
    assert direct.post("/queues/default/pause", data={"next": "/"}).status_code == 403
