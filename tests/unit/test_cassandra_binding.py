"""A statement added to a Cassandra batch by ``add_to_batch`` is what the driver's own
``BatchStatement.add`` stores: the same serialized values, the routing key taken from the
first statement, and the driver's errors for what it refuses."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra.cqltypes import BooleanType, BytesType, Int32Type, LongType, UTF8Type
from cassandra.protocol import ColumnMetadata
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, PreparedStatement

from tickwork.scheduler.backends.cassandra.binding import add_to_batch, unset_nulls

_COLUMNS = [
    ("queue", UTF8Type),
    ("shard", Int32Type),
    ("id", UTF8Type),
    ("deadline_ms", LongType),
    ("leased", BooleanType),
    ("body", BytesType),
    ("key", UTF8Type),
    ("[timestamp]", LongType),
]


def prepared() -> PreparedStatement:
    meta = [ColumnMetadata("ks", "leases", name, kind) for name, kind in _COLUMNS]
    return PreparedStatement(meta, b"query-id", [0, 1], "INSERT ...", "ks", 5, None, None, None)


def rows() -> list[tuple[Any, ...]]:
    return [
        ("q", 0, "a", 1_764_150_000_000, True, b"x" * 100, "k", 1_764_150_000_000_000),
        ("q", 3, "é", -1, False, b"", None, 0),  # a None is left unset
        ("q", 2**31 - 1, "c", 2**63 - 1, None, bytearray(b"yz"), UNSET_VALUE, 1),
    ]


def test_the_batch_holds_what_the_drivers_add_stores() -> None:
    statement = prepared()
    ours = BatchStatement(batch_type=BatchType.LOGGED)
    theirs = BatchStatement(batch_type=BatchType.LOGGED)
    for params in rows():
        add_to_batch(ours, statement, params)
        theirs.add(statement, unset_nulls(params))
    assert ours._statements_and_parameters == theirs._statements_and_parameters
    assert ours.routing_key == theirs.routing_key is not None
    assert ours.keyspace == theirs.keyspace == "ks"


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (("q", "not a number", "a", 1, True, b"", None, 1), 'column "shard"'),
        (("q", 2**31, "a", 1, True, b"", None, 1), 'column "shard"'),
        (("q", 0, "a", "soon", True, b"", None, 1), 'column "deadline_ms"'),
        (("q", None, "a", 1, True, b"", None, 1), "routing key"),
    ],
)
def test_a_value_the_driver_refuses_gets_the_drivers_error(
    bad: tuple[Any, ...], error: str
) -> None:
    statement = prepared()
    batch = BatchStatement(batch_type=BatchType.LOGGED)
    add_to_batch(batch, statement, rows()[0])  # not the first: the direct path is taken
    with pytest.raises((TypeError, ValueError), match=error):
        add_to_batch(batch, statement, bad)
    assert len(batch) == 1  # nothing half-added


def test_a_short_value_list_is_padded_as_the_driver_pads_it() -> None:
    statement = prepared()
    ours = BatchStatement(batch_type=BatchType.LOGGED)
    theirs = BatchStatement(batch_type=BatchType.LOGGED)
    for batch in (ours, theirs):
        batch.add(statement, rows()[0])
    add_to_batch(ours, statement, ("q", 1, "short"))
    theirs.add(statement, ("q", 1, "short"))
    assert ours._statements_and_parameters == theirs._statements_and_parameters
