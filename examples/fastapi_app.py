"""FastAPI with tickwork: the app opened and closed with the service (``lifespan``), a
POST that enqueues without blocking the event loop, the job's result read back, and the
dashboard under ``/ops/tickwork`` behind the service's own API key.

Serve it, run a worker, and try it::

    uvicorn examples.fastapi_app:api
    tickwork worker -A examples.fastapi_app
    curl -X POST localhost:8000/orders -H 'content-type: application/json' \\
         -d '{"customer": "ada", "cents": 1250}'
    curl localhost:8000/orders/JOB
    curl -H 'x-api-key: let-me-in' localhost:8000/ops/tickwork/

``python -m examples.fastapi_app`` does all of it in one process, on a free port.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import socket
import threading
import time
import urllib.request
from typing import Annotated, Any

import uvicorn
from fastapi import Depends, FastAPI, Header, HTTPException
from pydantic import BaseModel

from tickwork import App, Worker, WorkerConfig
from tickwork.fastapi import TickworkApp, dashboard_router, lifespan

app = App()  # TICKWORK_BACKEND, else sqlite:///tickwork.db
API_KEY = os.environ.get("OPS_API_KEY", "let-me-in")


@app.task(keep_result=True)
async def charge(customer: str, cents: int) -> dict[str, Any]:
    await asyncio.sleep(0.01)  # the payment provider's round trip
    return {"customer": customer, "charged_cents": cents}


def require_operator(x_api_key: Annotated[str | None, Header()] = None) -> None:
    """The service's own authentication, which the dashboard sits behind."""
    if x_api_key is None or not hmac.compare_digest(x_api_key, API_KEY):
        raise HTTPException(status_code=401, detail="an operator's x-api-key, please")


api = FastAPI(lifespan=lifespan(app))
api.include_router(
    dashboard_router(app, dependencies=[Depends(require_operator)]), prefix="/ops/tickwork"
)


class Order(BaseModel):
    customer: str
    cents: int


@api.post("/orders", status_code=202)
async def create_order(order: Order) -> dict[str, str]:
    handle = await charge.adelay(order.customer, order.cents)  # the loop never blocks
    return {"job": str(handle)}


@api.get("/orders/{job}")
async def order_status(job: str, tickwork: TickworkApp) -> dict[str, Any]:
    info = await tickwork.aresult(job)
    return {"job": job, "status": info.status.value, "value": info.value}


def _call(url: str, data: dict[str, Any] | None = None, **headers: str) -> Any:
    body = None if data is None else json.dumps(data).encode()
    if body is not None:
        headers["content-type"] = "application/json"
    request = urllib.request.Request(url, body, headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read().decode()
        return json.loads(text) if response.headers["content-type"] == "application/json" else text


def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning"))
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.01)
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        base = f"http://127.0.0.1:{port}"
        job = _call(f"{base}/orders", {"customer": "ada", "cents": 1250})["job"]
        print("POST /orders ->", job)
        deadline = time.monotonic() + 30
        status = _call(f"{base}/orders/{job}")
        while status["status"] != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.05)
            status = _call(f"{base}/orders/{job}")
        print(f"GET /orders/{job} ->", status)
        if status["status"] != "succeeded":
            raise SystemExit(f"the order's job did not succeed: {status}")
        page = _call(f"{base}/ops/tickwork/", None, **{"x-api-key": API_KEY})
        print("dashboard for operators:", "Queues" in page)
        if "Queues" not in page:
            raise SystemExit("the operators' dashboard did not answer")
    finally:
        worker.stop()
        worker.join(10)
        server.should_exit = True
        serving.join(10)


if __name__ == "__main__":
    main()
