"""tickwork's pytest plugin (registered through the ``pytest11`` entry point, so a project
that installs tickwork has it): the ``tickwork_isolated`` fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from scheduler import App
from tickwork.testing import Isolated, IsolateFixture


@pytest.fixture
def tickwork_isolated() -> Iterator[IsolateFixture]:
    """Call it with your app (``tickwork_isolated(app)``, optionally a backend URL): the
    app runs on a fresh backend for the test (see ``tickwork.testing.Isolated``) and is
    restored after it."""
    opened: list[Isolated] = []

    def isolate(app: App, url: str | None = None, **options: Any) -> Isolated:
        isolated = Isolated(app, url, **options)
        opened.append(isolated)
        return isolated

    yield isolate
    for isolated in reversed(opened):
        isolated.close()
