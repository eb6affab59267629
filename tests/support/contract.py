"""Helpers of the contract suites: envelopes for a harness's backend, and claiming
everything due."""

from __future__ import annotations

from tests.support.backends import BackendHarness
from tickwork.scheduler.backends import Claim, Envelope

TIMEOUT_MS = 1000  # leases of 300 ms expired between two claims on a cold Cassandra node


def env(
    h: BackendHarness,
    message_id: str,
    *,
    key: str | None = None,
    queue: str = "q",
    priority: int = 0,
    due_in_ms: int = 0,
    body: bytes | None = None,
    timeout_ms: int = TIMEOUT_MS,
) -> Envelope:
    return Envelope(
        id=message_id,
        queue=queue,
        key=key,
        priority=priority,
        due_ms=h.now_ms() + due_in_ms,
        timeout_ms=timeout_ms,
        body=body if body is not None else f"body-{message_id}".encode(),
    )


def claim_all(h: BackendHarness, queue: str = "q", limit: int = 100) -> list[Claim]:
    return h.backend.leases.claim(queue, limit).claims
