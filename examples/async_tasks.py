"""``async def`` tasks next to sync ones, and enqueueing from code that runs on an event loop.

python -m examples.async_tasks
tickwork worker -A examples.async_tasks --duration 5 --async-concurrency 50

The worker runs async handlers on its own event loop, up to ``--async-concurrency`` at
once (the 20 fetches below overlap: they finish in about half a second, not ten), and
sync handlers in its thread pool as usual. A handler past its ``timeout`` is cancelled
and retried or poisoned like any failure.
"""

from __future__ import annotations

import asyncio
import time

from tickwork import App

app = App()


@app.task(timeout=5)
async def fetch(url: str) -> None:
    """Stands in for an HTTP call (``httpx.AsyncClient().get(url)``)."""
    started = time.monotonic()
    await asyncio.sleep(0.5)
    print(f"  -> fetched {url} in {time.monotonic() - started:.2f}s", flush=True)


@app.task
def resize(image_id: int) -> None:
    """A sync task in the same app runs in the worker's thread pool."""
    print(f"  -> resized image {image_id}", flush=True)


async def main() -> None:
    # in a FastAPI handler or any coroutine: these never block the event loop
    ids = [await fetch.adelay(f"https://example.com/page/{n}") for n in range(20)]
    await resize.adelay(7)
    found = await app.aget(id=ids[0])
    print(f"enqueued {len(ids)} fetches; the first is {found.state if found else 'gone'}")
    app.close()


if __name__ == "__main__":
    asyncio.run(main())
