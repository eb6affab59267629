"""The task a billing pipeline schedules (installed on the Spark executors too)."""

from scheduler import App

app = App()


@app.task(queue="billing", retries=3)
def send_invoice(customer_id: int, amount: float, currency: str = "EUR") -> None:
    print(f"  -> invoice for customer {customer_id}: {amount:.2f} {currency}", flush=True)
