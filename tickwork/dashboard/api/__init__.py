"""The HTTP API (``/api/v1``, JSON) over an ``App``, served by the dashboard's own ASGI
application behind the same guard: ``app.create_api`` (mounted by ``create_dashboard``),
``models`` (what it takes and gives), ``routes`` (the endpoints), ``plumbing`` (the
guard, the body checks, the error shape) and ``openapi`` (its OpenAPI document)."""
