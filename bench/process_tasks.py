"""Tasks of ``bench.processes``: a no-op, and one that computes for about a millisecond."""

from __future__ import annotations

from tickwork.scheduler import App

app = App()


@app.task(queue="procs")
def noop(n: int) -> None:
    return None


@app.task(queue="procs")
def crunch(n: int) -> int:
    return sum(i * i for i in range(15_000 + n % 7))
