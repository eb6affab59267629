"""How many of the thread pool's threads take work: fewer while fast handlers keep the
process's core busy (they would only take turns at the interpreter lock), all of them
again when handlers wait on I/O. ``--all-threads`` keeps all of them taking work.

python -m examples.handler_threads   # enqueues 6,000 quick runs, then 16 that each wait
                                     # 0.3 s on I/O, runs `tickwork worker -A
                                     # examples.handler_threads --burst --log-level debug`
                                     # and prints the lines where the number changed,
                                     # for example (the windows depend on the machine):

    handler threads taking work: 4 of 8
    handler threads taking work: 2 of 8
    handler threads taking work: 4 of 8
    handler threads taking work: 8 of 8
"""

from __future__ import annotations

import subprocess
import sys
import time

from tickwork import App

app = App()


@app.task(priority=1)
def quick(n: int) -> int:
    """A fast handler: a little pure Python."""
    return sum(i * i for i in range(200 + n % 7))


@app.task
def waits_on_io() -> None:
    """A handler that waits (a slow HTTP call, say): more threads overlap the waits."""
    time.sleep(0.3)


def main() -> None:
    app.enqueue_many(quick.call(n) for n in range(6000))
    app.enqueue_many(waits_on_io.call() for _ in range(16))  # claimed after the quick ones
    worker = [sys.executable, "-m", "tickwork", "worker", "-A", "examples.handler_threads"]
    done = subprocess.run(
        [*worker, "--burst", "--log-level", "debug"],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in done.stderr.splitlines():
        if "handler threads taking work" in line:
            print(line.split("DEBUG ", 1)[-1])
    app.close()


if __name__ == "__main__":
    main()
