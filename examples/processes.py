"""All cores from one command: ``tickwork worker --processes 2`` runs two worker processes
under a supervisor (restarted if one dies, stopped together on SIGTERM). CPU-bound
handlers in one process share its interpreter lock; in two they run side by side.

python -m examples.processes    # enqueues 400 CPU-bound runs, then runs
                                # `tickwork worker -A examples.processes --processes 2
                                # --burst` and prints how many each process ran

The same from a shell: `tickwork worker -A examples.processes --processes 2`
(Ctrl-C stops both gracefully).
"""

from __future__ import annotations

import collections
import os
import subprocess
import sys

from tickwork import App

app = App()


@app.task(keep_result=True)
def crunch(n: int) -> int:
    """About a millisecond of pure Python; returns the pid of the process that ran it."""
    sum(i * i for i in range(20_000 + n))
    return os.getpid()


def main() -> None:
    handles = [crunch.delay(n) for n in range(400)]
    worker = [sys.executable, "-m", "tickwork", "worker", "-A", "examples.processes"]
    subprocess.run([*worker, "--processes", "2", "--burst", "--log-level", "warning"], check=True)
    per_process = collections.Counter(handle.result(timeout=60) for handle in handles)
    for pid, count in sorted(per_process.items()):
        print(f"worker process {pid} ran {count} of {len(handles)}")
    app.close()


if __name__ == "__main__":
    main()
