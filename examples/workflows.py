"""Workflows: a batch of thumbnails whose callbacks fire once, when the last one settles
(Sidekiq Pro's batches, Celery's chord), and a chain that publishes the album after it.

python -m examples.workflows   # enqueues the batch, runs a worker until its callbacks
                               # ran, then prints the batch as `tickwork workflow show`
                               # does

``group([...])`` runs its members in parallel; ``batch(group, on_success=...,
on_complete=..., on_failure=...)`` adds callbacks: ``on_success`` when every member
succeeded, ``on_failure`` when one failed for good, ``on_complete`` either way. A
callback made with ``task.s()`` takes the outcome as its first argument (``on_success``:
the members' results in order; the others: a ``BatchOutcome``). The count of settled
members is one atomic counter in the backend, so the callback fires exactly once, even
when workers crash.
"""

from __future__ import annotations

from tickwork import App, BatchOutcome, Worker, WorkerConfig, batch, chain, group

app = App()
PHOTOS = ["beach.jpg", "harbour.jpg", "corrupt.jpg", "sunset.jpg"]


@app.task
def thumbnail(photo: str) -> str:
    if photo.startswith("corrupt"):
        raise ValueError(f"{photo} is not an image")
    return photo.replace(".jpg", "-small.jpg")


@app.task
def publish(thumbnails: list[str]) -> str:
    print(f"  publishing {thumbnails}", flush=True)
    return f"album of {len(thumbnails)}"


@app.task
def report(outcome: BatchOutcome) -> None:
    print(
        f"  batch {outcome['batch']}: {outcome['succeeded']} of {outcome['size']} made, "
        f"{outcome['failed']} failed",
        flush=True,
    )
    for failure in outcome["failures"]:
        print(f"    {failure['id']}: {failure['error_type']}: {failure['error']}", flush=True)


@app.task
def announce(album: str) -> None:
    print(f"  announced {album}", flush=True)


def main() -> None:
    handle = app.enqueue(
        batch(
            group(thumbnail.call(photo) for photo in PHOTOS),
            on_success=publish.s(),  # skipped here: one photo is corrupt
            on_complete=report.s(),
        )
    )
    good = app.enqueue(
        batch(
            group(thumbnail.call(photo) for photo in PHOTOS if "corrupt" not in photo),
            on_success=chain(publish.s(), announce.s()),  # a callback may be a chain
        )
    )
    worker = Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05))
    worker.run(duration_s=30)
    for batch_id in (handle, good):
        view = app.batches.workflow(batch_id)
        print(f"{view.kind} {view.id}: {view.summary}")
        for step in view.steps:
            print(f"  {step.name:<12} {step.state:<8} {step.value or step.error or ''}")
    app.close()


if __name__ == "__main__":
    main()
