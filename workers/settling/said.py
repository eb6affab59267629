"""What the settler logs of each settled run, one function per way a run ends (the
``tickwork.worker`` logger, each line with the run's fields for ``--log-format json``)."""

from __future__ import annotations

import logging

from tickwork.scheduler.hooks import Hooks
from tickwork.workers.intake.holdings import log_fields, logged_error
from tickwork.workers.settling.plan import Settled

log = logging.getLogger("tickwork.worker")


def done(item: Settled) -> None:
    """An acked run (DEBUG: one line per run)."""
    work = item.work
    log.debug(
        "done %s id=%s in %.1fms",
        work.message.task,
        work.message.id,
        item.result.duration_ms,
        extra={**log_fields(work), "run_ms": round(item.result.duration_ms, 3)},
    )


def unrun(item: Settled) -> None:
    """An occurrence acked without running (missed, skipped...)."""
    log.warning(
        "%s id=%s not run (%s): %s",
        item.work.message.task,
        item.work.message.id,
        item.name,
        item.why,
        extra=log_fields(item.work),
    )


def redelivered(item: Settled) -> None:
    """A handler that returned False: the message comes back when its lease ends."""
    log.info(
        "%s id=%s returned False: due again when its lease ends",
        item.work.message.task,
        item.work.message.id,
        extra=log_fields(item.work),
    )


def retried(item: Settled, hooks: Hooks) -> None:
    """A failed attempt, retried after its backoff."""
    work, result = item.work, item.result
    log.warning(
        "%s id=%s failed (attempt %d of %d): %s: %s; retrying in %.2fs",
        work.message.task,
        work.message.id,
        work.claim.attempt,
        item.max_attempts,
        result.error_type,
        logged_error(hooks, result.error),
        item.delay_s,
        extra=log_fields(work),
    )


def snoozed(item: Settled) -> None:
    """A snoozed run (INFO), or one deferred for a worker that knows its task (DEBUG)."""
    work = item.work
    log.log(
        logging.INFO if item.name == "snoozed" else logging.DEBUG,
        "%s id=%s %s; due again in %gs",
        work.message.task,
        work.message.id,
        item.why,
        item.result.snooze_s,
        extra=log_fields(work),
    )


def poisoned(item: Settled, hooks: Hooks) -> None:
    """A run that failed for good: aborted, expired, throttled (by design: INFO), or
    out of attempts."""
    work, result, message = item.work, item.result, item.work.message
    if item.name == "aborted":
        log.warning(
            "%s id=%s was aborted%s",
            message.task,
            message.id,
            "; its chain ends" if not item.continues and message.trigger else "",
            extra=log_fields(work),
        )
    elif item.name in ("expired", "throttled"):
        log.log(
            logging.INFO if item.name == "throttled" else logging.WARNING,
            "%s id=%s %s: %s",
            message.task,
            message.id,
            item.name,
            logged_error(hooks, result.error),
            extra=log_fields(work),
        )
    else:
        log.error(
            "%s id=%s goes to the poison queue after %d attempt(s): %s: %s",
            message.task,
            message.id,
            work.claim.attempt,
            result.error_type,
            logged_error(hooks, result.error),
            extra=log_fields(work),
        )
