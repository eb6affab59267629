"""The ``tickwork`` group: global options, and every command added from its own module.

To add a command, write it in a module of this package as a plain ``click.command`` (take
``@pass_state``, ``@app_options`` and ``@clean_errors`` from ``common``) and add it
below."""

from __future__ import annotations

import click

from tickwork.cli import (
    calendars,
    cassandra,
    completion,
    cron,
    dashboard,
    events,
    exporter,
    history,
    limits,
    messages,
    poison,
    postgres,
    queues,
    schedules,
    status,
    worker,
    workflows,
)
from tickwork.cli.common import APP_HELP, BACKEND_HELP, JSON_COMMANDS, State, fail


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-A",
    "--app",
    "module",
    envvar="TICKWORK_APP",
    metavar="MODULE",
    help=f"{APP_HELP}--backend is given [$TICKWORK_APP].",
)
@click.option(
    "--backend",
    envvar="TICKWORK_BACKEND",
    metavar="URL",
    help=f"{BACKEND_HELP}; overrides the app's [$TICKWORK_BACKEND; without either, the "
    "app's, else sqlite:///tickwork.db].",
)
@click.option(
    "--json", "as_json", is_flag=True, help=f"JSON output (for {', '.join(JSON_COMMANDS)})."
)
@click.version_option(package_name="tickwork")
@click.pass_context
def cli(ctx: click.Context, module: str | None, backend: str | None, as_json: bool) -> None:
    """tickwork: tasks on run-once, repeating and cron triggers."""
    if as_json and ctx.invoked_subcommand not in JSON_COMMANDS:
        fail(f"--json applies to {', '.join(JSON_COMMANDS)}, not {ctx.invoked_subcommand}")
    ctx.obj = State(backend, as_json, module)


def main() -> None:
    cli(prog_name="tickwork")


for command in (
    worker.worker,
    messages.enqueue,
    messages.cancel,
    messages.abort,
    messages.show,
    history.message_history,
    status.stats,
    status.workers,
    schedules.schedules,
    calendars.calendars,
    poison.poison,
    queues.queues,
    limits.limits,
    cassandra.cassandra,
    postgres.postgres,
    cron.cron,
    exporter.exporter,
    workflows.workflow,
    dashboard.dashboard,
    dashboard.openapi,
    dashboard.users,
    dashboard.encryption_key,
    events.emit,
    events.events,
    completion.completion,
):
    cli.add_command(command)
