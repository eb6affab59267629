"""The docs cannot go stale in silence (issue 49): every Python block of README.md and
docs/*.md parses, every name it imports from tickwork exists, every attribute it reads
through ``app`` (``app.schedules.pause``...) exists on an ``App``, and every ``tickwork
...`` command line shown names commands and options the CLI has. A renamed API or
command then fails the build, not the user.

The blocks also run, in each page's order (``tests/integration/test_docs_run.py``);
a block marked a fragment (``tests/support/doc_blocks.py``) says why it does not."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from tests.conftest import ROOT
from tests.support.doc_blocks import all_blocks
from tickwork import App
from tickwork.cli import cli

PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: a command line shown in a block: optional ``$ ``, optional VAR=value settings
_COMMAND = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(tickwork .*)$")


PYTHON = [(block.where, block.source) for block in all_blocks()]


def test_a_block_not_run_says_why() -> None:
    unexplained = [block.where for block in all_blocks() if block.fragment == ""]
    assert unexplained == [], "<!-- fragment: REASON -->"


@pytest.mark.parametrize(("where", "source"), PYTHON, ids=[w for w, _ in PYTHON])
def test_each_python_block_parses_and_imports_names_that_exist(where: str, source: str) -> None:
    tree = ast.parse(source, filename=where)  # a SyntaxError fails here, naming the block
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tickwork"):
            module = importlib.import_module(node.module)
            missing += [
                f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
            ]
    assert missing == [], where


def _app_paths(tree: ast.AST) -> Iterator[list[str]]:
    """Each attribute path read through the name ``app`` (``app.schedules.pause`` gives
    ``["schedules", "pause"]``), longest only."""
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        path: list[str] = []
        current: ast.expr = node
        while isinstance(current, ast.Attribute):
            path.append(current.attr)
            current = current.value
        if isinstance(current, ast.Name) and current.id == "app":
            yield path[::-1]


def test_what_the_docs_read_through_app_exists(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'docs.db'}")
    missing = []
    try:
        for where, source in PYTHON:
            for path in _app_paths(ast.parse(source)):
                target: object = app
                for at, name in enumerate(path):
                    if name == "Task" and at == 0:
                        break  # a task class's base: its attributes are the user's own
                    if not hasattr(target, name):
                        missing.append(f"{where}: app.{'.'.join(path[: at + 1])}")
                        break
                    target = getattr(target, name)
    finally:
        app.close()
    assert missing == []


def _command_lines() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        text = page.read_text()
        for match in _BLOCK.finditer(text):
            if match.group(1) not in ("", "bash", "sh", "console", "shell"):
                continue
            first = text.count("\n", 0, match.start()) + 2
            for offset, line in enumerate(match.group(2).splitlines()):
                found = _COMMAND.match(line.strip())
                if found:
                    yield f"{page.relative_to(ROOT)}:{first + offset}", found.group(1)


COMMANDS = list(_command_lines())


def _words(text: str) -> list[str]:
    """The words of a shown command: its comment, ``[``/``]`` and ``...`` dropped."""
    text = re.split(r"\s{2,}#|\s#\s", text)[0]
    for mark in ("[", "]", "(", ")", "..."):
        text = text.replace(mark, " ")
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _params(command: click.Command) -> dict[str, click.Parameter]:
    return {name: p for p in command.params for name in (*p.opts, *p.secondary_opts)}


def _check(words: list[str], start: list[click.Command]) -> list[str]:
    """What in ``words`` the CLI lacks, read from the command path ``start``: commands
    named where a group expects one, options of the command reached (or the root's)."""
    path, faults, takes_value = list(start), [], False
    for word in words:
        current = path[-1]
        if takes_value:
            takes_value = False  # an option's value
        elif isinstance(current, click.Group) and word in current.commands:
            path.append(current.commands[word])
        elif word.startswith("-") and len(word) > 1 and not word[1].isdigit():
            for name in filter(None, word.split("=")[0].split("/")):
                param = {**_params(cli), **_params(current)}.get(name)
                if param is None:
                    faults.append(f"option {name} of {' '.join(c.name or '' for c in path)}")
                elif "=" not in word and isinstance(param, click.Option):
                    takes_value = not (param.is_flag or param.count)
        elif isinstance(current, click.Group) and word.isidentifier() and word.islower():
            faults.append(f"command {word} of {' '.join(c.name or '' for c in path)}")
    return faults


@pytest.mark.parametrize(("where", "line"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_each_command_shown_names_commands_and_options_the_cli_has(where: str, line: str) -> None:
    """``tickwork schedules pause KEY | resume KEY``: each alternative after `` | `` is a
    command of the same group or more options of the command before it."""
    first, *others = [part.strip() for part in _words_alternatives(line)]
    words = _words(first)
    assert words[0] == "tickwork"
    faults = _check(words[1:], [cli])
    reached = _reach(words[1:])
    for other in others:
        more = _words(other)
        if not more:
            continue
        parent = reached[:-1] if len(reached) > 1 else reached
        group = parent[-1]
        if isinstance(group, click.Group) and more[0] in group.commands:
            faults += _check(more, parent)
            reached = [*parent, group.commands[more[0]]]
        else:
            faults += _check(more, reached)
    assert faults == [], f"{where}: {line}"


def _words_alternatives(line: str) -> list[str]:
    return re.split(r"\s\|\s", re.split(r"\s{2,}#|\s#\s", line)[0])


def _reach(words: list[str]) -> list[click.Command]:
    path: list[click.Command] = [cli]
    for word in words:
        current = path[-1]
        if isinstance(current, click.Group) and word in current.commands:
            path.append(current.commands[word])
    return path
