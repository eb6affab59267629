"""Result rows as named tuples whose classes are made once per column list.

The driver's default row factory builds a new ``namedtuple`` class for every result (a
class made with ``exec``: about a tenth of the driver's event-loop thread in a worker's
profile, since every claim, ack and lock is a small result); this one keeps the classes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cassandra.query import named_tuple_factory


@lru_cache(maxsize=512)
def _row_class(colnames: tuple[str, ...]) -> Any:
    """The driver's own row class for ``colnames`` (its name cleaning and fallbacks)."""
    (sample,) = named_tuple_factory(list(colnames), [(None,) * len(colnames)])
    return type(sample)


def cached_named_tuple_factory(colnames: list[str], rows: list[Any]) -> list[Any]:
    """Rows as named tuples, as the driver's ``named_tuple_factory`` makes them."""
    row_class = _row_class(tuple(colnames))
    return [row_class(*row) for row in rows]


def applied(result: Any) -> bool:
    """Whether a lightweight transaction (or a batch of them) was applied: the first
    column of its first row, ``[applied]`` (the driver's ``was_applied`` accepts only its
    own row factories)."""
    row = result.one()
    return row is not None and bool(row[0])
