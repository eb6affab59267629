"""What live changes cost a worker (``workers/reporting/live.py``): no-ops end to end, one
worker at its defaults, with live changes off (``live_changes_s=0``), on with nobody
listening (the default: each run's start and end kept a few seconds, then dropped), and
on with a stream listening (a listener in a process of its own, as a server is, its
feed read and dropped: every change encoded and published; after it, the next round
waits until its word expired), in rounds that alternate, quoting each
against off pair by pair.

python -m bench.live_pairs [--pairs 5] [--messages 20000] [--only sqlite|redis] [--out FILE.json]
(starts a Redis server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import on_sqlite_and_redis
from bench.engine import end_to_end
from tickwork.scheduler.backends import open_backend
from tickwork.scheduler.backends.roles.changes import ANNOUNCE_EVERY_S


def listen(url: str) -> None:
    """A server's part, in a process of its own (``--listen URL``): announce a listener
    and drain its feed until standard input closes; print how many changes it heard."""
    backend = open_backend(url)
    feed = backend.changes.listen()
    stop = threading.Event()
    heard = 0

    def announce() -> None:
        while not stop.is_set():
            backend.changes.announce("bench")
            stop.wait(ANNOUNCE_EVERY_S)

    announcer = threading.Thread(target=announce, daemon=True)
    announcer.start()

    def until_told() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_told, daemon=True).start()
    while not stop.is_set():
        heard += len(feed.next(0.2))
    announcer.join(10)
    feed.close()
    backend.close()
    print(heard, flush=True)


@contextmanager
def listening(url: str) -> Iterator[list[int]]:
    """A listener in a process of its own, as a server with a stream open is; yields the
    count of changes it heard (filled when the block ends)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.live_pairs", "--listen", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    heard = [0]
    time.sleep(1.5)  # the worker looks every half second whether someone listens
    try:
        yield heard
    finally:
        out, _ = child.communicate("", timeout=60)
        heard[0] = int(out.strip() or 0)


def _until_nobody_listens(url: str) -> None:
    """Wait out the last listener's word (believed ten seconds)."""
    backend = open_backend(url)
    try:
        while backend.changes.listened():
            time.sleep(0.5)
    finally:
        backend.close()


def pairs(url: str, count: int, rounds: int) -> dict[str, Any]:
    def run(live_s: float) -> float:
        return float(end_to_end(url, count, 8, None, 100, live_changes_s=live_s)["per_second"])

    def listened() -> float:
        with listening(url) as heard:
            per_second = run(0.02)
        heard_per_run.append(heard[0])
        _until_nobody_listens(url)  # before the next round's runs
        return per_second

    heard_per_run: list[int] = []
    variants: dict[str, Callable[[], float]] = {
        "off": lambda: run(0),
        "on_nobody_listening": lambda: run(0.02),
        "on_listened": listened,
    }
    runs: list[dict[str, float]] = []
    for _ in range(rounds):
        runs.append({name: measure() for name, measure in variants.items()})
    ratios = {
        name: round(statistics.median(r[name] / r["off"] for r in runs), 3)
        for name in variants
        if name != "off"
    }
    return {
        "backend": url.split("://")[0],
        "messages": count,
        "runs": runs,
        "median_ratio_to_off": ratios,
        "changes_heard_per_listened_run": heard_per_run,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--only", choices=("sqlite", "redis"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--listen", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.listen:
        listen(args.listen)
        return
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    on_sqlite_and_redis(lambda url: pairs(url, args.messages, args.pairs), {}, args.out, args.only)


if __name__ == "__main__":
    main()
