"""``tickwork completion SHELL``: the completion script of the ``tickwork`` command for bash,
zsh or fish (click's own), to load from the shell's startup file."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print SHELL's completion script for tickwork's commands and options. Load it at
    start: bash: eval "$(tickwork completion bash)" in ~/.bashrc; zsh: the same with zsh in
    ~/.zshrc; fish: tickwork completion fish | source in ~/.config/fish/config.fish."""
    root = click.get_current_context().find_root().command
    script = get_completion_class(shell)
    assert script is not None  # every choice is one of click's shells
    click.echo(script(root, {}, "tickwork", "_TICKWORK_COMPLETE").source())
