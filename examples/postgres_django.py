"""Transactional enqueue with Django: inside ``transaction.atomic()``, a message enqueued
through Django's own database connection commits with the block's rows, or not at all.

A standalone script (settings configured here) so that it runs as it is; in a project,
the same two lines go in a view. Needs a PostgreSQL server (``TICKWORK_BACKEND``, which
Django's ``DATABASES`` points at too) and Django with psycopg 3::

    python -m examples.postgres_django
    tickwork worker -A examples.postgres_django --burst
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

import django
from django.conf import settings

from tickwork import App
from tickwork.django import same_transaction

URL = os.environ.get("TICKWORK_BACKEND", "postgresql://localhost/tickwork")
app = App(URL)


@app.task
def send_invoice(invoice_id: int) -> None:
    print(f"  -> invoice {invoice_id} sent", flush=True)


def configure_django() -> None:
    parts = urlsplit(URL)
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": parts.path.lstrip("/"),
                "USER": unquote(parts.username or ""),
                "PASSWORD": unquote(parts.password or ""),
                "HOST": parts.hostname or "localhost",
                "PORT": str(parts.port or 5432),
            }
        },
        USE_TZ=True,
    )
    django.setup()


def bill(customer: str, *, fail: bool = False) -> None:
    """Save an invoice and enqueue its sending in one ``atomic()`` block."""
    from django.db import connection, transaction

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO invoices (customer) VALUES (%s) RETURNING id", [customer])
            (invoice_id,) = cursor.fetchone()
        with same_transaction(app=app):  # through Django's own psycopg connection
            send_invoice.delay(invoice_id)
        if fail:
            raise RuntimeError(f"payment for invoice {invoice_id} was refused")


def main() -> None:
    configure_django()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS invoices (id serial PRIMARY KEY, customer text)")
    bill("ada")
    print("billed ada - her invoice is queued")
    try:
        bill("bob", fail=True)
    except RuntimeError as err:
        print(f"rolled back ({err}) - nothing queued for bob")
    print("messages waiting:", app.queues.stats("default")[0].pending)


if __name__ == "__main__":
    main()
