"""``tickwork postgres ...``: PostgreSQL administration."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import click

from tickwork.cli.common import State, app_options, clean_errors, fail, pass_state
from tickwork.scheduler.backends import open_backend


@click.group()
def postgres() -> None:
    """PostgreSQL backend administration."""


@postgres.command("install")
@click.option(
    "--print",
    "print_only",
    is_flag=True,
    help="Print the SQL instead of running it (for teams that apply DDL by hand).",
)
@click.option(
    "--schema",
    default=None,
    help="The PostgreSQL schema for tickwork's tables [the URL's schema, else tickwork].",
)
@pass_state
@app_options
@clean_errors
def install(state: State, print_only: bool, schema: str | None) -> None:
    """Create or upgrade tickwork's tables (workers and producers also do it on connect)."""
    try:  # the driver is an extra: the rest of the command line works without it
        from tickwork.scheduler.backends.postgres.schema import (
            DEFAULT_SCHEMA,
            VERSION,
            checked_schema,
        )
        from tickwork.scheduler.backends.postgres.schema import install_script as schema_script
    except ModuleNotFoundError as err:
        fail(f"this needs the 'postgres' extra: pip install 'tickwork[postgres]' ({err})")
    url = state.url()
    from_url = parse_qs(urlsplit(url).query).get("schema", [None])[-1]
    name = checked_schema(schema or from_url or DEFAULT_SCHEMA)
    if print_only:
        click.echo(schema_script(name), nl=False)
        return
    if urlsplit(url).scheme not in ("postgresql", "postgres"):
        fail("give a postgresql:// URL with --backend or TICKWORK_BACKEND (or use --print)")
    if schema is not None:
        url += ("&" if "?" in url else "?") + f"schema={name}"
    backend = open_backend(url)  # brings the schema to the newest version
    backend.close()
    click.echo(f"schema {name} is at version {VERSION}")
