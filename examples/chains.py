"""Chains: an extract-transform-load pipeline whose steps run one after another, each when
the step before it succeeded, the transform taking what the extract returned (Celery's
chain, Dramatiq's pipelines, Huey's pipelines).

python -m examples.chains    # enqueues the chain and runs a worker until its last step
                             # has run; prints each step and the final result

``task.s(...)`` makes a step that takes the previous step's return value as its first
argument; ``task.si(...)`` one that does not. The chain lives in its running step's
message and the next step is written in the same atomic step as its ack, so no step is
lost or run twice. A step that fails for good stops the chain in the poison queue;
``tickwork poison replay ID`` resumes it from there.

A chain can have a key (each step holds it in turn: read, cancel or replace the chain by
it) and a trigger: ``main`` also installs the same pipeline every night at 02:00 Paris
time under the key ``nightly-etl``; each occurrence runs the whole chain, and the next
is written when its last step is done, so occurrences never overlap.
"""

from __future__ import annotations

from tickwork import App, Cron, Worker, WorkerConfig, chain
from tickwork.workflows import step_id

app = App()


@app.task
def extract(day: str) -> list[dict[str, int]]:
    print(f"  extract {day}", flush=True)
    return [{"amount": 120}, {"amount": 80}, {"amount": 45}]


@app.task
def transform(rows: list[dict[str, int]], currency: str) -> dict[str, object]:
    print(f"  transform {len(rows)} rows", flush=True)
    return {"total": sum(row["amount"] for row in rows), "currency": currency}


@app.task(keep_result=True)
def load(summary: dict[str, object]) -> str:
    print(f"  load {summary}", flush=True)
    return f"loaded {summary['total']} {summary['currency']}"


def main() -> None:
    first = app.enqueue(chain(extract.si("2026-11-22"), transform.s("EUR"), load.s()))
    last = step_id(first, 2)
    worker = Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05))
    worker.run(duration_s=30)
    print(f"result of the last step: {app.result(last).value}")
    nightly = chain(extract.si("yesterday"), transform.s("EUR"), load.s())
    app.enqueue(
        nightly.options(key="nightly-etl", trigger=Cron("0 2 * * *", tz="Europe/Paris")),
        on_conflict="replace",
    )
    for schedule in app.schedules.list():
        print(f"schedule {schedule.key}: {schedule.task} next at {schedule.next_run}")
    app.close()


if __name__ == "__main__":
    main()
