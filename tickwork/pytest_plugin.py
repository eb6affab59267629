"""tickwork's pytest plugin (registered through the ``pytest11`` entry point, so a project
that installs tickwork has it): the ``tickwork_isolated`` fixture, the ``tickwork_clock``
fixture (the test's clock, which isolated apps then run on) and the ``tickwork`` marker
that chooses their mode (``@pytest.mark.tickwork(mode="inline")``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tickwork.scheduler import App
from tickwork.scheduler.clock import ManualClock
from tickwork.testing import Isolated, IsolateFixture


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'tickwork(mode="inline"|"manual"): the mode of the apps tickwork_isolated isolates',
    )


@pytest.fixture
def tickwork_clock() -> ManualClock:
    """A clock that moves only when told (``advance(ms)``), starting at a fixed instant
    (2027-01-15 08:00 UTC): apps that ``tickwork_isolated`` isolates in the same test run
    on it, so the test can read and move the time its schedules see."""
    return ManualClock()


@pytest.fixture
def tickwork_isolated(request: pytest.FixtureRequest) -> Iterator[IsolateFixture]:
    """Call it with your app (``tickwork_isolated(app)``, optionally a backend URL): the
    app runs on a fresh backend for the test (see ``tickwork.testing.Isolated``) and is
    restored after it. The test's ``tickwork`` marker gives the mode unless the call
    does; a test that also asks for ``tickwork_clock`` gets its apps on that clock."""
    marker = request.node.get_closest_marker("tickwork")
    marked = dict(marker.kwargs) if marker is not None else {}
    if "tickwork_clock" in request.fixturenames:
        marked["clock"] = request.getfixturevalue("tickwork_clock")
    opened: list[Isolated] = []

    def isolate(app: App, url: str | None = None, **options: Any) -> Isolated:
        isolated = Isolated(app, url, **{**marked, **options})
        opened.append(isolated)
        return isolated

    yield isolate
    for isolated in reversed(opened):
        isolated.close()
