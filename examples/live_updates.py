"""Live updates: a client of ``GET /api/v1/stream`` hears each run start and end as the
workers publish them (Server-Sent Events: any language's SSE client, a browser's
``EventSource``, or ``curl -N``). Serve the API, run a worker, and listen::

    tickwork dashboard -A examples.live_updates --token s3cret
    tickwork worker -A examples.live_updates
    curl -N -H 'authorization: Bearer s3cret' \\
         'localhost:8080/api/v1/stream?task=examples.live_updates.render'

``python -m examples.live_updates`` does all of it in one process, on a free port, with
the standard library's HTTP client: it enqueues three renders and prints each change it
hears until all three succeeded.
"""

from __future__ import annotations

import http.client
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from tickwork import App, Worker
from tickwork.dashboard import Access, create_dashboard

app = App()


@app.task
def render(page: int) -> int:
    time.sleep(0.05)
    return page * 2


def stream(port: int, token: str, query: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each event of ``/api/v1/stream?query``: its name and its data."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(
        "GET", f"/api/v1/stream?{query}", headers={"authorization": f"Bearer {token}"}
    )
    name = "message"
    for raw in connection.getresponse():
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield name, json.loads(line.removeprefix("data: "))


def main() -> None:
    token = secrets.token_urlsafe()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        create_dashboard(app, Access(token=token)), port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    worker = Worker(app)
    worker.start()
    try:
        events = stream(port, token, f"task={render.name}")
        assert next(events)[0] == "ready"  # listening: what happens from now on is heard
        pages = {render.delay(page).id: page for page in range(3)}
        succeeded = set()
        for name, change in events:
            assert name == "run", name
            print(f"page {pages[change['id']]}: {change['event']} (attempt {change['attempt']})")
            if change["event"] == "succeeded":
                succeeded.add(change["id"])
            if succeeded == pages.keys():
                break
    finally:
        worker.stop()
        worker.join(30)
        server.should_exit = True
    app.close()


if __name__ == "__main__":
    main()
