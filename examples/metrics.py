"""Prometheus metrics: what one worker did, and what the whole deployment holds.

python -m examples.metrics                       # runs a worker here and prints a scrape
tickwork worker -A examples.metrics --metrics-port 9740   # then: curl localhost:9740/metrics
tickwork exporter --port 9741                    # the backend's view: curl localhost:9741/metrics

A worker serves its own counters per queue and task (claimed, succeeded, retried,
poisoned, redelivered, aborted), histograms (lateness, run time, claim round trip) and
gauges (held, running). The exporter, one per deployment, serves what the backend holds:
messages per queue and state, bounds and fill, and each schedule's next fire, last
success and misfires. Both listen on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import time
import urllib.request

from tickwork import App, Cron, Worker, WorkerConfig
from tickwork.exporter import serve

app = App()


@app.task(queue="mail")
def send(n: int) -> None:
    time.sleep(0.01)


@app.task(queue="mail")
def digest() -> None:
    print("  -> daily digest", flush=True)


def lines(port: int, prefixes: tuple[str, ...]) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return [line for line in text.splitlines() if line.startswith(prefixes)]


def main() -> None:
    digest.schedule(trigger=Cron("0 7 * * *"), key="digest", on_conflict="replace")
    for n in range(20):
        send.delay(n)
    worker = Worker(app, WorkerConfig(queues=("mail",), metrics_port=0))
    worker.start()
    try:
        while worker.stats.acked < 20:
            time.sleep(0.05)
        port = worker.metrics_port or 0
        print("the worker:")
        for line in lines(port, ("tickwork_succeeded_total", "tickwork_run_seconds_count")):
            print("  " + line)
    finally:
        worker.stop()
        worker.join(30)
    exporter = serve(app, 0)
    try:
        print("the exporter:")
        wanted = ("tickwork_queue_messages", "tickwork_schedule_next_fire")
        for line in lines(int(exporter.server_port), wanted):
            print("  " + line)
    finally:
        exporter.shutdown()
        exporter.server_close()
    app.close()


if __name__ == "__main__":
    main()
