"""What is PostgreSQL's own: the schema the backend creates and versions itself (twice
at once, or applied by hand from ``tickwork postgres install --print``), its URL
options, and text PostgreSQL refuses (NUL) arriving as one clear error."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import psycopg
import pytest

from tests.support.backends import Servers
from tests.support.served import run_tickwork
from tickwork.scheduler import App
from tickwork.scheduler.backends import Envelope, open_backend
from tickwork.scheduler.backends.postgres.schema import VERSION
from tickwork.scheduler.errors import BackendError, ConfigurationError, InvalidMessage

ROOT = Path(__file__).resolve().parents[2]


def _server() -> str:
    return Servers.postgres_url()


def _schema() -> str:
    return f"s{uuid.uuid4().hex[:10]}"


def _version(schema: str) -> int | None:
    with psycopg.connect(_server()) as conn:
        row = conn.execute(f'SELECT version FROM "{schema}".schema_version').fetchone()
    return None if row is None else int(row[0])


def test_two_processes_starting_at_once_create_the_schema_once() -> None:
    url = f"{_server()}?schema={_schema()}"
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            open_backend(url).close()
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert _version(url.rsplit("=", 1)[1]) == VERSION


def test_a_schema_newer_than_this_tickwork_is_refused() -> None:
    schema = _schema()
    open_backend(f"{_server()}?schema={schema}").close()
    with psycopg.connect(_server()) as conn:
        conn.execute(f'UPDATE "{schema}".schema_version SET version = %s', (VERSION + 1,))
    with pytest.raises(BackendError, match="newer than this tickwork knows"):
        open_backend(f"{_server()}?schema={schema}")


def test_the_printed_script_installs_what_the_backend_expects(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    schema = _schema()
    printed = run_tickwork(
        tmp_path, clean_env, "postgres", "install", "--print", "--schema", schema
    )
    assert printed.returncode == 0, printed.stderr
    script = printed.stdout
    with psycopg.connect(_server(), autocommit=True) as conn:
        conn.execute(script.encode())
    assert _version(schema) == VERSION
    with open_backend(f"{_server()}?schema={schema}") as backend:
        now = backend.now_ms()
        backend.messages.enqueue([Envelope("m1", "q", None, 0, now, 1000, b"{}")])
        assert [c.id for c in backend.leases.claim("q", 10).claims] == ["m1"]


def test_install_creates_the_schema_named_by_the_url(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    schema = _schema()
    url = f"{_server()}?schema={schema}"
    done = run_tickwork(tmp_path, clean_env, "--backend", url, "postgres", "install")
    assert done.returncode == 0, done.stderr
    assert f"schema {schema} is at version {VERSION}" in done.stdout
    assert _version(schema) == VERSION


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("schema=Bad-Name", "schema"),
        ("pool_size=0", "pool_size"),
        ("sslmode=sometimes", "sslmode"),
        ("colour=blue", "unknown option 'colour'"),
    ],
)
def test_bad_url_options_are_one_clear_error(query: str, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem) as caught:
        open_backend(f"{_server()}?{query}")
    assert "tick-secret" not in str(caught.value), "the password is never shown"


def test_an_unreachable_server_is_one_clear_error() -> None:
    with pytest.raises(BackendError, match="cannot connect to PostgreSQL"):
        open_backend("postgresql://nobody:x@127.0.0.1:1/none?connect_timeout_s=1")


def test_text_postgresql_refuses_is_one_clear_error_and_writes_nothing() -> None:
    app = App(f"{_server()}?schema={_schema()}")
    try:

        @app.task
        def note(text: str) -> None:
            pass

        with pytest.raises(InvalidMessage, match="a key has no control characters"):
            note.schedule(("a",), key="bad\x00key")  # tickwork's rule for keys, first
        _, envelope = app.builder.build(note.call("a").options(key="good"))
        with pytest.raises(InvalidMessage, match=r"PostgreSQL refused a value.*NUL"):
            app.backend.messages.enqueue([envelope._replace(key="bad\x00key")])
        assert app.backend.queues.stats("default")[0].pending == 0
        note.delay("fine\x00inside the body")  # the body is bytes: any text fits
        assert app.backend.queues.stats("default")[0].pending == 1
    finally:
        app.close()
