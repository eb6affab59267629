"""The dashboard in a Django project's URLs, behind Django's own checks::

    urlpatterns = [path("tickwork/", include("tickwork.django.urls")), ...]

Active staff users see it (others are sent to ``LOGIN_URL``); acting on it (pause,
cancel, replay, ...) takes the permission ``tickwork.act_on_dashboard`` (superusers hold
it), and every action passes Django's CSRF check. Each request is handed, in the same
process, to the dashboard's ASGI application (``create_dashboard`` with ``HostChecked``),
which trusts only what this view tells it.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.middleware.csrf import get_token
from django.views.decorators.cache import never_cache

from tickwork.api.security import CSRF_SCOPE, MAY_ACT_SCOPE, USER_SCOPE
from tickwork.dashboard import HostChecked, create_dashboard
from tickwork.django.project import get_app

#: the permission that lets a staff user act
ACT = "tickwork.act_on_dashboard"
#: response headers not passed on to the browser: Django sets the length, and the
#: dashboard sets no cookie of its own here (the host's session and CSRF are Django's);
#: its ``no-referrer`` policy neither (under it a browser posts a form with ``Origin:
#: null``, which Django's CSRF check refuses): ``same-origin`` instead, Django's default
_HELD = {b"content-length", b"transfer-encoding", b"connection", b"set-cookie"}
_REFERRER_POLICY = b"referrer-policy"
#: request bodies Django has parsed into ``request.POST`` (its CSRF check read them)
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")

_lock = threading.Lock()
_dashboard: Any = None


def _asgi() -> Any:
    global _dashboard
    with _lock:
        if _dashboard is None:
            _dashboard = create_dashboard(get_app(), HostChecked())
        return _dashboard


@never_cache
def dashboard(request: HttpRequest, subpath: str = "") -> HttpResponse:
    """Every page and action of the dashboard, below where its URLs are included."""
    user: Any = request.user  # a user model of the project's (``AUTH_USER_MODEL``)
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return redirect_to_login(request.get_full_path())
    may_act = user.has_perm(ACT)
    if request.method == "POST" and not may_act:
        return HttpResponseForbidden("you may not act on the tickwork dashboard")
    root = request.path[: len(request.path) - len(subpath)].rstrip("/")
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
        if name.lower() not in ("content-type", "content-length")
    ]
    body = b""
    if request.method not in ("GET", "HEAD", "OPTIONS"):
        media = (request.content_type or "").lower()
        if media in _FORMS:
            # a page's form as Django read it (its CSRF check has consumed the stream),
            # posted on in the one form encoding the dashboard reads
            body = urlencode(list(request.POST.lists()), doseq=True).encode()
            media = "application/x-www-form-urlencoded"
        else:  # the API's JSON (or whatever came: the API answers what it refuses)
            body = request.body
        headers.append((b"content-type", media.encode("latin-1")))
        headers.append((b"content-length", str(len(body)).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method or "GET",
        "scheme": request.scheme or "http",
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": root,
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host(), 0),
        MAY_ACT_SCOPE: may_act,
        CSRF_SCOPE: get_token(request),
        USER_SCOPE: request.user.get_username() if request.user.is_authenticated else None,
    }
    status, answered, content = async_to_sync(_call)(_asgi(), scope, body)
    response = HttpResponse(content, status=status)
    for name, value in answered:
        if name.lower() == _REFERRER_POLICY:
            response["Referrer-Policy"] = "same-origin"
        elif name.lower() not in _HELD:
            response[name.decode("latin-1")] = value.decode("latin-1")
    return response


async def _call(
    app: Any, scope: dict[str, Any], body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run one request through the ASGI application ``app``: (status, headers, body)."""
    inbox = [{"type": "http.request", "body": body, "more_body": False}]
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return inbox.pop(0) if inbox else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, headers, b"".join(chunks)
