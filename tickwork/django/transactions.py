"""Enqueueing with Django's transactions.

- ``enqueue_on_commit(call)``, on every backend: the message is written when the
  surrounding ``atomic()`` block commits, and never if it rolls back. The call is
  validated at once (a bad call raises here), its id is returned at once, and its time
  (``delay``, a trigger) counts from the call. Outside ``atomic()`` it is written at once.
- ``same_transaction()``, on PostgreSQL: inside ``atomic()``, every enqueue of the app is
  written through Django's own connection, in the same transaction as your rows (both
  on one PostgreSQL database): it commits or rolls back with them, with no window
  between the commit and the write.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import transaction
from django.db.transaction import TransactionManagementError

from tickwork.django.project import get_app
from tickwork.scheduler import App, Call
from tickwork.scheduler.backends import OnConflict
from tickwork.scheduler.producing.backpressure import write_bounded


def enqueue_on_commit(
    call: Call, *, using: str | None = None, robust: bool = False, app: App | None = None
) -> str:
    """Write ``call``'s message when the transaction of database ``using`` commits (see
    the module docstring); returns its id. ``robust``: an error writing it (the backend
    down, a key taken) is logged by Django instead of raised from the commit."""
    app = app or get_app()
    message_id, envelope = app.build(call)
    timeout_s = app.settings.enqueue_block_s

    def write() -> None:
        write_bounded(app.backend, [envelope], OnConflict.ERROR, timeout_s=timeout_s)

    transaction.on_commit(write, using=using, robust=robust)
    return message_id


@contextmanager
def same_transaction(using: str | None = None, app: App | None = None) -> Iterator[None]:
    """Within this block, inside ``atomic()``, the app writes through the connection of
    database ``using`` (Django's own psycopg connection to PostgreSQL)."""
    connection = transaction.get_connection(using)
    if not connection.in_atomic_block:
        raise TransactionManagementError(
            "same_transaction() joins a transaction: open one with transaction.atomic()"
        )
    connection.ensure_connection()
    with (app or get_app()).transaction(connection.connection):
        yield
