"""What stops a worker process besides ``stop()``: the signals it answers, and one of its
own threads failing."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

log = logging.getLogger("tickwork.worker")


@contextlib.contextmanager
def stop_signals(stop: Callable[[bool], None], stopping: Callable[[], bool]) -> Iterator[None]:
    """For the block, SIGTERM and SIGINT stop the worker: the first gracefully
    (``stop(False)``), a second at once (``stop(True)``). Only in the main thread (the only
    one Python delivers signals to); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if stopping():
            log.warning("second signal: stopping at once")
            stop(True)
        else:
            log.info("signal %d: shutting down gracefully (again to force)", signum)
            stop(False)

    previous = {
        signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def guarded(
    role: str, target: Callable[[], None], failed: Callable[[str], None]
) -> Callable[[], None]:
    """``target`` for the worker's ``role`` thread: if it raises (a bug: backend errors are
    retried where they happen), the traceback is logged and ``failed(role)`` called, so the
    worker stops instead of running on without that thread."""

    def run() -> None:
        try:
            target()
        except Exception:
            log.exception("the worker's %s thread failed: stopping the worker", role)
            failed(role)

    return run
