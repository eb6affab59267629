"""Graphs: a nightly report as a DAG (a step with two parents, which gets both results by
name), a chain of groups, and a graph that stops at a failure and resumes when the
failed step is replayed.

python -m examples.dag   # enqueues the graphs, runs a worker until they settle, prints
                         # each as `tickwork workflow show` does, replays the failure

``graph({name: call or after(parents, call)})``: a step starts once every parent
succeeded; made with ``.s()`` it takes their results first, as a dict by parent name.
Each step's fan-in is one atomic counter in the backend, counted before the parent's
ack, so a step runs once even when workers crash.
"""

from __future__ import annotations

from tickwork import App, Worker, WorkerConfig, after, chain, graph, group

app = App()
warehouse_ready = False  # the first load fails: the warehouse is "down"


@app.task
def extract(day: str) -> list[int]:
    return [12, 7, 30, 1]


@app.task
def clean(rows: list[int]) -> list[int]:  # after "extract" alone: its result itself
    return sorted(n for n in rows if n > 1)


@app.task
def stats(rows: list[int]) -> dict[str, float]:
    return {"mean": sum(rows) / len(rows)}


@app.task
def report(parents: dict[str, object], currency: str) -> str:  # after two: a dict by name
    return f"{parents['clean']} with {parents['stats']} in {currency}"


@app.task
def price(sku: str) -> int:
    return len(sku) * 10


@app.task
def total(prices: list[int]) -> int:
    return sum(prices)


@app.task
def load(rows: list[int]) -> str:
    if not warehouse_ready:
        raise ConnectionError("the warehouse is down")
    return "loaded"


@app.task
def announce(loaded: str) -> str:
    return f"the night's data is {loaded}"


def show(handle: str) -> None:
    view = app.batches.workflow(handle)
    print(f"{view.kind} {view.id}: {view.state}; {view.summary}")
    for step in view.steps:
        after_ = f" <- {', '.join(step.after)}" if step.after else ""
        print(f"  {step.name}{after_}: {step.state} {step.value or step.error or ''}")


def main() -> None:
    global warehouse_ready
    nightly = app.enqueue(
        graph(
            {
                "extract": extract.si("2026-11-27"),
                "clean": after("extract", clean.s()),
                "stats": after("extract", stats.s()),
                "report": after(["clean", "stats"], report.s("EUR")),
            }
        )
    )
    # a chain of groups: the two prices side by side, then their total
    prices = app.enqueue(chain(group([price.si("apple"), price.si("kiwi")]), total.s()))
    stopping = app.enqueue(
        graph(
            {
                "extract": extract.si("2026-11-27"),
                "load": after("extract", load.s()),
                "announce": after("load", announce.s()),
            }
        )
    )
    worker = Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05))
    worker.run(duration_s=30)
    for handle in (nightly, prices, stopping):
        show(handle)
    print("the warehouse is back: replaying the failed step")
    warehouse_ready = True
    app.backend.poison.replay(None)
    Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05)).run(duration_s=30)
    show(stopping)
    app.close()


if __name__ == "__main__":
    main()
