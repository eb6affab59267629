"""``tickwork exporter``: serve the deployment's Prometheus metrics (``tickwork/exporter.py``)."""

from __future__ import annotations

import signal
import threading

import click

from tickwork.cli.common import State, app_options, clean_errors, pass_state
from tickwork.exporter import serve


@click.command()
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=9741,
    show_default=True,
    help="Port of http://HOST:PORT/metrics (0: any free port).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0: every interface).",
)
@click.option("--duration", type=click.FloatRange(min=0), help="Stop after S seconds.")
@pass_state
@app_options
@clean_errors
def exporter(state: State, port: int, host: str, duration: float | None) -> None:
    """Serve what the backend holds as Prometheus metrics: queues by state, bounds and
    fill, counters, and each schedule's next fire, last success and misfires. Run one
    per deployment; each worker serves its own counts with --metrics-port."""
    app = state.app()
    server = serve(app, port, host)
    click.echo(f"serving http://{host}:{server.server_port}/metrics", err=True)
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop.set())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        stop.wait(duration)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        server.shutdown()
        server.server_close()
        app.close()
