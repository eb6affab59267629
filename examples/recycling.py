"""Recycling worker processes whose handlers leak: ``--max-tasks-per-child`` and
``--max-memory-per-child`` replace a process-pool child between messages; ``--max-memory``
bounds the whole worker, which then drains and exits for its supervisor to restart it.

python -m examples.recycling    # enqueues 6 leaky runs, then runs `tickwork worker -A
                                # examples.recycling --pool process -c 1
                                # --max-tasks-per-child 2 --burst` and prints which
                                # process ran each (three processes, two runs each)
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys

from tickwork import App

app = App()
_CACHE: list[bytes] = []  # a cache that never lets go: the leak recycling cures


@app.task(keep_result=True)
def render(page: int) -> int:
    """Renders a page, keeping 1 MiB it never frees; returns the pid that ran it."""
    _CACHE.append(bytes(1024 * 1024))
    return os.getpid()


def main() -> None:
    handles = [render.delay(page) for page in range(6)]
    command = [sys.executable, "-m", "tickwork", "worker", "-A", "examples.recycling"]
    command += ["--pool", "process", "-c", "1", "--max-tasks-per-child", "2", "--burst"]
    subprocess.run(command, check=True)
    pids = collections.Counter(handle.result(timeout=30) for handle in handles)
    print(f"{len(pids)} processes ran the 6 pages: {sorted(pids.values())}")
    app.close()


if __name__ == "__main__":
    main()
