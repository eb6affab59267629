"""Shared fixtures. Backends under test come from ``tests/support/backends.py``."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.backends import BACKEND_NAMES, BackendHarness, Servers, make_harness  # noqa: E402

#: tests on a heavy server run in one process of the suite's (pytest-xdist's
#: ``--dist loadgroup``), so that one Cassandra node and one Spark session serve them all
#: instead of one per process: both are JVMs of gigabytes on a machine of two cores (one
#: group for both: Spark's tests on Cassandra need the two)
_HEAVY = ("cassandra", "spark")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler of ``--dist loadgroup``: the tests whose ids name a heavy server in
    one group, the rest spread one by one.
    (xdist's own reads ``xdist_group`` marks into ids it rewrites through ``_nodeid``,
    which pytest 9 no longer reads: no test was grouped, so each process started its own
    Cassandra node and Spark session.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ByHeavyServer(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            lowered = nodeid.lower()
            return "heavy" if any(server in lowered for server in _HEAVY) else nodeid

    return ByHeavyServer(config, log)


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
