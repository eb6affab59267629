"""Transactional enqueue on PostgreSQL: an order and its confirmation are written in one
transaction of the application's own psycopg connection, so a rolled-back order never
sends a confirmation and a saved one always does.

Needs a PostgreSQL server (``TICKWORK_BACKEND=postgresql://user:pass@host/db``)::

    python -m examples.postgres_orders
    tickwork worker -A examples.postgres_orders --burst
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tickwork import App

URL = os.environ.get("TICKWORK_BACKEND", "postgresql://localhost/tickwork")
app = App(URL)


@app.task
def send_confirmation(order_id: int) -> None:
    print(f"  -> confirmation for order {order_id}", flush=True)


def place_order(conn: psycopg.Connection[tuple[object, ...]], customer: str) -> int:
    """Save the order and enqueue its confirmation; both commit, or neither does."""
    row = conn.execute(
        "INSERT INTO orders (customer) VALUES (%s) RETURNING id", (customer,)
    ).fetchone()
    assert row is not None
    order_id = int(row[0])
    with app.transaction(conn):  # every enqueue in this block joins conn's transaction
        send_confirmation.delay(order_id)
    return order_id


def main() -> None:
    database = urlunsplit(urlsplit(URL)._replace(query=""))  # tickwork's options dropped
    with psycopg.connect(database) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, customer text)")
        conn.commit()

        saved = place_order(conn, "ada")
        conn.commit()  # the order and its confirmation, together
        print("saved order", saved, "- its confirmation is queued")

        lost = place_order(conn, "bob")
        conn.rollback()  # say the payment failed: the order and its message are gone
        print("rolled back order", lost, "- nothing queued for it")

    pending = app.queues.stats("default")[0].pending
    print("messages waiting:", pending)


if __name__ == "__main__":
    main()
