"""SQLite specifics the contract suite does not reach: URL options and opening the file."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from scheduler.backends import open_backend
from scheduler.backends.sqlite import SQLiteBackend
from scheduler.errors import ConfigurationError


def test_url_options_are_typed(tmp_path: Path) -> None:
    backend = open_backend(f"sqlite:///{tmp_path}/a.db?synchronous=NORMAL&busy_timeout_ms=50")
    assert isinstance(backend, SQLiteBackend)
    assert backend._synchronous == "NORMAL"
    assert backend._busy_timeout_ms == 50
    backend.close()


@pytest.mark.parametrize(
    ("query", "complaint"),
    [
        ("synchronus=full", "unknown option 'synchronus'"),
        ("synchronous=off", "synchronous"),
        ("busy_timeout_ms=soon", "busy_timeout_ms"),
        ("busy_timeout_ms=-1", "busy_timeout_ms"),
    ],
)
def test_a_bad_url_option_is_one_clear_error(tmp_path: Path, query: str, complaint: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        open_backend(f"sqlite:///{tmp_path}/a.db?{query}")
    assert complaint in str(raised.value)
    assert "known options: busy_timeout_ms, synchronous" in str(raised.value)
    assert not (tmp_path / "a.db").exists()


def _open_at_once(backends: list[SQLiteBackend]) -> list[BaseException]:
    """Each backend opens its first connection in its own thread, all released together."""
    barrier = threading.Barrier(len(backends))
    errors: list[BaseException] = []

    def open_and_count(backend: SQLiteBackend) -> None:
        barrier.wait()
        try:
            backend.stats()
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=open_and_count, args=(b,)) for b in backends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_many_threads_open_one_file_at_once(tmp_path: Path) -> None:
    """Switching to WAL may answer "locked" without waiting while another connection opens
    the file; every opener must wait its turn instead (CI saw this once in ten workers)."""
    for round_ in range(5):
        url = f"sqlite:///{tmp_path}/race{round_}.db"
        backends = [SQLiteBackend.from_url(url) for _ in range(12)]
        for backend in backends:
            backend.close()
        backends = [SQLiteBackend.from_url(url) for _ in range(12)]
        errors = _open_at_once(backends)
        for backend in backends:
            backend.close()
        assert errors == []
