"""Adding a prepared statement to a batch with its values serialized directly.

``BatchStatement.add`` binds through a ``BoundStatement`` made for each statement (its
attributes copied from the prepared one, a column descriptor built per value, the
encryption policy asked per value): about 22 µs for a lease's 13 columns, a quarter of
the worker's CPU in a Cassandra drain, where a claim adds four statements a message and an ack
three. Here each prepared statement's serializers are looked up once, and a batch takes the
serialized values as the driver's own ``add`` leaves them (about 7 µs).

The batch's first statement still goes through the driver's ``add``: it sets the batch's
routing key (the replica a token-aware policy sends it to). So does anything out of the
ordinary (a column encryption policy, a value count other than the columns', a null in
the partition key, a value of the wrong type: the driver's errors are kept), and every
statement when the driver keeps its batches in some other way than this module knows.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from cassandra.query import UNSET_VALUE, BatchStatement, PreparedStatement

_Serializer = Callable[[Any, int], bytes]

#: per prepared statement: its columns' serializers and the indexes of its routing key
_PLANS: WeakKeyDictionary[PreparedStatement, tuple[tuple[_Serializer, ...], frozenset[int]]]
_PLANS = WeakKeyDictionary()

#: the driver's batches keep (is_prepared, query_id, values) in this list (as 3.30 does)
_DIRECT = isinstance(getattr(BatchStatement(), "_statements_and_parameters", None), list)


def _plan(statement: PreparedStatement) -> tuple[tuple[_Serializer, ...], frozenset[int]]:
    plan = _PLANS.get(statement)
    if plan is None:
        serializers = tuple(column.type.serialize for column in statement.column_metadata)
        plan = (serializers, frozenset(statement.routing_key_indexes or ()))
        _PLANS[statement] = plan
    return plan


def unset_nulls(params: Any) -> Any:
    """None in a bound INSERT writes a tombstone cell; leave the column unset instead."""
    if isinstance(params, tuple | list):
        return tuple(UNSET_VALUE if value is None else value for value in params)
    return params


def add_to_batch(batch: BatchStatement, statement: PreparedStatement, params: Any) -> None:
    """Add ``statement`` with ``params`` to ``batch``, as ``batch.add`` would; a None
    leaves its column unset (no tombstone)."""
    if (
        not _DIRECT
        or batch.routing_key is None  # the driver's add takes the routing key from it
        or statement.column_encryption_policy is not None
        or statement.custom_payload
        or statement.protocol_version < 4
        or not isinstance(params, tuple | list)
    ):
        batch.add(statement, unset_nulls(params))
        return
    serializers, routing = _plan(statement)
    if len(params) != len(serializers) or any(params[index] is None for index in routing):
        batch.add(statement, unset_nulls(params))  # the driver's error for these
        return
    version = statement.protocol_version
    try:
        bound = [
            UNSET_VALUE if value is None or value is UNSET_VALUE else serialize(value, version)
            for value, serialize in zip(params, serializers, strict=True)
        ]
    except (TypeError, ValueError, struct.error, AttributeError):
        batch.add(statement, unset_nulls(params))  # the driver's error, naming the column
        return
    batch._statements_and_parameters.append((True, statement.query_id, bound))
