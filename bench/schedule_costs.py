"""What a scheduled message costs a worker's CPU, call by call, in this process: decoding
it from its stored body, and writing its chain's next occurrence as the settler does
(from the stored body where the builder takes one), for a keyed ``Repeating`` schedule,
a keyed ``Cron`` schedule in a zone with DST, and (decoding only) a one-off message.
Figures are calls per second, the best of five runs of about 0.3 s each.

python -m bench.schedule_costs [--out FILE.json]

``bench.ab`` runs single measures of it in another tree (``decode-cron``, ``next-cron``,
``next-repeating``): this file imports only tickwork's public API, so the other tree's
code is what it measures.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tickwork.scheduler import App, Message
from tickwork.scheduler.clock import ManualClock
from tickwork.triggers import Cron, Misfire, Repeating

_NOW_MS = 1_800_000_000_000
MEASURES = (
    "decode-one-off",
    "decode-repeating",
    "decode-cron",
    "next-repeating",
    "next-cron",
)


def _stored(kind: str) -> tuple[App, bytes]:
    """An app on a scratch SQLite file and the stored body of one message of ``kind``."""
    app = App(f"sqlite:///{tempfile.mkdtemp()}/costs.db", clock=ManualClock(_NOW_MS))

    @app.task
    def report(customer: str, n: int) -> None: ...

    if kind == "one-off":
        message_id = report.delay("acme", 1)
    else:
        every = Repeating(interval=timedelta(minutes=5), misfire=Misfire.CATCH_UP)
        paris = Cron(expr="*/5 * * * *", tz="Europe/Paris")
        trigger = every if kind == "repeating" else paris
        message_id = report.schedule(args=("acme", 1), trigger=trigger, key=f"r-{kind}")
    stored = app.backend.messages.get(message_id)
    assert stored is not None
    return app, stored.envelope.body


def _call(measure: str) -> Any:
    """The call ``measure`` times, ready to make."""
    action, _, kind = measure.partition("-")
    app, body = _stored(kind)
    if action == "decode":
        return lambda: Message.decode(body)
    message = Message.decode(body)
    now = int(message.scheduled_at.timestamp() * 1000) + 5
    following = app.builder.following_run
    if "body" in inspect.signature(following).parameters:  # the settler's path
        return lambda: following(message, now, True, body=body)
    return lambda: following(message, now, True)


def per_second(measure: str) -> int:
    """Calls of ``measure`` per second: the best of five runs of about 0.3 s."""
    call = _call(measure)
    started, count = time.perf_counter(), 0
    while time.perf_counter() - started < 0.05:  # warm up, and size the runs
        call()
        count += 1
    size = max(1, int(count * 6))
    best = 0.0
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(size):
            call()
        best = max(best, size / (time.perf_counter() - started))
    return round(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = {
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
        "calls_per_second": {measure: per_second(measure) for measure in MEASURES},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
