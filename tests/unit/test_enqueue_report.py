"""What ``enqueue_many`` answers prints short: its counts and its first ids."""

from tickwork.scheduler.backends import Outcome
from tickwork.scheduler.producing.reports import EnqueueReport


def test_a_report_of_a_bulk_enqueue_prints_its_counts_not_every_id() -> None:
    ids = [f"i{n:06d}" for n in range(2000)]
    report = EnqueueReport(ids, {Outcome.ENQUEUED: 1990, Outcome.IGNORED: 10}, 0.25)
    shown = repr(report)
    assert shown == (
        "EnqueueReport(ids=[i000000, i000001, i000002, ... (2000 ids)], "
        "enqueued 1990, ignored 10, waited 0.250 s)"
    )
    assert repr(EnqueueReport()) == "EnqueueReport(ids=[], nothing, waited 0.000 s)"
