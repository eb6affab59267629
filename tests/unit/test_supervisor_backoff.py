"""The supervisor's restart rule, without processes: a worker process that keeps dying
soon after its start waits 1 s, 2 s, 4 s ... up to 30 s before its next start; one that
lived 10 s or more starts again after 1 s; one that exited with 0 has finished; none is
restarted once the supervisor is stopping."""

from __future__ import annotations

import sys

from tickwork.workers.supervisor import Supervisor, _Child


def supervisor() -> Supervisor:
    return Supervisor(lambda index: [sys.executable, "-c", "pass"], processes=1)


def test_a_process_that_keeps_dying_waits_longer_each_time_up_to_30_s() -> None:
    boss, child = supervisor(), _Child(0)
    waits = []
    now = 100.0
    for _ in range(8):
        child.started_at = now
        now += 0.5  # died half a second after its start
        boss._exited(child, 1, now)
        assert child.restart_at is not None
        waits.append(child.restart_at - now)
        now = child.restart_at
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert not child.finished


def test_a_process_that_lived_long_enough_starts_again_after_1_s() -> None:
    boss, child = supervisor(), _Child(0, backoff_s=30.0)
    child.started_at = 0.0
    boss._exited(child, -9, 10.0)  # killed by SIGKILL after 10 s of work
    assert child.restart_at == 11.0
    assert child.backoff_s == 2.0  # a quick death next would wait 2 s


def test_an_exit_with_0_has_finished_and_is_not_restarted() -> None:
    boss, child = supervisor(), _Child(0)
    boss._exited(child, 0, 5.0)
    assert child.finished and child.restart_at is None


def test_nothing_is_restarted_once_the_supervisor_is_stopping() -> None:
    boss, child = supervisor(), _Child(0)
    boss._signals = 1
    boss._exited(child, 1, 5.0)
    assert child.restart_at is None and not child.finished
    assert boss._done(child)
