"""Benchmark tasks for workflows: batch members, a callback, and chain steps; the
callback and the last step mark when they ran."""

from __future__ import annotations

import threading
import time

from tickwork.scheduler import App

app = App()
finished = threading.Event()
finished_at: list[float] = []


@app.task(queue="bench")
def member(n: int) -> int:
    return n


@app.task(queue="bench")
def gather(results: list[int]) -> None:
    assert len(results) == results[-1] + 1
    finished_at.append(time.perf_counter())
    finished.set()


@app.task(queue="bench")
def increment(n: int) -> int:
    return n + 1


@app.task(queue="bench")
def last(n: int) -> None:
    finished_at.append(time.perf_counter())
    finished.set()


@app.task(queue="bench")
def node(level: int, place: int) -> int:
    return level


@app.task(queue="bench")
def sink() -> None:
    finished_at.append(time.perf_counter())
    finished.set()
