"""Tasks for the Spark tests (imported on the executors)."""

from scheduler import App

app = App()


@app.task(queue="billing")
def send_invoice(customer_id: int, amount: float, currency: str = "EUR") -> None:
    print(f"invoice {customer_id}: {amount} {currency}")


RAN: list[int] = []  # customer ids counted by a worker in the test process


@app.task(queue="drained")
def count_invoice(customer_id: int, amount: float) -> None:
    RAN.append(customer_id)
