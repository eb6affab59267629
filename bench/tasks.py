"""Benchmark tasks: a no-op, and one that records how late it ran."""

from __future__ import annotations

import time

from tickwork.scheduler import App

app = App()
lateness: list[float] = []


@app.task(queue="bench")
def noop(n: int) -> None:
    return None


@app.task(queue="timed")
def timed(due: float) -> None:
    lateness.append(time.time() - due)


@app.task(queue="memory")
def payload(data: str) -> None:
    return None
