"""The tasks a billing pipeline schedules (installed on the Spark executors too)."""

import json
import tempfile
from pathlib import Path

from tickwork import App, BatchOutcome

app = App()


@app.task(queue="billing", retries=3)
def send_invoice(customer_id: int, amount: float, currency: str = "EUR") -> None:
    print(f"  -> invoice for customer {customer_id}: {amount:.2f} {currency}", flush=True)


@app.task(queue="billing")
def remind(customer_id: int, amount: float) -> float:
    print(f"  -> reminder for customer {customer_id}", flush=True)
    return amount


@app.task(queue="billing")
def write_summary(outcome: BatchOutcome) -> None:
    """The callback of a batch of reminders: one summary file when the last one is done."""
    total = sum(amount for amount in outcome["results"] if amount is not None)
    path = Path(tempfile.gettempdir()) / f"reminders-{outcome['batch']}.json"
    summary = {"sent": outcome["succeeded"], "failed": outcome["failed"], "total_due": total}
    path.write_text(json.dumps(summary) + "\n")
    print(f"  -> summary of {outcome['size']} reminders in {path}", flush=True)
