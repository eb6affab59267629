"""What every page and action of the dashboard shares: the templates and their filters,
a page handler (authenticate, gather in a thread, render, set the CSRF cookie) and an
action handler (authenticate, check read-only and CSRF, act in a thread, redirect back)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from tickwork.api.roles import Role, needed
from tickwork.api.security import CSRF_COOKIE, Guard, Refused
from tickwork.scheduler import TickworkError
from tickwork.scheduler.backends.codec import shown
from tickwork.scheduler.clock import to_datetime

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
Handler = Callable[[Request], Awaitable[Response]]


class Form(dict[str, str]):
    """A posted form: each field's last value, and ``getlist`` for a field sent many
    times (the ticked boxes of a selection)."""

    def __init__(self, data: FormData) -> None:
        super().__init__((name, str(value)) for name, value in data.items())
        self._lists = {name: [str(v) for v in data.getlist(name)] for name in data}

    def getlist(self, name: str) -> list[str]:
        return list(self._lists.get(name, []))


Gather = Callable[[Request], dict[str, Any]]
#: records an action in the audit log: (actor, action, outcome)
Audit = Callable[[str, str, str], None]
Act = Callable[[dict[str, str], Form], str]


def page(access: Guard, template: str, gather: Gather) -> Handler:
    """A GET handler rendering ``template`` with what ``gather`` reads (in a thread)."""

    async def handler(request: Request) -> Response:
        try:
            access.authenticate(request)
        except Refused as refused:
            return refusal(refused)
        context = await run_in_threadpool(gather, request)
        token, as_cookie = access.csrf_token(request)
        root = str(request.scope.get("root_path", ""))  # where it is mounted ("": at /)
        path = request.url.path
        role = access.role(request)
        context.update(
            csrf=token,
            csrf_field=access.csrf_field,
            read_only=role < Role.OPERATOR,
            admin=role >= Role.ADMIN,  # the actions only an admin may take are shown
            role=role.label,
            path=path,  # the whole path: where an action comes back to
            root=root,  # every link and form starts with it
            here=path.removeprefix(root) or "/",  # the page, as the navigation names it
        )
        response = TEMPLATES.TemplateResponse(request, template, context)
        if as_cookie:
            response.set_cookie(
                CSRF_COOKIE,
                token,
                path=f"{root}/",  # this dashboard's pages only
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",  # over TLS, never sent without it
            )
        return response

    return handler


def action(access: Guard, act: Act) -> Handler:
    """A POST handler: ``act(path parameters, form)`` says what it did, and the browser
    goes back to the form's ``next`` page with that as ``done``. The path parameters carry
    who acts too (``actor``, from the guard), for a schedule's action log."""

    async def handler(request: Request) -> Response:
        form = Form(await request.form())
        try:
            access.allow_action(request, form.get(access.csrf_field))
            wanted = needed(str(request.path_params.get("verb", "")))
            if access.role(request) < wanted:
                raise Refused(403, f"this needs the {wanted.label} role")
            params = {**request.path_params, "actor": access.actor(request)}
            done = await run_in_threadpool(act, params, form)
        except Refused as refused:
            return refusal(refused)
        except TickworkError as err:
            done = f"error: {err}"
            audit: Audit | None = getattr(request.app.state, "audit", None)
            if audit is not None:  # what was done, the service recorded; this, it did not
                what = request.url.path.removeprefix(str(request.scope.get("root_path", "")))
                await run_in_threadpool(audit, params["actor"], f"dashboard POST {what}", done)
        root = str(request.scope.get("root_path", ""))
        back = form.get("next", "")
        if not back.startswith(f"{root}/") or back.startswith("//"):
            back = f"{root}/"  # only pages of this dashboard
        separator = "&" if "?" in back else "?"
        return RedirectResponse(f"{back}{separator}done={quote(done[:300])}", status_code=303)

    return handler


def refusal(refused: Refused) -> Response:
    headers = {"WWW-Authenticate": 'Basic realm="tickwork"'} if refused.status == 401 else {}
    return PlainTextResponse(str(refused), status_code=refused.status, headers=headers)


def _in_zone(moment: datetime | None, trigger: Any = None, timespec: str = "minutes") -> str:
    """A time as the schedule's owner reads it: in the trigger's timezone if it has one
    (to the minute, or as ``timespec`` says), else in UTC to the second."""
    if moment is None:
        return ""
    zone = getattr(trigger, "tz", None)
    if zone:
        return f"{moment.astimezone(ZoneInfo(zone)).isoformat(timespec=timespec)} {zone}"
    return moment.isoformat(timespec="seconds")


def _ms_time(epoch_ms: int | None) -> str:
    return "" if epoch_ms is None else to_datetime(epoch_ms).isoformat(timespec="seconds")


TEMPLATES.env.filters["in_zone"] = _in_zone
TEMPLATES.env.filters["shown"] = shown  # an encrypted error text, without the key
TEMPLATES.env.filters["ms_time"] = _ms_time
