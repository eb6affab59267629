"""Parked claims checked before they start: a claim the consumer took within the
lookahead waits in the timer until its due time; a cancel (``app.cancel``) in that time
deletes the stored message without the worker knowing, so before the timer hands due
claims on, their leases are extended once (one backend call a batch, by lease length).
A claim whose lease is no longer held (the message was cancelled, or its lease expired
and another worker took it) never runs here: it is forgotten. If the backend cannot be
asked, the claims start as they would have (a cancelled one's ack is then refused).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Backend
from tickwork.workers.intake.holdings import Work

log = logging.getLogger("tickwork.worker")


class ParkedCheck:
    """What the timer hands due claims to: the held ones go on to ``submit``, the
    others to ``forget``."""

    def __init__(
        self,
        backend: Backend,
        submit: Callable[[list[Work]], None],
        forget: Callable[[list[Work]], None],
    ) -> None:
        self._backend = backend
        self._submit = submit
        self._forget = forget

    def __call__(self, works: list[Work]) -> None:
        held = self.held(works)
        if len(held) < len(works):
            kept = {id(work) for work in held}
            gone = [work for work in works if id(work) not in kept]
            for work in gone:
                log.info(
                    "%s id=%s was cancelled (or its lease lost) before its time: not run",
                    work.message.task,
                    work.claim.id,
                )
            self._forget(gone)
        if held:
            self._submit(held)

    def held(self, works: list[Work]) -> list[Work]:
        """The works whose leases are still held (each extended by its length)."""
        by_timeout: dict[int, list[Work]] = {}
        for work in works:
            by_timeout.setdefault(work.claim.timeout_ms, []).append(work)
        held: list[Work] = []
        for timeout_ms, group in by_timeout.items():
            try:
                answers = self._backend.leases.extend([w.claim for w in group], timeout_ms)
            except BackendError as err:
                log.warning("cannot check %d parked claim(s) (they start): %s", len(group), err)
                held += group
                continue
            held += [work for work, ok in zip(group, answers, strict=True) if ok]
        return held
