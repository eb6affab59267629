"""The worker's HTTP port (``--metrics-port``): ``/metrics`` (Prometheus' text format, from
the worker's own registry), ``/healthz`` (alive) and ``/readyz`` (ready), the probes
answering 200 or 503 with a JSON body that names each check (``health.py``). Any other
path serves the metrics, as before the probes existed.

Served from ``start()`` to ``stop()`` by a small threaded WSGI server in a daemon thread:
a probe waiting on a backend that does not answer never holds up a scrape.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer  # daemon request threads

from tickwork.workers.reporting.health import Health, Verdict

StartResponse = Callable[..., Any]


class WorkerEndpoint:
    """A WSGI application of the worker's three paths, and the server that serves it."""

    def __init__(self, registry: CollectorRegistry, health: Health) -> None:
        self._metrics = make_wsgi_app(registry)
        self._probes: dict[str, Callable[[], Verdict]] = {
            "/healthz": health.alive,
            "/readyz": health.ready,
        }
        self._server: WSGIServer | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        probe = self._probes.get(environ.get("PATH_INFO", ""))
        if probe is None:
            body: Iterable[bytes] = self._metrics(environ, start_response)
            return body
        verdict = probe()
        payload = verdict.body()
        start_response(
            "200 OK" if verdict.ok else "503 Service Unavailable",
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(payload))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [payload]

    def start(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve on ``host:port`` (0: any free port); returns the port."""
        server_class = type("_Server", (ThreadingWSGIServer,), {"address_family": _family(host)})
        server: WSGIServer = make_server(
            host, port, self, server_class, handler_class=_QuietHandler
        )
        threading.Thread(target=server.serve_forever, name="tickwork-endpoint", daemon=True).start()
        self._server = server
        return int(server.server_port)

    def stop(self) -> None:
        """Stop serving, without waiting: the server notices within its poll interval
        (half a second), which a worker's shutdown need not wait for."""
        server, self._server = self._server, None
        if server is not None:
            threading.Thread(target=_close, args=(server,), daemon=True).start()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not logged (a probe every few seconds would fill the log)."""


def _family(host: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 address ("::"), IPv4 otherwise."""
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return infos[0][0] if infos else socket.AF_INET


def _close(server: WSGIServer) -> None:
    server.shutdown()
    server.server_close()
