"""The tasks a Node.js producer enqueues in ``tests/integration/test_node_producer.py``."""

from tickwork.scheduler import App, Event

app = App()
seen: list[object] = []


@app.task(keep_result=True)
def add(a: int, b: int) -> int:
    return a + b


@app.task(on_events="node.*")
def noted(event: Event) -> None:
    seen.append(event.payload)


sums: list[int] = []


@app.task
def add_noted(a: int, b: int) -> None:
    sums.append(a + b)
