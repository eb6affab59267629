"""Who may use the dashboard, as a ``Guard``: who is let in, who may act, and how each
action proves it comes from the dashboard's own page (CSRF).

- ``Access``, the dashboard's own: a token (sent as HTTP basic's password or as a bearer
  token), a read-only mode, and a random CSRF token in a ``SameSite=Strict`` cookie that
  each form sends back. ``tickwork dashboard`` and a mount in an ASGI application of
  one's own use it.
- ``HostChecked``: inside a host application that has done all of that itself (Django's
  login, permissions and CSRF middleware: ``tickwork.django.urls``), which says so in
  the request's ASGI scope."""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass
from typing import Protocol

from starlette.requests import Request

from tickwork.api.roles import Role

CSRF_COOKIE = "tickwork_csrf"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Refused(Exception):
    """A request the dashboard does not serve: ``status`` and why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


class Guard(Protocol):
    """What the dashboard asks of whoever guards it."""

    @property
    def csrf_field(self) -> str:
        """The form field each action's CSRF token is posted in."""

    def authenticate(self, request: Request) -> None:
        """Raise ``Refused`` unless the request may see the dashboard."""

    def may_act(self, request: Request) -> bool:
        """Whether this request's user may act (else the pages show no action)."""

    def role(self, request: Request) -> Role:
        """This request's user's role (``tickwork.api.roles``): which actions the
        pages show it, and which it may take."""

    def allow_action(self, request: Request, form_token: str | None) -> None:
        """Raise ``Refused`` unless this POST may act, with the CSRF token it carries."""

    def csrf_token(self, request: Request) -> tuple[str, bool]:
        """The CSRF token the page's forms carry, and whether to set it as the cookie."""

    def actor(self, request: Request) -> str:
        """Who acts, as a schedule's action log records it."""


@dataclass(frozen=True)
class Access:
    """``token``: the secret every request must carry (None: no authentication, allowed
    only on a loopback address); ``read_only``: no action is served."""

    token: str | None = None
    read_only: bool = False
    csrf_field: str = "csrf"

    def check_binding(self, host: str) -> None:
        """Refuse to serve actions without authentication anywhere but loopback."""
        if self.token is None and not self.read_only and host not in LOOPBACK:
            raise ValueError(
                f"the dashboard would serve actions without authentication on {host}: "
                "give a token (--token, TICKWORK_DASHBOARD_TOKEN) or --read-only"
            )

    def authenticate(self, request: Request) -> None:
        if self.token is None:
            return
        given = _presented(request.headers.get("authorization", ""))
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            raise Refused(401, "authentication required")

    def may_act(self, request: Request) -> bool:
        return not self.read_only

    def role(self, request: Request) -> Role:
        """One shared token: whoever holds it may do everything (read-only: view)."""
        return Role.VIEWER if self.read_only else Role.ADMIN

    def csrf_token(self, request: Request) -> tuple[str, bool]:
        """This browser's token (a new one if it has none yet), kept in its cookie."""
        return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32), True

    def allow_action(self, request: Request, form_token: str | None) -> None:
        """An action (a POST): authenticated, not read-only, and carrying the CSRF token
        of the cookie this browser was given."""
        self.authenticate(request)
        if self.read_only:
            raise Refused(403, "the dashboard is read-only")
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie or not form_token or not hmac.compare_digest(cookie, form_token):
            raise Refused(403, "missing or wrong CSRF token: reload the page and try again")

    def actor(self, request: Request) -> str:
        """A shared token says nothing of who holds it: the dashboard acted."""
        return "dashboard"


def _presented(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


#: what a host application puts in the ASGI scope of a request it forwards: whether its
#: user may act, the CSRF token its forms carry, and who its signed-in user is
MAY_ACT_SCOPE, CSRF_SCOPE, USER_SCOPE = "tickwork.may_act", "tickwork.csrf", "tickwork.user"
#: and, when it has roles of its own, the user's role (a name: viewer, operator, admin)
ROLE_SCOPE = "tickwork.role"


@dataclass(frozen=True)
class HostChecked:
    """The dashboard behind a host application's own checks: the host let the user in,
    decided whether they may act (``tickwork.may_act`` in the request's scope) and checks
    each action's CSRF token itself (the page's forms carry ``tickwork.csrf`` in
    ``csrf_field``). A request that did not come through the host is refused."""

    csrf_field: str = "csrfmiddlewaretoken"

    def authenticate(self, request: Request) -> None:
        if MAY_ACT_SCOPE not in request.scope:
            raise Refused(403, "the dashboard is served through its host application")

    def may_act(self, request: Request) -> bool:
        return bool(request.scope.get(MAY_ACT_SCOPE))

    def role(self, request: Request) -> Role:
        """The host's word (``tickwork.role`` in the scope: a role's name), else admin
        for a user who may act and viewer for one who may not."""
        named = request.scope.get(ROLE_SCOPE)
        if isinstance(named, str):
            return Role.named(named)
        return Role.ADMIN if self.may_act(request) else Role.VIEWER

    def allow_action(self, request: Request, form_token: str | None) -> None:
        self.authenticate(request)
        if not self.may_act(request):
            raise Refused(403, "you may not act on the dashboard")

    def csrf_token(self, request: Request) -> tuple[str, bool]:
        return str(request.scope.get(CSRF_SCOPE, "")), False

    def actor(self, request: Request) -> str:
        user = request.scope.get(USER_SCOPE)
        return f"{user} (dashboard)" if user else "dashboard"
