"""Fixtures of the integration tests: an app on each backend, and one on SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.backends import BACKEND_NAMES, PAIR_NAMES, backend_url
from tickwork.scheduler import App


@pytest.fixture(params=BACKEND_NAMES)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    """An app on a fresh backend of each kind: a test using it runs on each."""
    application = App(backend_url(request.param, tmp_path))
    yield application
    application.close()


@pytest.fixture(params=PAIR_NAMES)
def pair_app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[App]:
    """An app on SQLite and on a Redis Cluster: for behaviour above the backend contract."""
    application = App(backend_url(request.param, tmp_path))
    yield application
    application.close()


@pytest.fixture
def sqlite_app(sqlite_url: str) -> Iterator[App]:
    application = App(sqlite_url)
    yield application
    application.close()
