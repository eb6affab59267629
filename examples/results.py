"""Results and progress: a caller waits for what a task returned, reads how far a long one
has come, and gets a failure as one clear error (Celery's AsyncResult, RQ's job result,
Hatchet's run output).

python -m examples.results    # runs a worker in a thread: prints the progress of an
                              # import while it runs, its result, and a failure raised

``delay()`` returns a ``TaskHandle``: the message id (a ``str``) with ``status()``,
``info()``, ``result(timeout)``, ``await aresult(timeout)`` and ``cancel()``. A task keeps
what it returns only when asked (``keep_result=True`` here, or the app setting
``keep_results``), for ``result_retention_s`` (a day) unless it gives its own
``timedelta``. ``tickwork show --id ID`` prints the same.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from tickwork import App, TaskFailed, Worker, WorkerConfig, current_run

app = App()


@app.task(keep_result=True)
def import_rows(rows: int) -> dict[str, int]:
    run = current_run()
    for done in range(0, rows + 1, rows // 4):
        run.progress(done / rows, f"{done} of {rows} rows")
        time.sleep(0.1)
    return {"imported": rows}


@app.task(keep_result=timedelta(hours=1))
def charge(account: str) -> None:
    raise ValueError(f"account {account} is closed")


def main() -> None:
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    thread = threading.Thread(target=worker.run, kwargs={"duration_s": 30}, daemon=True)
    thread.start()
    handle = import_rows.delay(1000)
    failing = charge.delay("acme")
    while (info := handle.info()).status != "succeeded":
        if info.progress is not None:
            print(f"  {info.status}: {info.progress:.0%} ({info.note})")
        time.sleep(0.1)
    print(f"result: {handle.result(timeout=10)}")
    try:
        failing.result(timeout=10)
    except TaskFailed as err:
        print(f"failed: {err.error_type}: {err.error}")
    worker.stop()
    thread.join()
    app.close()


if __name__ == "__main__":
    main()
