"""Cassandra result rows: the same named tuples as the driver's default factory, one class
per column list."""

from __future__ import annotations

from cassandra.query import named_tuple_factory

from tickwork.scheduler.backends.cassandra.rows import cached_named_tuple_factory


def test_rows_equal_the_drivers_and_share_one_class() -> None:
    columns = ["id", "ready_ms", "[applied]"]
    rows = [("a", 1, True), ("b", 2, False)]
    ours = cached_named_tuple_factory(columns, rows)
    assert ours == named_tuple_factory(columns, rows)
    assert [row.applied for row in ours] == [True, False]
    again = cached_named_tuple_factory(list(columns), [("c", 3, None)])
    assert type(again[0]) is type(ours[0])
    assert again[0]._fields == ("id", "ready_ms", "applied")


def test_names_that_are_not_identifiers_are_cleaned_as_the_driver_does() -> None:
    columns = ["count(*)", "system.now()", "class"]
    ours = cached_named_tuple_factory(columns, [(1, 2, 3)])
    assert ours[0]._fields == named_tuple_factory(columns, [(1, 2, 3)])[0]._fields
    assert cached_named_tuple_factory(columns, []) == []
