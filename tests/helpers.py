"""Small helpers shared by the fault tests."""

from __future__ import annotations

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
