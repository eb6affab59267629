"""tickwork in a FastAPI (or Starlette) service.

- ``lifespan(app)``: the service's lifespan; at startup it connects the app's backend
  (a backend that cannot be reached stops the start-up with its error), at shutdown it
  closes it. ``app`` is kept in the service's state for ``TickworkApp``.
- ``TickworkApp``: a dependency that hands a handler the app (``app: TickworkApp``); its
  tasks' asynchronous verbs (``await task.adelay(...)``, ``await handle.aresult()``)
  do not block the event loop.
- ``dashboard_router(app, dependencies=[...])``: the dashboard, to include under a
  prefix, behind the service's own dependencies (your authentication); the dashboard
  keeps its own CSRF protection of each action.

::

    api = FastAPI(lifespan=lifespan(app))
    api.include_router(
        dashboard_router(app, dependencies=[Depends(require_admin)]), prefix="/ops/tickwork"
    )

    @api.post("/orders")
    async def create(order: Order, tickwork: TickworkApp) -> dict[str, str]:
        handle = await charge.adelay(order.id)
        return {"job": str(handle)}
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.params import Depends as DependsParam
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tickwork.dashboard import Access, create_dashboard
from tickwork.scheduler import App

#: where ``lifespan`` keeps the app in the service's state
STATE_NAME = "tickwork"


def lifespan(app: App) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The lifespan of a service that uses ``app`` (see the module docstring)."""

    @asynccontextmanager
    async def run(service: Any) -> AsyncIterator[None]:
        await asyncio.to_thread(lambda: app.backend)  # connect now: fail at start-up
        setattr(service.state, STATE_NAME, app)
        try:
            yield
        finally:
            await asyncio.to_thread(app.close)

    return run


def _tickwork_app(request: Request) -> App:
    """The app ``lifespan`` keeps (``RuntimeError`` when the service has none)."""
    found = getattr(request.app.state, STATE_NAME, None)
    if not isinstance(found, App):
        raise RuntimeError("no tickwork app: give the service lifespan=lifespan(app)")
    return found


#: a handler's parameter annotated so receives the service's tickwork app
TickworkApp = Annotated[App, Depends(_tickwork_app)]


def dashboard_router(
    app: App,
    *,
    dependencies: Sequence[DependsParam] = (),
    read_only: bool = False,
) -> APIRouter:
    """The dashboard of ``app`` as a router: every request first passes
    ``dependencies`` (the service's authentication); ``read_only`` hides every action."""
    dashboard = create_dashboard(app, Access(read_only=read_only))
    router = APIRouter(dependencies=list(dependencies))

    async def forward(request: Request, subpath: str = "") -> Response:
        root = request.url.path[: len(request.url.path) - len(subpath)].rstrip("/")
        return _Forwarded(dashboard, root)

    for path in ("/", "/{subpath:path}"):
        router.add_api_route(path, forward, methods=["GET", "POST"], include_in_schema=False)
    return router


class _Forwarded(Response):
    """A response that hands the request on to the dashboard, mounted at ``root``."""

    def __init__(self, dashboard: ASGIApp, root: str) -> None:
        super().__init__()
        self._dashboard = dashboard
        self._root = root

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._dashboard({**scope, "root_path": self._root}, receive, send)
