"""Who may use the dashboard: authentication (a token, sent as HTTP basic's password or
as a bearer token), a read-only mode, and CSRF protection of every action (a random token
in a ``SameSite=Strict`` cookie that each form sends back)."""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass

from starlette.requests import Request

CSRF_COOKIE = "tickwork_csrf"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Refused(Exception):
    """A request the dashboard does not serve: ``status`` and why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status


@dataclass(frozen=True)
class Access:
    """``token``: the secret every request must carry (None: no authentication, allowed
    only on a loopback address); ``read_only``: no action is served."""

    token: str | None = None
    read_only: bool = False

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

    def allow_action(self, request: Request, form_token: str | None) -> None:
        """An action (a POST): authenticated, not read-only, and carrying the CSRF token
        of the cookie this browser was given."""
        self.authenticate(request)
        if self.read_only:
            raise Refused(403, "the dashboard is read-only")
        cookie = request.cookies.get(CSRF_COOKIE)
        if not cookie or not form_token or not hmac.compare_digest(cookie, form_token):
            raise Refused(403, "missing or wrong CSRF token: reload the page and try again")


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


def csrf_token(request: Request) -> str:
    """This browser's CSRF token (a new one if it has none yet)."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
