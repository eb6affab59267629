"""The crash loop's checker counts what its log shows: a clean run passes, and each kind
of fault it exists to catch fails it."""

from __future__ import annotations

from pathlib import Path

from tests.faults.checker import Verdict, check

CHAINS = {"repeating": "r.", "cron": "c."}


def verdict_of(tmp_path: Path, lines: list[str], bound: int = 4) -> Verdict:
    log = tmp_path / "runs"
    log.write_text("".join(f"{line}\n" for line in lines))
    verdict = Verdict("sqlite", 1.0, kills=1, enqueued=3, cancelled=1, duplicate_bound=bound)
    return check(log, must_run={1, 2, 3}, cancelled={4}, chains=CHAINS, verdict=verdict)


CLEAN = ["job 1", "tick r.1", "tick c.1", "kill 1", "job 2", "job 3", "tick r.2", "tick c.2"]


def test_a_clean_run_passes(tmp_path: Path) -> None:
    verdict = verdict_of(tmp_path, CLEAN)
    assert verdict.ok
    assert verdict.fires == {"repeating": 2, "cron": 2}
    assert verdict.after_last_kill == {"repeating": 1, "cron": 1}


def test_a_message_that_never_ran_is_lost(tmp_path: Path) -> None:
    verdict = verdict_of(tmp_path, [line for line in CLEAN if line != "job 2"])
    assert (verdict.lost, verdict.lost_ids, verdict.ok) == (1, [2], False)


def test_a_cancelled_run_and_a_stray_tick_are_unexpected(tmp_path: Path) -> None:
    verdict = verdict_of(tmp_path, [*CLEAN, "job 4", "tick x.1"])
    assert (verdict.unexpected, verdict.unexpected_ids, verdict.ok) == (2, ["4", "x.1"], False)


def test_duplicates_pass_within_the_bound_only(tmp_path: Path) -> None:
    twice = [*CLEAN, "job 1", "tick r.2"]
    within = verdict_of(tmp_path, twice, bound=2)
    assert (within.duplicates, within.fired_twice["repeating"], within.ok) == (1, 1, True)
    assert not verdict_of(tmp_path, twice, bound=1).ok


def test_a_chain_that_stopped_before_the_last_kill_fails(tmp_path: Path) -> None:
    verdict = verdict_of(tmp_path, [line for line in CLEAN if line != "tick c.2"])
    assert verdict.after_last_kill["cron"] == 0
    assert not verdict.ok
