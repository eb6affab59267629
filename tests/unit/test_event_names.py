"""Event names and subscription patterns: what is valid, and what ``*`` and ``**``
match (one segment; any number of segments, none included)."""

from __future__ import annotations

import pytest

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.events.waits import waiters_subject
from tickwork.scheduler.model.event_names import check_name, check_pattern, matches


@pytest.mark.parametrize(
    "pattern, name, expected",
    [
        ("order.created", "order.created", True),
        ("order.created", "order.cancelled", False),
        ("order.*", "order.created", True),
        ("order.*", "order", False),
        ("order.*", "order.line.added", False),
        ("*.created", "invoice.created", True),
        ("order.**", "order", True),
        ("order.**", "order.line.added", True),
        ("order.**", "orders.created", False),
        ("**", "anything.at.all", True),
        ("a.**.z", "a.z", True),
        ("a.**.z", "a.b.c.z", True),
        ("a.**.z", "a.b.c", False),
        ("**.paid", "invoice.paid", True),
        ("**.paid", "paid", True),
        ("**.paid", "invoice.unpaid", False),
        ("a.*.*", "a.b", False),
    ],
)
def test_patterns_match_whole_segments(pattern: str, name: str, expected: bool) -> None:
    assert matches(pattern, name) is expected


@pytest.mark.parametrize("name", ["", "a..b", "a b", ".a", "a.", "order.*", "x" * 201, "é"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidMessage):
        check_name(name)


@pytest.mark.parametrize("pattern", ["", "a.*b", "a.***", "a. b"])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidMessage):
        check_pattern(pattern)


def test_good_names_and_patterns_pass() -> None:
    assert check_name("billing.invoice-2:paid_v1") == "billing.invoice-2:paid_v1"
    assert check_pattern("billing.*.**") == "billing.*.**"


def test_waits_for_any_key_and_for_one_key_are_kept_apart() -> None:
    assert waiters_subject("paid", None) != waiters_subject("paid", "*")
