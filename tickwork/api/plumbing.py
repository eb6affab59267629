"""What every endpoint of the API shares: who may call it (the dashboard's guard), the
JSON body checked against its model, the action run in a thread, and every error as one
JSON shape with a stable code (``ErrorBody``).

Writes (POST, PUT, DELETE) must send ``Content-Type: application/json``: a web page of
another site cannot make a browser send that without asking first (a CORS preflight the
API never answers), so a cookie or a loopback address is no way in for it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tickwork.api.models import ErrorBody, ErrorDetail
from tickwork.api.roles import Role
from tickwork.api.security import Guard, Refused
from tickwork.scheduler import (
    BackendError,
    CalendarNotFound,
    InvalidMessage,
    KeyConflict,
    LimitNotFound,
    QueueFull,
    ScheduleNotFound,
    UnknownTask,
    WorkflowNotFound,
)

M = TypeVar("M", bound=BaseModel)
Endpoint = Callable[[Request], Awaitable[Response]]

_WRITES = ("POST", "PUT", "DELETE", "PATCH")

#: the guard's refusals, by status
_REFUSALS = {401: "unauthorized", 403: "forbidden", 429: "rate_limited"}


class ApiError(Exception):
    """An answer other than success: its status, stable code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def error_response(status: int, code: str, message: str) -> JSONResponse:
    body = ErrorBody(error=ErrorDetail(code=code, message=message))  # type: ignore[arg-type]
    return JSONResponse(body.model_dump(mode="json"), status_code=status)


def _mapped(err: Exception) -> ApiError:
    """The API's answer to an error of tickwork's."""
    if isinstance(err, ApiError):
        return err
    if isinstance(err, UnknownTask):
        return ApiError(404, "unknown_task", str(err))
    if isinstance(err, ScheduleNotFound | WorkflowNotFound | CalendarNotFound | LimitNotFound):
        return ApiError(404, "not_found", str(err))
    if isinstance(err, KeyConflict):
        return ApiError(409, "key_conflict", str(err))
    if isinstance(err, InvalidMessage):
        return ApiError(422, "invalid", str(err))
    if isinstance(err, QueueFull):
        return ApiError(503, "queue_full", str(err))
    if isinstance(err, BackendError):
        return ApiError(503, "unavailable", f"the backend did not answer: {err}")
    raise err


def endpoint(
    guard: Guard,
    handle: Callable[[Request, Any], Any],
    body: type[BaseModel] | None = None,
    needs: Role = Role.OPERATOR,
    audit: Callable[[str, str, str], None] | None = None,
    *,
    record_done: bool = False,
) -> Endpoint:
    """An endpoint: ``handle(request, parsed body or None)`` runs in a thread and returns
    a model (or a list of them, or a plain JSON value) answered with 200. A write needs
    the role ``needs``; a read, any role. ``audit`` records a refused write, and with
    ``record_done`` a write done (one no operator service records itself)."""

    async def serve(request: Request) -> Response:
        try:
            try:
                guard.authenticate(request)
            except Refused as refused:
                code = _REFUSALS.get(refused.status, "unauthorized")
                raise ApiError(refused.status, code, str(refused)) from None
            parsed = None
            if request.method in _WRITES:
                if guard.role(request) < needs:
                    raise ApiError(403, "forbidden", f"this needs the {needs.label} role")
                media = request.headers.get("content-type", "").split(";")[0].strip()
                if media != "application/json":
                    raise ApiError(
                        415, "unsupported_media_type", "send the body as application/json"
                    )
                parsed = parse(body, await request.body()) if body is not None else None
            result = await run_in_threadpool(handle, request, parsed)
        except Exception as err:  # our errors become the shape; anything else propagates
            mapped = _mapped(err)
            if audit is not None and request.method in _WRITES and mapped.status != 401:
                await _audited(audit, guard, request, f"refused: {mapped.code}")
            return error_response(mapped.status, mapped.code, str(mapped))
        answer = _jsonable(result)
        if audit is not None and record_done and request.method in _WRITES:
            await _audited(audit, guard, request, json.dumps(answer)[:200])
        return JSONResponse(answer)

    return serve


def refusal(guard: Guard, request: Request) -> JSONResponse | None:
    """The answer to a request ``guard`` refuses to let in (no or a wrong token), else
    None: for an endpoint that answers otherwise than ``endpoint`` does (a stream)."""
    try:
        guard.authenticate(request)
    except Refused as refused:
        code = _REFUSALS.get(refused.status, "unauthorized")
        return error_response(refused.status, code, str(refused))
    return None


async def _audited(
    audit: Callable[[str, str, str], None], guard: Guard, request: Request, outcome: str
) -> None:
    """Record a write in the audit log (with the query that says what it was on)."""
    what = f"api {request.method} {request.url.path.split('/api/v1', 1)[-1]}"
    if request.url.query:
        what += f"?{request.url.query}"
    try:
        who = actor(guard, request)
    except Refused:
        who = "unknown"
    await run_in_threadpool(audit, who, what, outcome)


def parse(model: type[M], raw: bytes) -> M:
    """``raw`` as ``model``; ``ApiError`` 422 saying what is wrong."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise ApiError(422, "invalid", f"{where}: {first['msg']}") from None
    except (ValueError, json.JSONDecodeError) as err:  # not JSON at all
        raise ApiError(422, "invalid", f"the body is not JSON: {err}") from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    return value


def query(request: Request, name: str) -> str | None:
    """Query parameter ``name``, None when absent or empty."""
    return request.query_params.get(name) or None


def actor(guard: Guard, request: Request) -> str:
    """Who acts through the API, for the action logs."""
    who = guard.actor(request)
    return "api" if who == "dashboard" else who
