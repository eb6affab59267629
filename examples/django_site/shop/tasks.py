"""The shop's tasks, all run by ``manage.py tickwork worker``: a tickwork task, a Django
``@task`` (Django's tasks framework, on tickwork) and a tickwork periodic task
(installed when a worker starts)."""

from __future__ import annotations

from datetime import timedelta

from shop.models import Order
from tickwork import Repeating
from tickwork.django import get_app
from tickwork.django.compat import task  # Django 6: django.tasks.task; before: the backport

app = get_app()


@app.task(keep_result=True)
def send_confirmation(order_id: int) -> str:
    """Confirm the order (the worker's own database connection, renewed around each run)."""
    order = Order.objects.get(pk=order_id)
    order.confirmed = True
    order.save(update_fields=["confirmed"])
    return f"confirmation sent to {order.customer}"


@task()
def notify_warehouse(order_id: int) -> str:
    """A Django task: enqueued with Django's API, run by tickwork's worker."""
    return f"order {order_id} is on its way to the warehouse"


@app.periodic(Repeating(interval=timedelta(minutes=10)))
def tidy_carts() -> None:
    """Every ten minutes: what a shop does on a schedule."""
    print(f"  -> {Order.objects.filter(confirmed=False).count()} order(s) not confirmed yet")
