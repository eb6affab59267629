"""The async benchmark task, in an app of its own: an app with an async task gets an event
loop and more permits, which must not change the sync scenarios' figures."""

from __future__ import annotations

from tickwork.scheduler import App

app = App()


@app.task(queue="bench")
async def noop(n: int) -> None:
    return None
