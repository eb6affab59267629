"""The ledger's records: their compact stored form, and the records a worker writes for
the occurrences a late run's chain steps over (pure: no backend)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import product

from tickwork.scheduler import App
from tickwork.scheduler.backends.base import Claim
from tickwork.scheduler.clock import to_ms
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.schedules.ledger import (
    ORIGIN_HEADER,
    SCHEDULE_HEADER,
    HistoryEntry,
    RecordWriter,
    Retention,
    RunOutcome,
    one_line,
    origin_of,
    run_record,
    subject_of,
)
from tickwork.triggers import Cron, Exclusions, Misfire, Repeating
from tickwork.workers.intake.holdings import Work
from tickwork.workers.settling.ledger import RunLedger, dropped_records

T0 = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)  # a Monday


def _dropped(
    msg: Message, dropped: int, started: datetime | None, now_ms: int
) -> list[HistoryEntry]:
    """``dropped_records`` for a message whose trigger names no calendar."""
    assert msg.trigger is not None
    return dropped_records(msg, msg.trigger, dropped, started, now_ms)


def message(trigger: Repeating | Cron, **fields: object) -> Message:
    return Message(
        id="c.0",
        queue="q",
        task="t",
        key="k",
        trigger=trigger,
        chain="c",
        scheduled_at=T0,
        enqueued_at=T0,
        **fields,  # type: ignore[arg-type]
    )


def test_a_record_survives_its_stored_form() -> None:
    entry = HistoryEntry(
        RunOutcome.RETRIED,
        T0,
        origin="manual",
        started_at=T0 + timedelta(seconds=2),
        finished_at=T0 + timedelta(seconds=3),
        attempts=2,
        worker="host:1",
        error="ValueError: x",
        message_id="m1",
    )
    assert HistoryEntry.decode(entry.encode()) == entry
    assert entry.lateness == timedelta(seconds=2) and entry.duration == timedelta(seconds=1)
    assert len(HistoryEntry(RunOutcome.SUCCEEDED, T0).encode()) < 40, "compact"
    assert HistoryEntry.decode(b"not json") is None
    assert HistoryEntry.decode(b'{"o":"unknown","s":1}') is None
    assert one_line("E: first\nsecond") == "E: first" and len(one_line("x" * 1000)) == 300


def test_which_ledger_a_message_writes_to() -> None:
    every = Repeating(interval=timedelta(minutes=1), start=T0)
    assert subject_of(message(every), keeps_history=False) == "k:k"
    one_off = message(every).model_copy(update={"trigger": None, "key": None})
    assert subject_of(one_off, keeps_history=False) is None
    assert subject_of(one_off, keeps_history=True) == "m:c.0"
    manual = one_off.model_copy(update={"headers": {"tickwork-schedule": "nightly"}})
    assert subject_of(manual, keeps_history=False) == "k:nightly"


def test_a_late_run_records_what_fell_before_it_started_and_while_it_ran() -> None:
    every = Repeating(interval=timedelta(minutes=1), start=T0, misfire=Misfire.COALESCE)
    started = T0 + timedelta(minutes=2, seconds=30)  # 09:01 and 09:02 fell before it started
    now_ms = int((T0 + timedelta(minutes=5, seconds=30)).timestamp() * 1000)
    # due at 09:05:30: 09:01 .. 09:05; coalesce runs one now, the other four are dropped
    records = _dropped(message(every), 4, started, now_ms)
    assert [(r.outcome, r.scheduled_at, r.count, r.last_at) for r in records] == [
        (RunOutcome.COALESCED, T0 + timedelta(minutes=1), 2, T0 + timedelta(minutes=2)),
        (RunOutcome.SKIPPED_OVERLAP, T0 + timedelta(minutes=3), 2, T0 + timedelta(minutes=4)),
    ]
    skip = every.model_copy(update={"misfire": Misfire.SKIP})
    (only,) = _dropped(message(skip), 1, None, now_ms)
    assert (only.outcome, only.count, only.last_at) == (RunOutcome.MISSED, 1, None)
    assert _dropped(message(every), 0, started, now_ms) == []


def test_excluded_dates_since_the_last_run_are_recorded() -> None:
    weekdays = Cron("0 9 * * *", exclude=Exclusions(dates=(date(2030, 1, 5), date(2030, 1, 6))))
    monday = message(weekdays, last_run_at=T0 - timedelta(days=3))  # Friday's run
    records = _dropped(monday, 0, T0, int(T0.timestamp() * 1000))
    assert [(r.outcome, r.scheduled_at.date()) for r in records] == [
        (RunOutcome.EXCLUDED, date(2030, 1, 5)),
        (RunOutcome.EXCLUDED, date(2030, 1, 6)),
    ]
    assert all(r.note for r in records)


def test_a_workers_record_writer_writes_run_records_byte_for_byte() -> None:
    """``RecordWriter.run`` fills a template for the common record: the bytes must be
    ``run_record``'s for every outcome, origin, error, worker and id, odd ones included."""
    odd = ['say "hi"', "back\\slash", "tab\there", "é€😀", ""]
    runs = [(1_700_000_000_100, 1), (None, 0), (1_700_000_000_100, 0)]
    for worker, outcome, origin, (started, attempts), error, message_id in product(
        ["host:1", *odd],
        RunOutcome,
        ["scheduled", "manual"],
        runs,
        [None, "", "E: x"],
        ["k1.2", *odd],
    ):
        fields = (1_700_000_000_000, origin, started, 1_700_000_000_200, attempts)
        expected = run_record(outcome, *fields, worker, error, message_id)
        got = RecordWriter(worker).run(outcome, *fields, error, message_id)
        assert got == expected, (worker, outcome, origin, error, message_id)


def test_a_run_entry_holds_run_record_bytes_in_the_ledger_subject_of_names() -> None:
    """``RunLedger.entry`` (which skips the task lookup for a schedule's runs, and whose
    record writer fills a template for the common run) gives ``run_record``'s bytes for
    every run, in the ledger ``subject_of`` names."""
    app = App("sqlite:///unused.db")
    ledger = RunLedger(app)
    retention = Retention.of(app.settings)
    assert retention is not None
    every = Repeating(interval=timedelta(minutes=1))
    manual = Message(
        id="m.1",
        queue="q",
        task="t",
        scheduled_at=T0,
        enqueued_at=T0,
        headers={SCHEDULE_HEADER: "nightly", ORIGIN_HEADER: "manual"},
    )
    messages = [message(every), message(every, headers={"x": "y"}), manual]
    start = to_ms(T0) + 5
    for msg, outcome, error, started, attempt in product(
        messages, RunOutcome, [None, "E: x"], [0, start], [0, 1, 2]
    ):
        claim = Claim(msg.id, "q", msg.key, b"", "token", attempt, 0, 0, 0)
        entry = ledger.entry(Work(claim, msg, started_ms=started), outcome, start + 9, error)
        record = run_record(
            outcome,
            to_ms(T0),
            origin_of(msg),
            started or None,
            start + 9,
            attempt,
            ledger._records.worker,
            error,
            msg.id,
        )
        subject = subject_of(msg, keeps_history=False)
        assert subject is not None
        expected = retention.entry("q", subject, [record])
        assert entry == expected, (msg.id, msg.headers, outcome, error, started, attempt)
