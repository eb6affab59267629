"""How many of a thread pool's threads take work, decided window by window
(``workers/pools/thread_tuning.py``): the tuner alone, fed windows."""

from __future__ import annotations

from tickwork.workers.pools.thread_tuning import (
    FLOOR,
    HOLD_WINDOWS,
    KEEP_SHARE,
    SLOW_RUN_S,
    ThreadTuner,
    Window,
)


def busy(rate: float = 10_000.0) -> Window:
    """Work waits, the process keeps a core busy, every run is fast."""
    return Window(backlog=True, cpu_share=1.05, rate=rate, oldest_run_s=0.0001)


def test_a_new_tuner_lets_every_thread_take_work() -> None:
    assert ThreadTuner(8).limit == 8


def test_fast_handlers_on_a_busy_core_are_halved_down_to_the_floor_and_no_further() -> None:
    tuner = ThreadTuner(8)
    assert [tuner.step(busy()) for _ in range(5)] == [4, 2, 2, 2, 2]
    assert tuner.limit == FLOOR


def test_with_no_work_waiting_nothing_changes() -> None:
    tuner = ThreadTuner(8)
    idle = Window(backlog=False, cpu_share=1.5, rate=0.0, oldest_run_s=10.0)
    assert [tuner.step(idle) for _ in range(3)] == [8, 8, 8]
    tuner.step(busy())
    assert [tuner.step(idle) for _ in range(3)] == [4, 4, 4]


def test_a_halving_that_costs_more_than_a_tenth_of_the_rate_is_undone_and_held() -> None:
    tuner = ThreadTuner(8)
    assert tuner.step(busy(rate=10_000)) == 4
    assert tuner.step(busy(rate=10_000 * KEEP_SHARE - 1)) == 8  # undone
    for _ in range(HOLD_WINDOWS):  # held: no halving tried meanwhile
        assert tuner.step(busy(rate=10_000)) == 8
    assert tuner.step(busy(rate=10_000)) == 4  # then tried again


def test_a_halving_that_keeps_the_rate_is_kept() -> None:
    tuner = ThreadTuner(8)
    assert tuner.step(busy(rate=10_000)) == 4
    assert tuner.step(busy(rate=10_000 * KEEP_SHARE + 1)) == 2


def test_handlers_waiting_on_io_double_the_number_back_up_to_the_pool_size() -> None:
    tuner = ThreadTuner(8)
    tuner.step(busy())
    tuner.step(busy())
    assert tuner.limit == 2
    waiting = Window(backlog=True, cpu_share=0.2, rate=500.0, oldest_run_s=0.01)
    assert [tuner.step(waiting) for _ in range(3)] == [4, 8, 8]


def test_a_slow_run_doubles_the_number_even_on_a_busy_core_and_holds_it() -> None:
    """Slow handlers that keep the core busy would otherwise be halved and doubled
    window after window."""
    tuner = ThreadTuner(8)
    tuner.step(busy())
    slow = Window(backlog=True, cpu_share=1.0, rate=100.0, oldest_run_s=SLOW_RUN_S)
    assert tuner.step(slow) == 8
    for _ in range(HOLD_WINDOWS):
        assert tuner.step(busy(rate=100.0)) == 8
    assert tuner.step(busy(rate=100.0)) == 4


def test_old_runs_among_all_the_threads_do_not_stop_a_halving() -> None:
    """Eight threads of fast handlers wait long for the interpreter lock: a run's age
    there is no sign of a slow handler."""
    tuner = ThreadTuner(8)
    convoy = Window(backlog=True, cpu_share=1.0, rate=2_000.0, oldest_run_s=SLOW_RUN_S * 2)
    assert tuner.step(convoy) == 4


def test_a_core_busy_but_not_full_holds_the_number() -> None:
    tuner = ThreadTuner(8)
    between = Window(backlog=True, cpu_share=0.7, rate=5_000.0, oldest_run_s=0.001)
    assert [tuner.step(between) for _ in range(3)] == [8, 8, 8]
