"""Tasks and a producer for the bounded-queue tests (importable by spawned processes)."""

from __future__ import annotations

from tickwork.scheduler import App, QueueFull

app = App()


@app.task(queue="bounded")
def noted(n: int) -> None:
    """Does nothing: the tests count messages, not runs."""


def produce(url: str, start: int, count: int) -> int:
    """Try to enqueue ``count`` messages one by one without waiting; how many were written."""
    app.use_backend(url)
    written = 0
    try:
        for n in range(start, start + count):
            try:
                noted.schedule(args=(n,), block=False)
            except QueueFull:
                continue
            written += 1
    finally:
        app.close()
    return written
