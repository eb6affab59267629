"""``tickwork dashboard``: serve the web dashboard (and its HTTP API) with uvicorn;
``tickwork openapi``: print the API's OpenAPI document."""

from __future__ import annotations

import json

import click

from tickwork.cli.common import State, backend_option, clean_errors, fail, pass_state


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option(
    "--token",
    envvar="TICKWORK_DASHBOARD_TOKEN",
    help="Secret every request must carry (HTTP basic password, or a bearer token) "
    "[$TICKWORK_DASHBOARD_TOKEN]. Required to serve actions beyond loopback.",
)
@click.option("--read-only", is_flag=True, help="Show pages only: no action is served.")
@pass_state
@backend_option
@clean_errors
def dashboard(state: State, host: str, port: int, token: str | None, read_only: bool) -> None:
    """Serve the web dashboard: queues, schedules, workers, the poison queue, messages
    and workflows, with pause, resume, run now, replay, cancel and abort."""
    try:
        import uvicorn

        from tickwork.dashboard import Access, create_dashboard
    except ImportError as err:
        fail(
            f"the dashboard needs the 'dashboard' extra: pip install 'tickwork[dashboard]' ({err})"
        )
    access = Access(token=token or None, read_only=read_only)
    try:
        access.check_binding(host)
    except ValueError as err:
        fail(str(err))
    click.echo(f"tickwork dashboard on http://{host}:{port}/", err=True)
    uvicorn.run(create_dashboard(state.app(), access), host=host, port=port, log_level="warning")


@click.command()
def openapi() -> None:
    """Print the OpenAPI document of the HTTP API the dashboard serves at /api/v1."""
    try:
        from tickwork.dashboard.api.openapi import document
    except ImportError as err:
        fail(f"the API needs the 'dashboard' extra: pip install 'tickwork[dashboard]' ({err})")
    click.echo(json.dumps(document(), indent=2, sort_keys=True))
