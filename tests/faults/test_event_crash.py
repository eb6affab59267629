"""Fault test: events emitted while workers are SIGKILLed again and again are each
delivered to each subscriber: every (event, subscriber) pair runs, an event emitted
twice under one id (a producer's retry) is delivered once, and a pair runs more than once
only when a killed worker ran it, or ran the fan-out that wrote it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.faults.killing import KillLoop
from tests.faults.sizes import sized
from tests.support.backends import BACKEND_NAMES, backend_url
from tests.support.helpers import wait_until
from tickwork.scheduler import App
from tickwork.scheduler.ids import identity_chain_id

N = sized(400, 150)  # events: order.* reach both subscribers, the others only ``audit``
MODULE = "tests.support.event_tasks"


def _expected() -> set[tuple[str, str]]:
    pairs = set()
    for n in range(N):
        pairs.add((f"ev-{n}", "audit"))
        if n % 2 == 0:
            pairs.add((f"ev-{n}", "ledger"))
    return pairs


@pytest.mark.parametrize("backend_name", BACKEND_NAMES)
def test_events_reach_each_subscriber_through_sigkills(
    backend_name: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    from tests.support.event_tasks import app as tasks_app

    url = backend_url(backend_name, tmp_path)
    done = tmp_path / "done.txt"
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    tasks_app.use_backend(url)
    tasks_app.events.install()
    expected = _expected()

    def produce() -> None:
        for n in range(N):
            name = "order.placed" if n % 2 == 0 else "user.seen"
            tasks_app.emit(name, {"n": n}, key=f"k{n}", event_id=f"ev-{n}")
            if n % 10 == 0:  # a producer's retry: the same event id again
                tasks_app.emit(name, {"n": n}, key=f"k{n}", event_id=f"ev-{n}")

    producer = threading.Thread(target=produce)
    loop = KillLoop(env, tmp_path, MODULE)
    killed = loop.killed
    app = App(url)
    try:
        producer.start()
        loop.rounds(4, lambda round_: _reached(done, (round_ + 1) * len(expected) // 6))
        producer.join(120)
        loop.start_last()
        delivered = wait_until(lambda: _pairs(done) >= expected, 240)
        assert delivered, _missing(app, expected - _pairs(done))
        assert wait_until(lambda: _idle(app), 60)  # killed leases expired and redelivered
    finally:
        producer.join(120)
        loop.stop()
        tasks_app.close()
    runs, fanouts = _runs(done)
    assert set(runs) == expected, "each event reached each of its subscribers, no other"
    event_of_message = {identity_chain_id("default", f"event:ev-{n}"): f"ev-{n}" for n in range(N)}
    fanned_by_killed = {
        event_of_message[message]
        for message, pids in fanouts.items()
        if any(pid in killed for pid in pids)
    }
    for (event, task), pids in runs.items():
        live = [pid for pid in pids if pid not in killed]
        # twice only because of a kill: of the run itself, or of the fan-out that wrote it
        assert len(live) <= 1 or event in fanned_by_killed, (event, task, pids)
    reruns = sum(len(pids) - 1 for pids in runs.values())
    print(f"{backend_name}: {len(expected)} deliveries, {len(killed)} killed, {reruns} reruns")
    app.close()


def _runs(done: Path) -> tuple[dict[tuple[str, str], list[int]], dict[str, list[int]]]:
    """Each (event, subscriber)'s runs and each event message's fan-outs: the pids."""
    runs: dict[tuple[str, str], list[int]] = {}
    fanouts: dict[str, list[int]] = {}
    if done.exists():
        for line in done.read_text().splitlines():
            first, what, pid = line.split()
            if what == "fanout":
                fanouts.setdefault(first, []).append(int(pid))
            else:
                runs.setdefault((first, what), []).append(int(pid))
    return runs, fanouts


def _missing(app: App, missing: set[tuple[str, str]]) -> str:
    """What the failure says: the pairs missing, and what the poison queue holds."""
    poisoned = [
        (r.envelope.id, r.failure.error_type, r.failure.message) for r in app.backend.poison.list()
    ]
    return f"{len(missing)} not delivered, e.g. {sorted(missing)[:5]}; poisoned: {poisoned[:5]}"


def _pairs(done: Path) -> set[tuple[str, str]]:
    return set(_runs(done)[0])


def _reached(done: Path, target: int) -> bool:
    return len(_pairs(done)) >= target


def _idle(app: App) -> bool:
    stats = app.backend.queues.stats()
    return all(
        s.ready + s.scheduled + s.in_flight == 0
        for s in stats
        if not s.queue.startswith("tickwork.")
    )
