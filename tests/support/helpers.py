"""Small helpers shared by the integration and fault tests."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from tickwork.scheduler import App
from tickwork.workers import Worker, WorkerConfig

T = TypeVar("T")


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


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float = 20.0,
    explain: Callable[[], object] | None = None,
) -> None:
    """Poll ``condition`` every 10 ms; fail the test if it does not hold in ``timeout_s``
    (with what ``explain`` returns then, to say what was there instead)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            found = f": {explain()}" if explain is not None else ""
            raise AssertionError(f"condition not met in time{found}")
        time.sleep(0.01)


@contextmanager
def running(app: App, **config: object) -> Iterator[Worker]:
    """A worker of ``app`` started for the block (quick polls, 5 s grace) and joined after."""
    config.setdefault("grace_s", 5.0)
    config.setdefault("poll_interval_s", 0.05)
    config.setdefault("abort_check_s", 0.05)
    worker = Worker(app, WorkerConfig(**config))  # type: ignore[arg-type]
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        assert worker.join(30), "worker did not shut down"


def start_record_worker(
    env: dict[str, str],
    log: Path,
    module: str = "tests.support.crash_tasks",
    concurrency: int = 4,
    prefix: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """A ``tickwork worker`` process for ``module`` (the crash test's tasks unless told),
    logging to ``log``; ``prefix`` runs it through another command (``ip netns exec``)."""
    command = [
        *prefix,
        sys.executable,
        "-m",
        "tickwork",
        "worker",
        "-A",
        module,
        "--concurrency",
        str(concurrency),
        "--log-level",
        "warning",
    ]
    with log.open("ab") as stderr:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    """Stop worker processes gracefully (SIGTERM, a resumed one too), killing any that
    does not exit within 30 s."""
    for worker in workers:
        worker.send_signal(signal.SIGCONT)
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)


def enqueue_records(url: str, numbers: range) -> None:
    """Enqueue ``tests.support.crash_tasks.record(n)`` for each number on the backend at ``url``."""
    from tests.support.crash_tasks import app, record

    app.use_backend(url)
    report = app.enqueue_many(record.call(n) for n in numbers)
    assert report.enqueued == len(numbers)
    app.close()


def run_one_task(app: App) -> None:
    """Register a task on ``app``, enqueue one run and wait until a worker ran it: the
    backend works end to end."""
    ran: list[int] = []

    @app.task
    def add(a: int, b: int) -> None:
        ran.append(a + b)

    add.delay(2, 3)
    with running(app):
        wait_for(lambda: ran == [5])


class NoThreads(ThreadPoolExecutor):
    """A loop's default executor that refuses work: proof that nothing went to a thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{fn!r} was sent to a thread")


def without_threads(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on a fresh loop whose ``asyncio.to_thread`` fails."""

    async def guarded() -> T:
        asyncio.get_running_loop().set_default_executor(NoThreads())
        return await coroutine

    return asyncio.run(guarded())
