"""Arguments: the plain-value path gives what pydantic gives, and only takes what it may."""

from __future__ import annotations

import itertools
import math
from datetime import datetime
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import Field

from scheduler.arguments import Arguments, plain_types
from scheduler.errors import InvalidMessage


def by_pydantic(arguments: Arguments, args: list[Any], kwargs: dict[str, Any]) -> Any:
    """What the arguments come to through pydantic alone (the path before the plain one)."""
    named = arguments._named(args, kwargs)
    model = arguments._validate(named)
    dumped = arguments._serializer.to_python(model, mode="json", exclude_unset=True)
    count = min(len(args), len(arguments._positional))
    json_args = [dumped[n] for n in arguments._positional[:count]]
    json_kwargs = {k: dumped.get(k, v) for k, v in kwargs.items()}
    typed = {name: getattr(model, name) for name in named}
    return (json_args, json_kwargs), typed


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
    arguments = Arguments(fn, "t")
    names = list(arguments._positional)
    compared = 0
    for first, second in itertools.product(VALUES, repeat=2):
        calls: list[tuple[list[Any], dict[str, Any]]] = [
            ([first, second], {}),
            ([first], {names[1]: second}),
            ([first, 1.5], {names[-1]: second}),
        ]
        for args, kwargs in calls:
            try:
                expected = by_pydantic(arguments, args, kwargs)
            except InvalidMessage:
                with pytest.raises(InvalidMessage):
                    arguments.to_json(args, kwargs)
                with pytest.raises(InvalidMessage):
                    arguments.rebuild(args, kwargs)
                continue
            got = (arguments.to_json(args, kwargs), arguments.rebuild(args, kwargs)[1])
            assert repr(got) == repr(expected), (args, kwargs)  # repr: nan, -0.0, 1 vs 1.0
            compared += 1
    assert compared > 50


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
