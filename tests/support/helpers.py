"""Small helpers shared by the fault tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path


def completed(path: Path) -> Counter[int]:
    """How many times each number was recorded (one line per handler run)."""
    if not path.exists():
        return Counter()
    return Counter(int(line) for line in path.read_text().split())


def wait_until(predicate: Callable[[], bool], timeout_s: float) -> bool:
    """Poll ``predicate`` until it holds or ``timeout_s`` passes; True if it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def start_record_worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A ``tickwork worker`` process for ``tests.support.crash_tasks``, logging to ``log``."""
    command = [
        sys.executable,
        "-m",
        "tickwork",
        "worker",
        "-A",
        "tests.support.crash_tasks",
        "--concurrency",
        "4",
        "--log-level",
        "warning",
    ]
    with log.open("ab") as stderr:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def enqueue_records(url: str, numbers: range) -> None:
    """Enqueue ``tests.support.crash_tasks.record(n)`` for each number on the backend at ``url``."""
    from tests.support.crash_tasks import app, record

    app.use_backend(url)
    report = app.enqueue_many(record.call(n) for n in numbers)
    assert report.enqueued == len(numbers)
    app.close()
