"""``tickwork cassandra ...``: Cassandra administration."""

from __future__ import annotations

import click

from tickwork.cli.common import (
    State,
    app_options,
    clean_errors,
    fail,
    pass_state,
)
from tickwork.scheduler.backends import open_backend


@click.group()
def cassandra() -> None:
    """Cassandra backend administration."""


@cassandra.command("create-schema")
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="For a new keyspace [the URL's replication_factor, else 1].",
)
@pass_state
@app_options
@clean_errors
def create_schema(state: State, replication_factor: int | None) -> None:
    """Create the keyspace and tables named by --backend (idempotent)."""
    url = state.url()
    if not url.startswith("cassandra://"):
        fail("give a cassandra:// URL with --backend or TICKWORK_BACKEND")
    if replication_factor is not None:
        url += ("&" if "?" in url else "?") + f"replication_factor={replication_factor}"
    backend = open_backend(url)  # creates the schema unless create_schema=false
    backend.close()
    click.echo("schema ready")
