"""Throttles and costs: at most three notifications a minute per user, the calls over it
dropped (each one recorded, never lost), and a language-model budget counted in tokens,
each call costing what its prompt will take.

python -m examples.throttle    # runs a worker in this process: 6 notifications of one
                               # user and 2 of another, then 3 model calls of 400, 500
                               # and 300 tokens against 1,000 tokens per 10 seconds;
                               # prints what ran, what was dropped, and when each
                               # model call started (the third waits for room)

A throttle (``throttle=(count, period)``) is a rate limit that drops what is over it:
the dropped calls go to the poison store as ``throttled``, where ``tickwork poison list``
shows them and ``tickwork poison replay`` runs them after all. A ``rate_limit`` delays
the calls over it instead. ``cost=`` makes one call count as that many units of its
task's rate (here tokens), on every backend.
"""

from __future__ import annotations

import time
from datetime import timedelta

from tickwork import App, RateLimit, Worker, WorkerConfig

app = App()
notified: list[str] = []
completions: list[tuple[str, float]] = []
begin = time.monotonic()

#: a tokens-per-10-seconds budget shared by every task that calls the model
tokens = RateLimit(name="model-tokens", count=1000, period=timedelta(seconds=10))


@app.task(throttle=(3, timedelta(minutes=1)), limit_key="user")
def notify(user: str, text: str) -> None:
    notified.append(f"{user}: {text}")


@app.task(rate_limit=tokens)
def complete(prompt: str) -> None:
    completions.append((prompt, time.monotonic() - begin))


def main() -> None:
    for n in range(6):
        notify.delay("ada", f"build {n} finished")
    for n in range(2):
        notify.delay("grace", f"review {n} requested")
    for prompt, size in (("summarise", 400), ("translate", 500), ("classify", 300)):
        complete.call(prompt).options(cost=size).delay()
    worker = Worker(app, WorkerConfig(concurrency=4, burst=True, poll_interval_s=0.1))
    worker.run(duration_s=30)
    print("notified:", *notified, sep="\n  ")
    dropped = [view for view in app.poison.list() if view.reason == "throttled"]
    print(f"dropped by the throttle, kept in the poison store: {len(dropped)}")
    for prompt, at in completions:
        print(f"model call {prompt!r} started at {at:.1f} s")
    app.close()


if __name__ == "__main__":
    main()
