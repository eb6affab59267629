"""The live-changes part of the backend contract: a listener hears, in order, what is
published (by this backend or another opened on the same store) after it began, and
nothing from before; a large burst arrives whole; a quiet feed answers empty at its
timeout. Run against every backend."""

from __future__ import annotations

import time

from tests.support.backends import BackendHarness
from tickwork.scheduler.backends.roles.changes import LISTENER_TTL_MS, ChangeFeed


def _hear(feed: ChangeFeed, count: int, timeout_s: float = 20.0) -> list[bytes]:
    heard: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(heard) < count and time.monotonic() < deadline:
        heard += feed.next(1.0)
    return heard


def test_a_listener_hears_in_order_what_is_published_after_it_began(
    harness: BackendHarness,
) -> None:
    publisher = harness.reopen()  # another process's backend, in effect
    try:
        harness.backend.changes.publish([b'{"n":"before"}'])
        feed = harness.backend.changes.listen()
        try:
            publisher.changes.publish([b'{"n":1}', b'{"n":2}'])
            publisher.changes.publish([])
            harness.backend.changes.publish([b'{"n":3}'])
            assert _hear(feed, 3) == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
            assert feed.next(0.2) == [], "nothing more was published"
        finally:
            feed.close()
            feed.close()
    finally:
        publisher.close()


def test_a_burst_larger_than_one_notification_arrives_whole(harness: BackendHarness) -> None:
    burst = [b'{"n":%d,"pad":"%s"}' % (n, b"x" * 200) for n in range(300)]
    feed = harness.backend.changes.listen()
    try:
        harness.backend.changes.publish(burst)
        assert _hear(feed, len(burst)) == burst
    finally:
        feed.close()


def test_every_listener_hears_each_change(harness: BackendHarness) -> None:
    feeds = [harness.backend.changes.listen() for _ in range(2)]
    try:
        harness.backend.changes.publish([b'{"n":"both"}'])
        assert [_hear(feed, 1) for feed in feeds] == [[b'{"n":"both"}']] * 2
    finally:
        for feed in feeds:
            feed.close()


def test_a_listener_is_known_while_it_says_it_listens(harness: BackendHarness) -> None:
    """Publishers publish only while someone listens: a server says so every few
    seconds, and is believed for ``LISTENER_TTL_MS`` after it last did."""
    other = harness.reopen()
    try:
        assert not harness.backend.changes.listened()
        other.changes.announce("server-1")
        other.changes.announce("server-1")
        assert harness.backend.changes.listened()
        if harness.clock is not None:  # a clock of the test's: past the time to live
            harness.advance(LISTENER_TTL_MS + 1000)
            assert not harness.backend.changes.listened()
    finally:
        other.close()
