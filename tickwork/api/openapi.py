"""The API's OpenAPI 3.1 document, made from the endpoint table (``ENDPOINTS``) and the
models' JSON schemas, so it cannot drift from what the API checks. Served at
``/api/v1/openapi.json``; ``tickwork openapi`` prints it (the copy checked in as
``docs/openapi.json`` is compared with it by the tests)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from tickwork.api.endpoints import ENDPOINTS, Spec
from tickwork.api.models import ErrorBody
from tickwork.scheduler.runs.changes import RunChange

_REF = "#/components/schemas/{model}"


def document() -> dict[str, Any]:
    """The OpenAPI document of ``/api/v1``."""
    models: set[type[BaseModel]] = {ErrorBody}
    for spec in ENDPOINTS:
        models.update(m for m in (spec.body, spec.answer) if m is not None)
    ordered = sorted(models, key=lambda m: m.__name__)
    _, schemas = models_json_schema([(model, "validation") for model in ordered], ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for spec in ENDPOINTS:
        paths.setdefault(spec.path, {})[spec.method.lower()] = _operation(spec)
    paths["/stream"] = {"get": _stream_operation()}
    schemas.setdefault("$defs", {})["RunChange"] = TypeAdapter(RunChange).json_schema()
    return {
        "openapi": "3.1.0",
        "info": {"title": "tickwork", "version": _version()},
        "servers": [{"url": "/api/v1"}],
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"token": []}],
    }


def _operation(spec: Spec) -> dict[str, Any]:
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in re.findall(r"{(\w+)}", spec.path)
    ]
    parameters += [
        {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
        for name in spec.query
    ]
    if spec.handler == "enqueue":
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
            }
        )
    answer: dict[str, Any] = {}
    if spec.answer is not None:
        ref = {"$ref": _REF.format(model=spec.answer.__name__)}
        answer = {"type": "array", "items": ref} if spec.many else ref
    error = {"content": {"application/json": {"schema": {"$ref": _REF.format(model="ErrorBody")}}}}
    operation: dict[str, Any] = {
        "summary": spec.summary,
        "operationId": spec.handler,
        "responses": {
            "200": {"description": "done", "content": {"application/json": {"schema": answer}}},
            "4XX": {"description": "refused: what is wrong, with a stable code", **error},
            "503": {"description": "the backend did not answer, or the queue is full", **error},
        },
    }
    if parameters:
        operation["parameters"] = parameters
    if spec.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(model=spec.body.__name__)}}
            },
        }
    return operation


def _stream_operation() -> dict[str, Any]:
    """``GET /stream`` (``stream.py``): Server-Sent Events, not JSON."""
    return {
        "summary": "Runs' changes and emitted events as they happen, as Server-Sent "
        "Events: 'ready' once listening, then 'run' with each change (data: a RunChange), "
        "'lost' with a count when a slow client missed some",
        "operationId": "stream",
        "parameters": [
            {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
            for name in ("run", "task", "queue", "key", "name")
        ],
        "responses": {
            "200": {
                "description": "an event stream that stays open",
                "content": {
                    "text/event-stream": {
                        "schema": {
                            "type": "string",
                            "description": "events; a 'run' event's data is a RunChange",
                        },
                        "x-event-data": {"$ref": _REF.format(model="RunChange")},
                    }
                },
            },
            "401": {
                "description": "no token, or a wrong one",
                "content": {
                    "application/json": {"schema": {"$ref": _REF.format(model="ErrorBody")}}
                },
            },
        },
    }


def _version() -> str:
    try:
        return version("tickwork")
    except PackageNotFoundError:
        return "0"
