"""Aborting a running task: the handler is asked to stop, is not retried, and the run is
recorded as aborted (in the poison store, reason ``aborted``).

python -m examples.abort            # runs a worker in this process, starts a long export,
                                    # aborts it half a second in, and shows the record

From another shell, with a worker running: ``tickwork abort --id ID`` (or ``--key K``;
``--end-chain`` ends a recurring schedule with the aborted run).

How each kind of handler hears of it: a sync handler polls ``current_run().aborted`` (or
calls ``raise_if_aborted()``, or sleeps with ``wait_aborted(s)``) at points where it can
stop cleanly; an ``async def`` handler is cancelled (it sees ``CancelledError``); a
process-pool handler gets ``Aborted`` raised in it, and its process is killed if it has
not stopped after ``abort_grace_s`` (10 s by default). Workers read abort requests twice
a second while they hold work. A message that is not running yet is simply cancelled.
"""

from __future__ import annotations

import time

from tickwork import App, Worker, WorkerConfig, current_run

app = App()


@app.task(retries=3)
def export(rows: int) -> None:
    run = current_run()
    for done in range(rows):
        if run.wait_aborted(0.01):  # one row's work; wakes at once on an abort
            print(f"  export {run.message_id}: stopping after {done} of {rows} rows", flush=True)
            run.raise_if_aborted()
    print(f"  export finished all {rows} rows", flush=True)


def main() -> None:
    worker = Worker(app, WorkerConfig(poll_interval_s=0.1, install_periodic=False))
    worker.start()
    message_id = export.delay(10_000)  # about 100 s of work
    time.sleep(0.5)
    print("abort:", app.abort(id=message_id).value)
    deadline = time.monotonic() + 10
    while worker.stats.aborted == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    worker.join(10)
    for record in app.backend.poison.list():
        print(f"recorded: {record.envelope.id} {record.failure.reason}: {record.failure.message}")
    print(
        "attempts:", worker.stats.aborted + worker.stats.retried, "(aborted runs are not retried)"
    )
    app.close()


if __name__ == "__main__":
    main()
