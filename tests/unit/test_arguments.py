"""Arguments: the plain-value path gives what pydantic gives, and only takes what it may."""

from __future__ import annotations

import itertools
import math
from datetime import datetime
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import Field

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.arguments import Arguments, plain_types


def through_pydantic(fn: Any) -> Arguments:
    """``Arguments`` of ``fn`` with the plain path turned off: every call goes through
    pydantic, as before the plain path existed."""
    arguments = Arguments(fn, "t")
    arguments._plain = dict.fromkeys(arguments._plain, frozenset())
    return arguments


def outcome(arguments: Arguments, args: list[Any], kwargs: dict[str, Any]) -> str:
    """What ``to_json`` and ``rebuild`` make of a call, or the error they raise (as repr:
    nan, -0.0, and 1 against 1.0 compare as written)."""
    try:
        return repr((arguments.to_json(args, kwargs), arguments.rebuild(args, kwargs)))
    except InvalidMessage as err:
        return f"InvalidMessage: {err}"


def typed_call(
    count: int, amount: float, note: str = "", flag: bool = False, extra: Any = None
) -> None:
    """A handler with plain parameters."""


def optional_call(a: int | None, b: Optional[str] = None, c: float | int = 0) -> None:  # noqa: UP045
    """A handler with unions of plain types."""


VALUES = [0, 1, -7, 2**70, 1.5, 3.0, -0.0, float("inf"), float("nan"), "", "x", "é", True, False]
VALUES += [None, [1, 2], {"a": 1}, (1, 2)]


@pytest.mark.parametrize("fn", [typed_call, optional_call])
def test_every_call_comes_out_as_through_pydantic(fn: Any) -> None:
    arguments, reference = Arguments(fn, "t"), through_pydantic(fn)
    names = list(arguments._positional)
    plain = 0
    for first, second in itertools.product(VALUES, repeat=2):
        calls: list[tuple[list[Any], dict[str, Any]]] = [
            ([first, second], {}),
            ([first], {names[1]: second}),
            ([first, 1.5], {names[-1]: second}),
        ]
        for args, kwargs in calls:
            expected = outcome(reference, args, kwargs)
            assert outcome(arguments, args, kwargs) == expected, (args, kwargs)
            plain += arguments._is_plain(arguments._named(args, kwargs))
    assert plain >= 40, "the plain path was taken"


def test_plain_values_skip_pydantic_and_others_do_not() -> None:
    arguments = Arguments(typed_call, "t")
    assert arguments._is_plain({"count": 3, "amount": 1.5, "extra": "s"})
    assert not arguments._is_plain({"count": 3, "amount": 2})  # an int for a float: 2.0
    assert not arguments._is_plain({"count": True, "amount": 1.5})  # a bool for an int
    assert not arguments._is_plain({"count": 3, "amount": math.inf})
    assert not arguments._is_plain({"count": 3})  # a required one missing: pydantic says so
    assert not arguments._is_plain({"count": 3, "amount": 1.5, "extra": [1]})


def test_constraints_and_rich_types_still_go_through_pydantic() -> None:
    def constrained(n: Annotated[int, Field(gt=0)], when: datetime, mode: Literal["a"]) -> None:
        """A handler whose values pydantic must look at."""

    arguments = Arguments(constrained, "t")
    assert not any(arguments._plain.values())
    assert arguments.rebuild([], {"n": 1, "when": "2026-01-01T00:00:00Z", "mode": "a"})[1][
        "when"
    ] == datetime.fromisoformat("2026-01-01T00:00:00+00:00")
    with pytest.raises(InvalidMessage, match="mode"):
        arguments.to_json([1, "2026-01-01T00:00:00Z", "b"], {})


def test_the_plain_types_of_each_annotation() -> None:
    scalars = {int, str, bool, float, type(None)}
    assert plain_types(Any) == scalars
    assert plain_types(int) == {int}
    assert plain_types(int | None) == {int, type(None)}
    assert plain_types(Optional[str]) == {str, type(None)}  # noqa: UP045
    assert plain_types(list[int]) == frozenset()
    assert plain_types(int | list[int]) == frozenset()
    assert plain_types(Annotated[int, Field(gt=0)]) == frozenset()


def test_nan_and_infinity_are_refused_not_stored_as_null() -> None:
    """JSON has no NaN: a float parameter or an ``Any`` one, at any depth, is refused
    with one clear error naming the argument (pydantic would have stored null)."""

    def anything(value: Any, amount: float = 0.0, rows: list[float] | None = None) -> None:
        """A handler taking anything."""

    arguments = Arguments(anything, "t")
    for args, kwargs, name in (
        ([math.nan], {}, "value"),
        ([1], {"amount": math.inf}, "amount"),
        ([{"a": [1, -math.inf]}], {}, "value"),
        ([1], {"rows": [1.0, math.nan]}, "rows"),
    ):
        with pytest.raises(InvalidMessage, match=f"{name}: NaN and infinity cannot be stored"):
            arguments.to_json(args, kwargs)
    assert arguments.to_json([{"a": [1.5]}], {"amount": 2.5}) == ([{"a": [1.5]}], {"amount": 2.5})
