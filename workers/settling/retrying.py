"""A backend write retried until it is written: how the settler writes what a run's end
asks for (acks, retries, poisons, workflow counts), so a passing backend error never
loses an outcome. Only a forced stop gives up (the lease then expires and the message is
delivered again)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tickwork.scheduler import BackendError
from tickwork.workers.intake.flow import Counters

log = logging.getLogger("tickwork.worker")


class Retrying:
    """Runs a backend write again on each ``BackendError`` (waiting 0.05 s, doubling to
    2 s) until it works or ``forced`` is set; then returns None."""

    def __init__(self, counters: Counters, forced: threading.Event) -> None:
        self._counters = counters
        self._forced = forced

    def __call__(self, operation: Callable[[], Any]) -> Any:
        delay = 0.05
        while True:
            try:
                return operation()
            except BackendError as err:
                self._counters.add("backend_errors")
                if self._forced.is_set():
                    log.error("giving up a backend write on forced stop: %s", err)
                    return None
                log.warning("backend write failed, retrying in %.2fs: %s", delay, err)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
