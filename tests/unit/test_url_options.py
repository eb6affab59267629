"""Backend URL options: one typed model per backend, and one clear error for a bad option.

Options are checked before any connection is made, so no server is needed here (port 1
is closed: a test that got as far as connecting would fail with another error).
"""

from __future__ import annotations

import pytest

from tickwork.scheduler.backends import open_backend
from tickwork.scheduler.backends.cassandra import CassandraOptions
from tickwork.scheduler.backends.options import parse_options
from tickwork.scheduler.backends.postgres.backend import PostgresOptions
from tickwork.scheduler.backends.redis import RedisOptions
from tickwork.scheduler.backends.sqlite import SQLiteOptions
from tickwork.scheduler.errors import ConfigurationError

BAD = [
    ("redis://127.0.0.1:1/0?shard=4", "unknown option 'shard'"),
    ("redis://127.0.0.1:1/0?shards=0", "shards"),
    ("redis://127.0.0.1:1/0?shards=many", "shards"),
    ("redis://127.0.0.1:1/0?ssl_cert_reqs=maybe", "ssl_cert_reqs"),
    ("rediss://127.0.0.1:1/0?socket_timeout=-1", "socket_timeout"),
    ("redis+cluster://127.0.0.1:1?prefix=", "prefix"),
    ("cassandra://127.0.0.1:1/ks?consistency=MOST", "consistency"),
    ("cassandra://127.0.0.1:1/ks?shardz=2", "unknown option 'shardz'"),
    ("cassandra://127.0.0.1:1/ks?bucket_seconds=0", "bucket_seconds"),
    ("cassandra://127.0.0.1:1/ks?ssl=perhaps", "ssl"),
    ("sqlite:///x.db?synchronous=off", "synchronous"),
    ("postgresql://u:p@127.0.0.1:1/db?schema=Not-Plain", "schema"),
    ("postgresql://u:p@127.0.0.1:1/db?pool_size=0", "pool_size"),
    ("postgres://127.0.0.1:1/db?sslmode=sometimes", "sslmode"),
    ("postgresql://127.0.0.1:1/db?schemas=x", "unknown option 'schemas'"),
]


@pytest.mark.parametrize(("url", "complaint"), BAD)
def test_a_bad_option_is_one_error_naming_it_and_the_known_options(
    url: str, complaint: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        open_backend(url)
    message = str(raised.value)
    assert complaint in message
    assert "known options: " in message and "\n" not in message
    assert "schema_name" not in message, "options are named as the URL spells them"


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_options(RedisOptions, "redis://h/0?shards=x&colour=blue&sweep=0", "Redis")
    message = str(raised.value)
    assert "shards" in message and "'colour'" in message and "sweep" in message


def test_the_password_never_appears_in_the_error() -> None:
    with pytest.raises(ConfigurationError) as raised:
        open_backend("redis://user:hunter2@127.0.0.1:1/0?bogus=1")
    assert "hunter2" not in str(raised.value) and "***" in str(raised.value)


def test_good_options_are_typed() -> None:
    redis = parse_options(
        RedisOptions, "redis://h/0?shards=4&ssl_check_hostname=false&max_connections=9", "Redis"
    )
    assert (redis.shards, redis.ssl_check_hostname, redis.max_connections) == (4, False, 9)
    assert redis.client_options()["max_connections"] == 9 and "shards" not in redis.client_options()
    cassandra = parse_options(
        CassandraOptions, "cassandra://h/ks?consistency=local_quorum&ssl=true", "Cassandra"
    )
    assert cassandra.consistency == "LOCAL_QUORUM" and cassandra.ssl
    assert cassandra.create_schema and cassandra.bucket_seconds == 60
    postgres = parse_options(PostgresOptions, "postgresql://h/db?schema=jobs&pool_size=4", "PG")
    assert (postgres.schema_name, postgres.pool_size, postgres.sslmode) == ("jobs", 4, None)
    sqlite = parse_options(SQLiteOptions, "sqlite:///x.db?synchronous=EXTRA", "SQLite")
    assert sqlite.synchronous == "extra" and sqlite.busy_timeout_ms == 30_000
