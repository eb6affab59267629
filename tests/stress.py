"""Run a command with CPU hogs beside it: ``python -m tests.stress [--hogs N] -- CMD...``.

``make test-stress`` runs the integration tests so, with two hogs on this two-core
machine: a test that passes only when it gets the machine to itself depends on the
machine's speed, which a test must not (issue 57). The hogs are processes spinning at
full speed, stopped when the command ends; the exit status is the command's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys


def _spin() -> None:
    while True:
        pass


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.stress")
    parser.add_argument("--hogs", type=int, default=2, help="spinning processes (default 2)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command to run")
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the command to run after --")
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(options.hogs)]
    for hog in hogs:
        hog.start()
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        for hog in hogs:
            hog.kill()
            hog.join()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
