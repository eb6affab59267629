"""``python manage.py tickwork COMMAND ...``: tickwork's command line for the project's app
(``tickwork.django.get_app``): ``worker`` runs it (``-A`` defaults to the project's app),
the others (``schedules``, ``stats``, ``poison``, ...) read its backend."""

from __future__ import annotations

import argparse
import os
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tickwork.django.project import get_app

#: the app reference a worker started here loads (in every worker process)
CURRENT = "tickwork.django.current:app"


class Command(BaseCommand):
    help = "Run a tickwork command for this project's app (tickwork --help lists them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tickwork_args", nargs=argparse.REMAINDER)

    def run_from_argv(self, argv: list[str]) -> None:
        # everything after "tickwork" is tickwork's, --help included
        self.handle(tickwork_args=argv[2:])

    def handle(self, *args: Any, **options: Any) -> None:
        from tickwork.cli.main import cli

        argv = tickwork_argv(list(options["tickwork_args"]))
        # the backend in the environment (not argv, where ps shows it) for the commands
        # that read it; a worker loads the app itself
        os.environ.setdefault("TICKWORK_BACKEND", get_app().settings.backend)
        cli.main(args=argv, prog_name="manage.py tickwork")


def tickwork_argv(argv: list[str]) -> list[str]:
    """``argv`` with ``-A`` given to ``worker`` when it has none."""
    if "worker" not in argv:
        return argv
    at = argv.index("worker") + 1
    rest = argv[at:]
    if any(a in ("-A", "--app") or a.startswith("--app=") for a in rest):
        return argv
    return [*argv[:at], "-A", CURRENT, *rest]
