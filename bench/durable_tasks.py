"""Benchmark tasks for durable runs: ``steps(count)`` runs that many no-op journaled steps;
``replay(count)`` journals that many, sleeps a moment, and on its resumption times how
long the replay of the journaled steps took."""

from __future__ import annotations

import threading
import time

from tickwork.scheduler import App, current_run

app = App()
finished = threading.Event()
finished_at: list[float] = []
expected = [0]  # how many runs of ``steps`` the current measurement waits for
replays_s: list[float] = []  # each replay's time, from the handler's start


def noop(index: int) -> int:
    return index


@app.task(queue="bench", durable=True)
def steps(count: int) -> None:
    run = current_run()
    for index in range(count):
        run.step("noop", noop, index)
    finished_at.append(time.perf_counter())
    if len(finished_at) >= expected[0]:
        finished.set()


@app.task(queue="bench", durable=True)
def replay(count: int) -> None:
    started = time.perf_counter()
    run = current_run()
    ran = [0]

    def counted(index: int) -> int:
        ran[0] += 1
        return index

    for index in range(count):
        run.step("noop", counted, index)
    replayed_s = time.perf_counter() - started
    run.sleep(0.01)  # the first run ends here; the second replays every step
    if ran[0] == 0:
        replays_s.append(replayed_s)
        finished_at.append(time.perf_counter())
        finished.set()
