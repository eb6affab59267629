"""What the occurrence ledger's parts cost, each alone, in this process: building a
settled run's entry (``RunLedger.entry``: a keyed schedule's plain run), folding SQLite's
log into its pages (records a second, 200 schedules, in memory), and Redis's own work
to append records (records a second of the server's script time, from ``INFO
commandstats``; one record an entry, 200 schedules, their lists full). Figures are the
best of five runs. ``bench.ledger`` measures what they add up to on a running worker.

python -m bench.ledger_parts [--out FILE.json]

``bench.ab`` runs single measures of it in another tree (``ledger-entry``,
``ledger-fold-sqlite``, ``ledger-append-redis``): the calls it makes are the same in the
trees it compares, so the other tree's code is what it measures.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from tickwork.scheduler import App, Message
from tickwork.scheduler.backends import LedgerEntry
from tickwork.scheduler.backends.base import Claim
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.triggers import Repeating

MEASURES = ("ledger-entry", "ledger-fold-sqlite", "ledger-append-redis")
_NOW_MS = 1_800_000_000_000
_SCHEDULES = 200
#: a run's record as a worker writes it (its size matters to the backends' work)
_RECORD = (
    b'{"o":"succeeded","s":1800000000000,"b":1800000000001,"f":1800000000002,'
    b'"a":1,"w":"host:12345","i":"k11164bc2db3d0a77f8cbfb1b"}'
)


def _best(run: Any, count: int) -> float:
    """Items a second of ``run`` (which handles ``count`` items), the best of five."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return count / best


def entry_per_second() -> float:
    """``RunLedger.entry`` of a keyed ``Repeating`` schedule's run that succeeded."""
    from tickwork.workers.intake.holdings import Work
    from tickwork.workers.settling.ledger import RunLedger

    app = App("sqlite:///unused.db")
    message = Message(
        id="k11164bc2db3d0a77f8cbfb1b",
        queue="bench",
        task="bench.noop",
        key="s1",
        trigger=Repeating(interval=timedelta(seconds=1)),
        scheduled_at=_NOW_MS,
        enqueued_at=_NOW_MS,
    )
    claim = Claim(message.id, "bench", "s1", b"", "token", 1, _NOW_MS, _NOW_MS + 30_000, 30_000)
    work = Work(claim, message, started_ms=_NOW_MS + 1)
    ledger = RunLedger(app)
    assert ledger.entry(work, RunOutcome.SUCCEEDED, _NOW_MS + 2) is not None
    count = 20_000

    def run() -> None:
        for _ in range(count):
            ledger.entry(work, RunOutcome.SUCCEEDED, _NOW_MS + 2, None, 0)

    return _best(run, count)


def _entries(index: int, count: int) -> list[LedgerEntry]:
    return [
        LedgerEntry("bench", f"k:s{(index + j) % _SCHEDULES}", (_RECORD,), 100, 2_592_000_000)
        for j in range(count)
    ]


def fold_per_second() -> float:
    """Records folded a second: 5 s of a busy worker's log (22,400 records in acks of
    100), then one fold, in a file in memory."""
    from tickwork.scheduler.backends.sqlite import connection, ledger_log, ledger_pages

    db = sqlite3.connect(":memory:", isolation_level=None)
    db.executescript(
        connection.SCHEMA + ledger_log.LEDGER_LOG_SCHEMA + ledger_pages.LEDGER_PAGES_SCHEMA
    )
    acks, per_ack = 224, 100
    best = float("inf")
    for round_ in range(7):
        db.execute("BEGIN")
        for index in range(acks):
            ledger_log.append(db, _entries(index * per_ack, per_ack), _NOW_MS)
        db.execute("COMMIT")
        db.execute("BEGIN")
        started = time.perf_counter()
        ledger_log.fold(db)
        took = time.perf_counter() - started
        db.execute("COMMIT")
        if round_ >= 2:  # the first folds fill the pages; then each fold also trims
            best = min(best, took)
    return acks * per_ack / best


def append_per_server_second(url: str) -> float:
    """Records appended a second of Redis's script time: ``append_ledger`` of 50
    entries (of one record) a call, 200 lists kept full."""
    import redis

    app = App(url)
    client = redis.Redis.from_url(url)
    for index in range(0, 25_000, 50):  # fill the lists past their keep
        app.backend.ledger.append(_entries(index, 50))
    client.config_resetstat()
    count = 20_000
    for index in range(0, count, 50):
        app.backend.ledger.append(_entries(index, 50))
    stats = client.info("commandstats")
    usec = sum(v["usec"] for k, v in stats.items() if k.startswith("cmdstat_evalsha"))
    client.close()
    app.close()
    return count / (usec / 1e6)


def per_second(measure: str, url: str | None = None) -> int:
    """One measure's figure (Redis ones need ``url``)."""
    if measure == "ledger-entry":
        return round(entry_per_second())
    if measure == "ledger-fold-sqlite":
        return round(fold_per_second())
    if measure == "ledger-append-redis":
        assert url is not None
        return round(append_per_server_second(url))
    raise ValueError(f"unknown measure {measure!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from bench.common import machine
    from tests.support.servers import RedisServer

    server = RedisServer()
    try:
        figures = {m: per_second(m, server.url) for m in MEASURES}
    finally:
        server.stop()
    report = {"machine": machine(), "per_second": figures}
    json.dump(report, sys.stdout, indent=2)
    print()
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
