"""The shop's views. Placing an order saves it and enqueues its follow-ups in one
``atomic()`` block: they are sent when the block commits, and never if it rolls back
(a refused payment leaves neither the order nor a message)."""

from __future__ import annotations

import json
from functools import partial

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from shop.models import Order
from shop.tasks import app, notify_warehouse, send_confirmation
from tickwork.django import enqueue_on_commit


class PaymentRefused(Exception):
    pass


@csrf_exempt  # a JSON API for the example's client; a form of the site carries the token
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    data = json.loads(request.body or b"{}")
    try:
        with transaction.atomic():
            order = Order.objects.create(customer=str(data.get("customer", "someone")))
            # tickwork's task: its id now, its message at the commit
            job = enqueue_on_commit(send_confirmation.call(order.pk))
            # a Django task, the way Django's documentation enqueues on commit
            transaction.on_commit(partial(notify_warehouse.enqueue, order.pk))
            if data.get("refuse_payment"):
                raise PaymentRefused(f"payment for order {order.pk} refused")
    except PaymentRefused as err:
        return JsonResponse({"error": str(err)}, status=402)
    return JsonResponse({"order": order.pk, "job": job}, status=201)


@require_GET
def order_status(request: HttpRequest, order_id: int) -> JsonResponse:
    order = get_object_or_404(Order, pk=order_id)
    job = request.GET.get("job")
    info = app.result(job) if job else None
    return JsonResponse(
        {
            "order": order.pk,
            "confirmed": order.confirmed,
            "job": None if info is None else {"status": info.status.value, "value": info.value},
        }
    )
