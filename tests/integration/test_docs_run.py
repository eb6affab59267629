"""Every Python block of README.md and docs/*.md runs (issue 49), in its page's order and
in one namespace per page, as a reader pastes them one after another into a session:
names a block defines are there for the blocks after it. A block runs with a worker of
the page's ``app`` beside it (what it enqueues runs; ``handle.result()`` returns), in a
scratch directory (``App("sqlite:///tickwork.db")`` makes its file there) with
``TICKWORK_BACKEND`` naming a SQLite file there (``App()`` alone reads it). A block may
``await`` at its top level, as in an asyncio REPL. Afterwards no run of the page went
to the poison queue: a block whose task failed fails here.

A block marked a fragment (``tests/support/doc_blocks.py``) is not run and says why.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import traceback
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

import tickwork
from tests.support.doc_blocks import PAGES, Block, blocks
from tests.support.helpers import running
from tickwork import App

RUN = [page for page in PAGES if any(not block.fragment for block in blocks(page))]


def _namespace() -> dict[str, Any]:
    """What a reader of the docs has imported before the first block: tickwork's top
    level (``from tickwork import *``) and ``datetime``'s names."""
    names: dict[str, Any] = {"__name__": "__main__", "Any": Any}
    names.update({name: getattr(tickwork, name) for name in tickwork.__all__})
    names.update(UTC=UTC, date=date, datetime=datetime, time=time, timedelta=timedelta)
    return names


def _run(code: str, where: str, names: dict[str, Any]) -> None:
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, names))  # a block that awaits at its top level
    else:
        exec(compiled, names)


@contextlib.contextmanager
def _worker_of(names: dict[str, Any]) -> Iterator[None]:
    app = names.get("app")
    if not isinstance(app, App):
        yield
        return
    with running(app):
        yield


def _poisoned(names: dict[str, Any]) -> str:
    app = names.get("app")
    if not isinstance(app, App):
        return ""
    views = app.poison.list(limit=10)
    return "".join(f"\npoisoned: {view.task}: {view.error}" for view in views)


@pytest.mark.parametrize("page", RUN, ids=[page.name for page in RUN])
def test_each_python_block_of_the_page_runs(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TICKWORK_BACKEND", f"sqlite:///{tmp_path / 'env.db'}")
    names = _namespace()
    apps: list[App] = []
    ran: list[Block] = []
    try:
        for block in blocks(page):
            if block.fragment:
                continue
            if block.setup:
                _run(block.setup, f"{block.where} (setup)", names)
            with _worker_of(names):
                try:
                    _run(block.source, block.where, names)
                except Exception:
                    failed = traceback.format_exc()
                    pytest.fail(f"{block.where} failed:\n{failed}{_poisoned(names)}")
            ran.append(block)
            if isinstance(names.get("app"), App) and names["app"] not in apps:
                apps.append(names["app"])
        poisoned = [
            f"{view.task}: {view.error}" for app in apps for view in app.poison.list(limit=10)
        ]
        assert poisoned == [], f"{page.name}: runs failed"
        assert ran, page.name
    finally:
        for app in apps:
            app.close()
