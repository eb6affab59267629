"""Tasks for the Spark tests (imported on the executors)."""

from tickwork.scheduler import App

app = App()


@app.task(queue="billing")
def send_invoice(customer_id: int, amount: float, currency: str = "EUR") -> None:
    print(f"invoice {customer_id}: {amount} {currency}")


RAN: list[int] = []  # customer ids counted by a worker in the test process


@app.task(queue="drained")
def count_invoice(customer_id: int, amount: float) -> None:
    RAN.append(customer_id)


SUMMARIES: list[dict[str, object]] = []  # batch outcomes seen by a callback in the test


@app.task(queue="tally")
def double(n: int) -> int:
    return 2 * n


@app.task(queue="tally")
def summarize(outcome: dict[str, object]) -> None:
    SUMMARIES.append(outcome)
