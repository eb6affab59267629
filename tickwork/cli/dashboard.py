"""``tickwork dashboard``: serve the web dashboard (and its HTTP API) with uvicorn;
``tickwork openapi``: print the API's OpenAPI document; ``tickwork users``: the entries of
a users file; ``tickwork encryption-key``: a key for encryption at rest."""

from __future__ import annotations

import json
import secrets

import click

from tickwork.cli.common import State, app_options, clean_errors, fail, pass_state


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
@click.option(
    "--users",
    "users_file",
    type=click.Path(exists=True, dir_okay=False),
    help="A TOML file of users and tokens with roles (viewer, operator, admin): each signs "
    "in as itself, and may do what its role allows (instead of --token).",
)
@pass_state
@app_options
@clean_errors
def dashboard(
    state: State,
    host: str,
    port: int,
    token: str | None,
    read_only: bool,
    users_file: str | None,
) -> None:
    """Serve the web dashboard: queues, schedules, workers, the poison queue, messages
    and workflows, with pause, resume, run now, replay, cancel and abort."""
    try:
        import uvicorn

        from tickwork.api.users import Users
        from tickwork.dashboard import Access, Guard, create_dashboard
    except ImportError as err:
        fail(
            f"the dashboard needs the 'dashboard' extra: pip install 'tickwork[dashboard]' ({err})"
        )
    guard: Guard
    if users_file is not None:
        if token or read_only:
            fail("--users replaces --token and --read-only (give roles in the file)")
        try:
            guard = Users.load(users_file)
        except ValueError as err:
            fail(str(err))
    else:
        access = Access(token=token or None, read_only=read_only)
        try:
            access.check_binding(host)
        except ValueError as err:
            fail(str(err))
        guard = access
    click.echo(f"tickwork dashboard on http://{host}:{port}/", err=True)
    uvicorn.run(create_dashboard(state.app(), guard), host=host, port=port, log_level="warning")


@click.command()
def openapi() -> None:
    """Print the OpenAPI document of the HTTP API the dashboard serves at /api/v1."""
    try:
        from tickwork.api.openapi import document
    except ImportError as err:
        fail(f"the API needs the 'dashboard' extra: pip install 'tickwork[dashboard]' ({err})")
    click.echo(json.dumps(document(), indent=2, sort_keys=True))


@click.group()
def users() -> None:
    """Make the entries of a dashboard users file (tickwork dashboard --users FILE)."""


@users.command("hash")
@click.password_option(prompt="Password", help="the password (asked when not given)")
def hash_command(password: str) -> None:
    """Print a password's hash, for a user's ``password`` in the users file."""
    from tickwork.api.users import hash_password

    click.echo(hash_password(password))


@users.command("token")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(["viewer", "operator", "admin"]),
    default="operator",
    show_default=True,
)
def token_command(name: str, role: str) -> None:
    """Make a token for program NAME: prints, on stderr, the token (give it to the
    program, once: it is not kept), and on stdout the lines to add to the users file
    (its digest only), so ``tickwork users token ci >> users.toml`` appends them."""
    from tickwork.api.users import token_digest

    token = secrets.token_urlsafe(32)
    click.echo(f"the token for {name} (give it to the program; it is not kept): {token}", err=True)
    click.echo(f"# add to the users file: {name}'s token, as a digest", err=True)
    click.echo(f'[tokens.{name}]\nsha256 = "{token_digest(token)}"\nrole = "{role}"')


@click.command("encryption-key")
def encryption_key() -> None:
    """Print a new key for encryption at rest (TICKWORK_ENCRYPTION_KEYS: keys newest
    first, comma-separated)."""
    from tickwork.scheduler.encryption import Encryption

    click.echo(Encryption.new_key())
