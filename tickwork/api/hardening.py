"""What every response and request of the dashboard goes through, whoever guards it:
security headers, and a bound on what a request may send.

- ``SecureHeaders``: a ``Content-Security-Policy`` that lets a page load nothing but its
  own inline styles and the dashboard's one script file (``live.js``, which reads the
  API's stream: no inline script runs, so a value that slipped past the templates'
  escaping still could not), may not be framed, and may post forms only to the
  dashboard; ``X-Frame-Options: DENY``, ``X-Content-Type-Options: nosniff`` and
  ``Referrer-Policy: no-referrer``.
- ``BodyLimit``: a request whose body is larger than ``MAX_BODY_BYTES`` is answered 413
  (in the API's error shape, code ``too_large``) before any of it reaches a handler (by
  its ``Content-Length``, or as it streams in).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: what a page may load: its own inline styles and images, the dashboard's script file,
#: and (from that script) the dashboard's own API; nothing else
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; "
    "style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)

#: the largest request body the dashboard reads (its forms send a few hundred bytes)
MAX_BODY_BYTES = 64 * 1024


class SecureHeaders:
    """Adds ``HEADERS`` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name, value) for name, value in HEADERS if name not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


class TooLarge(Exception):
    """A request body went past ``MAX_BODY_BYTES`` while it streamed in."""


class BodyLimit:
    """Answers 413 to a request whose body is larger than ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(send, self.limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise TooLarge
            return message

        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except TooLarge:
            if not started:
                await _too_large(send, self.limit)


async def _too_large(send: Send, limit: int) -> None:
    """The 413, in the API's error shape (a page's form shows it as text)."""
    message = f"request body larger than {limit} bytes"
    body = json.dumps({"error": {"code": "too_large", "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
