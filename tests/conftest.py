"""Shared fixtures. Backends under test come from ``tests/support/backends.py``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.backends import BACKEND_NAMES, BackendHarness, Servers, make_harness  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _stop_servers() -> Iterator[None]:
    yield
    Servers.stop_all()


@pytest.fixture(autouse=True)
def _no_stray_backend_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TICKWORK_BACKEND", raising=False)
    monkeypatch.delenv("TICKWORK_CONFIG", raising=False)


@pytest.fixture(params=BACKEND_NAMES)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendHarness]:
    """A fresh, empty backend of each kind, with a way to move its clock."""
    with make_harness(request.param, tmp_path) as h:
        yield h


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'tickwork.db'}"


@pytest.fixture
def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["PYTHONPATH"] = str(ROOT)
    return env
