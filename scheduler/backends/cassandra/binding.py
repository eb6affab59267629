"""Adding a prepared statement to a batch with its values serialized directly.

``BatchStatement.add`` binds through a ``BoundStatement`` made for each statement (its
attributes copied from the prepared one, a column descriptor built per value, the
encryption policy asked per value): a large part of the worker's CPU in a Cassandra
drain, where a claim adds four statements a message and an ack three. Here each prepared
statement's serializers are looked up once, and a batch takes the serialized values as
the driver's own ``add`` leaves them.

The batch's first statement still goes through the driver's ``add``: it sets the batch's
routing key (the replica a token-aware policy sends it to). So does anything out of the
ordinary (a column encryption policy, a value count other than the columns', a null in
the partition key, a value of the wrong type: the driver's errors are kept), and every
statement when the driver keeps its batches in some other way than this module knows.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from cassandra.query import UNSET_VALUE, BatchStatement, PreparedStatement

_Serializer = Callable[[Any, int], bytes]


class _Plan(NamedTuple):
    """What adding a prepared statement directly needs, looked up once."""

    serializers: tuple[_Serializer, ...]
    routing: tuple[int, ...]  # the indexes of the partition key's values
    version: int  # the protocol version it was prepared with
    direct: bool  # nothing the driver's add would do differently (see the module's text)


#: by prepared statement id (a digest of the query and its keyspace)
_PLANS: dict[bytes, _Plan] = {}

#: the driver's batches keep (is_prepared, query_id, values) in this list (as 3.30 does)
_DIRECT = isinstance(getattr(BatchStatement(), "_statements_and_parameters", None), list)


def _plan(statement: PreparedStatement) -> _Plan:
    plan = _PLANS.get(statement.query_id)
    if plan is None:
        plan = _Plan(
            tuple(column.type.serialize for column in statement.column_metadata),
            tuple(statement.routing_key_indexes or ()),
            statement.protocol_version,
            _DIRECT
            and statement.column_encryption_policy is None
            and not statement.custom_payload
            and statement.protocol_version >= 4,
        )
        _PLANS[statement.query_id] = plan
    return plan


def unset_nulls(params: Any) -> Any:
    """None in a bound INSERT writes a tombstone cell; leave the column unset instead."""
    if isinstance(params, tuple | list):
        return tuple(UNSET_VALUE if value is None else value for value in params)
    return params


def add_to_batch(batch: BatchStatement, statement: PreparedStatement, params: Any) -> None:
    """Add ``statement`` with ``params`` to ``batch``, as ``batch.add`` would; a None
    leaves its column unset (no tombstone)."""
    bound = _serialized(batch, statement, params)
    if bound is None:  # the driver's add: the routing key, its errors, what is unusual
        batch.add(statement, unset_nulls(params))
    else:
        batch._statements_and_parameters.append((True, statement.query_id, bound))


def _serialized(batch: BatchStatement, statement: PreparedStatement, params: Any) -> Any:
    """``params`` serialized for the direct path, or None where the driver's add must run."""
    plan = _plan(statement)
    if (
        not plan.direct
        or batch.routing_key is None  # the driver's add takes the routing key from it
        or not isinstance(params, (tuple, list))
        or len(params) != len(plan.serializers)
        or any(params[index] is None for index in plan.routing)  # the driver refuses it
    ):
        return None
    version = plan.version
    try:
        return [
            UNSET_VALUE if value is None or value is UNSET_VALUE else serialize(value, version)
            for value, serialize in zip(params, plan.serializers, strict=False)  # same length
        ]
    except (TypeError, ValueError, struct.error, AttributeError):
        return None  # the driver's error, naming the column
