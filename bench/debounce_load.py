"""Debounce under load (issue 51): ``--calls`` calls over ``--keys`` keys from
``--threads`` producer threads, paced over ``--seconds``, into a task with
``Debounce(period, max=...)`` and ``history=True``, while one worker runs. Checked from
the ledger (each run's due and start times, ``app.run_history``):

- one run per key per quiet period: a key's consecutive runs are due at least a period
  apart (a call during a period joins its run; the next run is due a period after a
  later call at the soonest);
- none later than ``max``: every call is covered by a run of its key (with its arguments
  or a later call's) due at most ``max`` after the call (the run's lateness, from its
  due time to its start, is reported beside);
- the last call of every key runs.

python -m bench.debounce_load [--calls 10000] [--keys 200] [--threads 4] [--seconds 10]
                              [--period-ms 1000] [--max-ms 3000]
                              [--only sqlite|redis|postgres|cassandra] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import logging
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import on_backends
from tickwork import App, Debounce, Worker, WorkerConfig, current_run
from tickwork.scheduler.backends import State

QUEUE = "debounce-bench"


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    app = App(url)
    app.backend.queues.purge(QUEUE)
    period, most = timedelta(milliseconds=args.period_ms), timedelta(milliseconds=args.max_ms)
    lock = threading.Lock()
    runs: list[tuple[str, int, int, int]] = []  # (key, n, due, start): backend ms
    ids: dict[str, set[str]] = {}  # a key's message ids (its group's two slots)

    @app.task(
        debounce=Debounce(period, max=most, key="k"),
        history=True,
        queue=QUEUE,
        name="bench.debounced",
    )
    def touch(k: str, n: int) -> None:
        run = current_run()
        start = app.backend_clock.now_ms()
        stored = app.backend.messages.get(run.message_id, QUEUE)  # its due time, as stored
        # (a record replaced while it ran, both slots of its group started, shows the
        # new period's: its due time is then the worker's, from the run's lateness)
        running = stored is not None and stored.state is State.RUNNING
        due = (
            stored.envelope.due_ms
            if stored is not None and running
            else start - run.info.lateness_ms
        )
        with lock:
            runs.append((k, n, due, start))
            ids.setdefault(k, set()).add(run.message_id)

    keys = [f"key-{i}" for i in range(args.keys)]
    per_key = args.calls // args.keys
    calls: list[tuple[str, int, int]] = []  # (key, n, backend ms when enqueued)

    def produce(mine: list[str]) -> None:
        step = args.seconds / per_key  # each key called every step seconds
        begin = time.monotonic()
        for n in range(per_key):
            for key in mine:
                touch.delay(key, n)
                with lock:
                    calls.append((key, n, app.backend_clock.now_ms()))
            time.sleep(max(0.0, begin + (n + 1) * step - time.monotonic()))

    worker = Worker(app, WorkerConfig(queues=(QUEUE,), concurrency=8, poll_interval_s=0.1))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    threads = [
        threading.Thread(target=produce, args=(keys[i :: args.threads],))
        for i in range(args.threads)
    ]
    started = time.monotonic()
    for producer in threads:
        producer.start()
    for producer in threads:
        producer.join()
    producing_s = time.monotonic() - started
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with lock:
            last = {k: n for k, n, _, _ in runs}
        if all(last.get(key) == per_key - 1 for key in keys):
            break
        time.sleep(0.2)
    worker.stop()
    thread.join(60)
    result = _check(app, runs, calls, ids, per_key, (period, most))
    app.backend.queues.purge(QUEUE)
    app.close()
    return {
        "backend": url.split("://")[0],
        "calls": len(calls),
        "producing_s": round(producing_s, 2),
        **result,
    }


def _check(
    app: App,
    runs: list[tuple[str, int, int, int]],
    calls: list[tuple[str, int, int]],
    ids: dict[str, set[str]],
    per_key: int,
    rule: tuple[timedelta, timedelta],
) -> dict[str, Any]:
    """What the runs did, against the calls; and how many the ledger holds."""
    (period, most), keys = rule, sorted(ids)
    timed: dict[str, list[tuple[int, int, int]]] = {key: [] for key in keys}  # (due, start, n)
    for key, n, due, start in runs:
        timed[key].append((due, start, n))
    # the ledger records each run its ack wrote: a run whose message a newer call
    # replaced while it ran (a new period) finishes, but its ack finds the row gone
    ledger = sum(
        1
        for key in keys
        for message_id in ids[key]
        for e in app.run_history(message_id, queue=QUEUE)
        if e.started_at
    )
    period_ms, most_ms = period // timedelta(milliseconds=1), most // timedelta(milliseconds=1)
    too_close = late = 0
    lateness = []
    for key in keys:
        ordered = sorted(timed[key])
        too_close += sum(1 for a, b in itertools.pairwise(ordered) if b[0] - a[0] < period_ms)
        lateness += [start - due for due, start, _ in ordered]
    late_calls = []
    for key, n, at in calls:  # the first run with this call's arguments or a later call's
        covered = [due for due, _, ran in timed[key] if ran >= n]
        if not covered or min(covered) - at > most_ms:
            late += 1
            late_calls.append((key, n, at, min(covered, default=None), sorted(timed[key])))
    lateness.sort()
    last_ran = all(max((n for *_, n in timed[k]), default=-1) == per_key - 1 for k in keys)
    return {
        "runs": len(runs),
        "runs_per_key": round(len(runs) / len(keys), 2),
        "runs_in_the_ledger": ledger,
        "last_call_of_every_key_ran": last_ran,
        "runs_due_closer_than_a_period": too_close,
        "calls_run_later_than_max": late,
        "lateness_ms": {
            "p50": lateness[len(lateness) // 2] if lateness else None,
            "p99": lateness[int(len(lateness) * 0.99)] if lateness else None,
            "max": lateness[-1] if lateness else None,
        },
        "late_calls_first_3": late_calls[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--period-ms", type=int, default=1000)
    parser.add_argument("--max-ms", type=int, default=3000)
    parser.add_argument("--only", choices=("sqlite", "redis", "postgres", "cassandra"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    extra = {
        k: getattr(args, k) for k in ("calls", "keys", "threads", "seconds", "period_ms", "max_ms")
    }
    out = None if args.out is None else Path(args.out)
    on_backends(lambda url: measure(url, args), extra, out, args.only)


if __name__ == "__main__":
    main()
