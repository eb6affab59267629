"""``create_api``: the API's ASGI application (mounted at ``/api/v1`` by the dashboard)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tickwork.api.openapi import document
from tickwork.api.plumbing import error_response
from tickwork.api.routes import api_routes
from tickwork.api.security import Guard
from tickwork.api.stream import ChangeHub, stream_endpoint
from tickwork.scheduler import App


def create_api(
    app: App, guard: Guard, audit: Callable[[str, str, str], None] | None = None
) -> Starlette:
    """The API over ``app``, guarded by ``guard``: its endpoints and its OpenAPI document
    (``/openapi.json``, readable by whoever may read the API). ``audit(actor, action,
    outcome)`` records each write."""

    async def openapi(request: Request) -> Response:
        return JSONResponse(document())

    async def not_found(request: Request, _: Exception) -> Response:
        return error_response(404, "not_found", "no such endpoint")

    async def not_allowed(request: Request, _: Exception) -> Response:
        return error_response(405, "method_not_allowed", f"{request.method} is not served here")

    changes = ChangeHub(app.backend)
    routes = [
        *api_routes(app, guard, audit),
        Route("/openapi.json", openapi),
        Route("/stream", stream_endpoint(changes, guard)),
    ]
    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
