"""Benchmark tasks for concurrency limits: the same no-op without a limit, with a limit of
10 per key, and with a limit of 1 per key (contended)."""

from __future__ import annotations

from scheduler import App

app = App()


@app.task(queue="bench")
def free(n: int, key: str) -> None:
    return None


@app.task(queue="bench", concurrency_limit=10, limit_key="key")
def limited(n: int, key: str) -> None:
    return None


@app.task(queue="bench", concurrency_limit=1, limit_key="key")
def contended(n: int, key: str) -> None:
    return None
