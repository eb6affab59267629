"""What the server-fault tests share: a producer that keeps enqueueing through a fault
and records what it was told (the jobs acknowledged and refused, each with when, by
``time.monotonic()``), and where their figures go."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from tickwork.scheduler import BackendError


class Producer:
    """Enqueues ``job(n)`` for n = 10,000, 10,001, ... every ``pause_s`` in a thread;
    after a refusal it waits ``backoff_s`` and goes on with the next number."""

    def __init__(self, job: Any, pause_s: float, backoff_s: float) -> None:
        self.acknowledged: dict[int, float] = {}
        self.refused: dict[int, float] = {}
        self._job = job
        self._pause_s = pause_s
        self._backoff_s = backoff_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="producer")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(60)

    def _produce(self) -> None:
        n = 10_000
        while not self._stop.is_set():
            try:
                self._job.delay(n)
                self.acknowledged[n] = time.monotonic()
            except BackendError:
                self.refused[n] = time.monotonic()
                time.sleep(self._backoff_s)
            n += 1
            time.sleep(self._pause_s)


def publish(result: dict[str, Any]) -> None:
    """Print a fault run's figures, and append them to ``failover.jsonl`` beside
    ``TICKWORK_FAULTS_OUT`` when ``make faults`` sets it."""
    print(json.dumps(result))
    out = os.environ.get("TICKWORK_FAULTS_OUT")
    if out:
        with Path(out).with_name("failover.jsonl").open("a") as results:
            results.write(json.dumps(result) + "\n")


def jobs_run(runs: Path) -> list[int]:
    """The numbers of the ``job`` runs recorded in ``runs`` (``tests.support.loop_tasks``),
    once per run."""
    if not runs.exists():
        return []
    return [
        int(line.split()[1]) for line in runs.read_text().splitlines() if line.startswith("job ")
    ]
