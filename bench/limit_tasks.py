"""Benchmark tasks for limits: the same no-op without a limit, with a concurrency limit of
10 per key, with one of 1 per key (contended), and with a rate limit per key that a
benchmark never reaches (what asking for a start costs), one that keeps its result
(what writing the result record costs), and one with a fair-share key (what taking
turns costs)."""

from __future__ import annotations

from tickwork.scheduler import App

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


@app.task(queue="bench", rate_limit="100000/s", limit_key="key")
def rated(n: int, key: str) -> None:
    return None


@app.task(queue="bench", keep_result=True)
def kept(n: int, key: str) -> int:
    return n


@app.task(queue="bench", fair_key="key")
def fair(n: int, key: str) -> None:
    return None
