"""Durable tasks (issue 50) on every backend: steps journaled and not run again when the
run starts over, sleeps that let go of the worker and survive its restart, a step's own
retries, a step failed for good raised where the handler may catch it, recorded values
the same on a replay, the error when the code changed under a run and the patch marker
that avoids it, a step whose value cannot be kept, an ``async def`` handler, a sleeping
run cancelled."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import running, wait_for
from tickwork import App, RetryPolicy, current_run
from tickwork.errors import InvalidMessage, StepFailed
from tickwork.scheduler.backends import State
from tickwork.scheduler.model.headers import PARENT
from tickwork.scheduler.runs.journal import JournalStore
from tickwork.testing import isolated

QUICK = RetryPolicy(retries=3, base_s=0.05, jitter=False)


class Seen:
    """What the steps and handlers did, from the worker's threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.values: list[Any] = []

    def call(self, name: str) -> int:
        with self.lock:
            self.calls[name] += 1
            return self.calls[name]

    def keep(self, value: Any) -> None:
        with self.lock:
            self.values.append(value)


def _journal(app: App, run_id: str) -> list[tuple[str, str, str]]:
    return [(e.kind, e.name, e.state) for e in JournalStore(app.backend.results).read(run_id)]


def test_a_run_started_again_does_not_run_its_journaled_steps(app: App) -> None:
    """The handler fails after two steps (outside them): the task's retry runs it again,
    the two steps return their journaled values, the third runs once."""
    seen = Seen()

    def step(name: str) -> dict[str, Any]:
        seen.call(name)
        return {"step": name, "n": (1, 2)}  # a tuple comes back a list, both times

    @app.task(durable=True, keep_result=True, retry=QUICK)
    def order(order_id: int) -> list[Any]:
        run = current_run()
        first = run.step("charge", step, f"charge {order_id}")
        second = run.step("reserve", step, f"reserve {order_id}")
        if run.attempt == 1:
            raise ConnectionError("the worker lost its connection here")
        third = run.step("ship", step, f"ship {order_id}")
        return [first, second, third]

    handle = order.delay(7)
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    assert seen.calls == Counter({"charge 7": 1, "reserve 7": 1, "ship 7": 1})
    assert handle.result()[0] == {"step": "charge 7", "n": [1, 2]}
    assert _journal(app, handle.id) == [
        ("step", "charge", "done"),
        ("step", "reserve", "done"),
        ("step", "ship", "done"),
    ]


def test_a_sleeping_run_lets_go_of_the_worker_and_resumes_after_a_restart(app: App) -> None:
    seen = Seen()

    @app.task(durable=True, keep_result=True)
    def remind(user: str) -> str:
        run = current_run()
        run.step("welcome", seen.call, f"welcome {user}")
        run.sleep(1.5)
        run.step("remind", seen.call, f"remind {user}")
        return "reminded"

    handle = remind.delay("ada")
    with running(app) as worker:
        wait_for(lambda: seen.calls["welcome ada"] == 1, timeout_s=30)
        wait_for(lambda: worker.stats.snoozed == 1, timeout_s=30)
        stored = app.get(id=handle.id)
        assert stored is not None and stored.state.value == "scheduled", "stored, not held"
    assert handle.status().value == "scheduled"
    with running(app):  # every worker stopped, a new one started
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    assert handle.result() == "reminded"
    assert seen.calls == Counter({"welcome ada": 1, "remind ada": 1})
    assert [kind for kind, _, _ in _journal(app, handle.id)] == ["step", "sleep", "step"]


def test_a_step_is_retried_by_its_own_policy_and_a_step_failed_for_good_is_caught(
    app: App,
) -> None:
    seen = Seen()

    def flaky() -> str:
        if seen.call("flaky") < 3:
            raise ConnectionError("carrier down")
        return "label"

    def refuse() -> None:
        seen.call("refund")
        raise PermissionError("card blocked")

    @app.task(durable=True, keep_result=True, retry=RetryPolicy(retries=0))
    def ship() -> str:
        run = current_run()
        label = run.step("label", flaky, retry=QUICK)
        try:
            run.step("refund", refuse, retry=1)
        except StepFailed as failed:
            return f"{label}; {failed.step} failed: {failed.error_type}: {failed.error}"
        return "not reached"

    handle = ship.delay()
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    assert handle.result() == "label; refund failed: PermissionError: card blocked"
    assert seen.calls == Counter({"flaky": 3, "refund": 2})
    assert _journal(app, handle.id) == [("step", "label", "done"), ("step", "refund", "failed")]


def test_a_run_waits_for_its_event_across_a_restart_and_another_times_out(app: App) -> None:
    seen = Seen()

    @app.task(durable=True, keep_result=True)
    def deliver(order_id: str) -> str:
        run = current_run()
        run.step("pack", seen.call, f"pack {order_id}")
        shipped = run.wait_for_event("order.shipped", key=order_id, timeout=60)
        if shipped is None:
            run.step("refund", seen.call, f"refund {order_id}")
            return "refunded"
        return f"shipped by {shipped['payload']['carrier']}"

    waiting = deliver.delay("A-1")
    other = deliver.delay("B-2")
    with running(app) as worker:
        wait_for(lambda: worker.stats.snoozed >= 2, timeout_s=30)
    # every worker stopped: the event is stored, and delivered by the next worker
    app.emit("order.shipped", {"carrier": "post"}, key="A-1")
    app.emit("order.shipped", {"carrier": "wrong key"}, key="C-3")
    with running(app):
        wait_for(lambda: waiting.status().value == "succeeded", timeout_s=30)
    assert waiting.result() == "shipped by post"
    assert seen.calls == Counter({"pack A-1": 1, "pack B-2": 1})
    assert other.status().value == "scheduled", "B-2 still waits: no event had its key"
    assert [kind for kind, _, _ in _journal(app, waiting.id)] == ["step", "wait"]


def test_a_wait_that_times_out_returns_none(sqlite_app: App) -> None:
    app = sqlite_app
    seen = Seen()

    @app.task(durable=True, keep_result=True)
    def deliver(order_id: str) -> str:
        run = current_run()
        if run.wait_for_event("order.shipped", key=order_id, timeout=0.5) is None:
            run.step("refund", seen.call, f"refund {order_id}")
            return "refunded"
        return "shipped"

    @app.task(durable=True)
    def too_long() -> None:
        current_run().wait_for_event("order.shipped", timeout=timedelta(days=31))

    handle = deliver.delay("B-2")
    too_long.delay()
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
        wait_for(lambda: len(app.backend.poison.list()) == 1, timeout_s=30)
    assert handle.result() == "refunded" and seen.calls == Counter({"refund B-2": 1})
    (poisoned,) = app.backend.poison.list()
    assert "a wait's timeout is more than 0 and at most 30 days, not 31 days" in (
        poisoned.failure.message
    )


def test_children_start_once_and_are_gathered_without_a_thread(app: App) -> None:
    """A run spawns three children and gathers them; it fails once after spawning (its
    replay gets the same children back, none started twice); a failed child raises
    ``StepFailed`` where the run gathers it."""
    seen = Seen()

    @app.task(keep_result=True)
    def resize(size: int) -> str:
        seen.call(f"resize {size}")
        return f"{size}px"

    @app.task(retry=RetryPolicy(retries=0))
    def broken(size: int) -> None:
        raise ValueError(f"no size {size}")

    @app.task(durable=True, keep_result=True, retry=QUICK)
    def album() -> Any:
        run = current_run()
        children = [run.spawn(resize.call(size)) for size in (64, 128, 256)]
        if run.attempt == 1:
            raise ConnectionError("lost after spawning")
        sizes = run.gather(children)
        try:
            run.gather([run.spawn(broken.call(1))])
        except StepFailed as failed:
            return [sizes, failed.error]
        return "not reached"

    handle = album.delay()
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=60)
    result = handle.result()
    sizes, error = result
    assert sizes == ["64px", "128px", "256px"]
    assert error.startswith("child ") and error.endswith(": no size 1")
    assert seen.calls == Counter({"resize 64": 1, "resize 128": 1, "resize 256": 1})
    kinds = [kind for kind, _, _ in _journal(app, handle.id)]
    assert kinds == ["spawn", "spawn", "spawn", "gather", "spawn", "gather"]


def test_a_child_that_ends_wakes_its_gathering_parent(pair_app: App) -> None:
    """The parent waits in ``gather`` with its next look far enough ahead; the child's
    end makes it due at once: it finishes before that look."""
    app = pair_app
    release = threading.Event()
    ended_at: list[int] = []

    @app.task(keep_result=True)
    def render() -> str:
        release.wait(60)
        return "rendered"

    @app.task(durable=True, keep_result=True)
    def publish() -> Any:
        run = current_run()
        value = run.gather([run.spawn(render.call())])
        ended_at.append(app.backend.now_ms())
        return value

    handle = publish.delay()
    looks: list[int] = []

    def waiting_with_a_look_ahead() -> bool:
        entries = JournalStore(app.backend.results).read(handle.id)
        gathers = [e for e in entries if e.kind == "gather" and e.state == "waiting"]
        until = gathers[0].until_ms if gathers else None
        if until is None or until - app.backend.now_ms() < 800:
            return False
        # the journal is written before the run is given back: a child that ends while
        # its parent is still running does not wake it (it is seen at the next look)
        stored = app.backend.messages.get(handle.id)
        if stored is None or stored.state != State.SCHEDULED:
            return False
        looks.append(until)
        return True

    with running(app, concurrency=2):
        wait_for(waiting_with_a_look_ahead, timeout_s=60)
        release.set()
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    assert handle.result() == ["rendered"]
    assert ended_at[-1] < looks[0], "the parent waited for its own look: no child woke it"


def test_a_child_acked_or_poisoned_makes_its_parent_due(pair_app: App) -> None:
    """The wake itself: a message naming a parent in its ``tickwork-parent`` header
    makes that parent (stored due in an hour) due now once it is acked, or poisoned."""
    app = pair_app

    @app.task
    def parent(n: int) -> None: ...

    @app.task(retry=RetryPolicy(retries=0))
    def child(fail: bool) -> None:
        if fail:
            raise ValueError("failed for good")

    later = [parent.call(n).options(delay=timedelta(hours=1)).delay() for n in range(3)]
    for handle, fail in ((later[0], False), (later[1], True)):
        header = json.dumps(["default", handle.id])
        child.call(fail).options(headers={PARENT: header}).delay()
    with running(app):
        wait_for(lambda: parent_done(app, later[0].id) and parent_done(app, later[1].id), 30)
        assert app.backend.messages.get(later[2].id) is not None  # not named: still later


def parent_done(app: App, message_id: str) -> bool:
    return app.backend.messages.get(message_id) is None  # ran (woken) and acked


def test_a_step_past_its_time_limit_fails_and_is_retried(sqlite_app: App) -> None:
    app = sqlite_app
    seen = Seen()
    release = threading.Event()

    def slow() -> str:
        if seen.call("slow") == 1:
            release.wait(10)  # the first attempt hangs past the limit
        return "done"

    async def slow_async() -> str:
        import asyncio

        if seen.call("slow async") == 1:
            await asyncio.sleep(10)
        return "done async"

    @app.task(durable=True, keep_result=True)
    def limited() -> str:
        return current_run().step("slow", slow, retry=QUICK, time_limit=0.3)

    @app.task(durable=True, keep_result=True)
    async def limited_async() -> str:
        return str(await current_run().astep("slow", slow_async, retry=1, time_limit=0.3))

    @app.task(durable=True, retry=RetryPolicy(retries=0))
    def hopeless() -> None:
        current_run().step("never", release.wait, 10, retry=0, time_limit=0.2)

    handles = [limited.delay(), limited_async.delay()]
    hopeless.delay()
    try:
        with running(app):
            done = lambda: all(h.status().value == "succeeded" for h in handles)  # noqa: E731
            wait_for(done, timeout_s=30)
            wait_for(lambda: len(app.backend.poison.list()) == 1, timeout_s=30)
    finally:
        release.set()
    assert [h.result() for h in handles] == ["done", "done async"]
    (poisoned,) = app.backend.poison.list()
    assert "step 'never' failed after 1 attempt: StepTimeLimitExceeded: step 'never' ran past" in (
        poisoned.failure.message
    )


def test_recorded_values_are_the_same_on_a_replay(app: App) -> None:
    seen = Seen()

    @app.task(durable=True, keep_result=True)
    def draw() -> None:
        run = current_run()
        seen.keep((run.now(), run.random()))
        run.sleep(0.2)

    handle = draw.delay()
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    first, second = seen.values
    assert first == second


def test_a_changed_step_stops_the_run_and_a_patch_marker_keeps_old_runs_on_their_path(
    app: App,
) -> None:
    seen = Seen()
    version = {"code": 1}

    @app.task(durable=True, retry=RetryPolicy(retries=0))
    def unguarded() -> None:
        run = current_run()
        run.step("a", seen.call, "a")
        run.step("b" if version["code"] == 1 else "b2", seen.call, "b")
        run.sleep(1.0)

    @app.task(durable=True, keep_result=True)
    def guarded(label: str) -> str:
        run = current_run()
        run.step("a", seen.call, f"{label} a")
        if version["code"] == 1:
            run.step("b", seen.call, f"{label} b")
        elif run.patched("new-b"):
            run.step("b2", seen.call, f"{label} b2")
        else:
            run.step("b", seen.call, f"{label} b")
        run.sleep(1.0)
        run.step("c", seen.call, f"{label} c")
        return label

    changed = unguarded.delay()
    old = guarded.delay("old")
    with running(app) as worker:
        wait_for(lambda: worker.stats.snoozed == 2, timeout_s=30)
    version["code"] = 2  # a deploy while both sleep
    new = guarded.delay("new")
    with running(app):
        wait_for(lambda: old.status().value == "succeeded", timeout_s=30)
        wait_for(lambda: new.status().value == "succeeded", timeout_s=30)
        wait_for(lambda: len(app.poison.list()) == 1, timeout_s=30)
    (poisoned,) = app.backend.poison.list()
    assert poisoned.envelope.id == changed and poisoned.failure.reason == "nondeterminism"
    assert "replayed step 'b2' at position 2, where its journal holds step 'b'" in (
        poisoned.failure.message
    )
    assert seen.calls["old b"] == 1 and seen.calls["old b2"] == 0 and seen.calls["old c"] == 1
    assert seen.calls["new b2"] == 1 and seen.calls["new b"] == 0
    assert [name for _, name, _ in _journal(app, new.id)] == ["a", "new-b", "b2", "sleep", "c"]


def test_a_step_whose_value_cannot_be_kept_fails_naming_the_step(app: App) -> None:
    @app.task(durable=True, retry=RetryPolicy(retries=0))
    def export() -> None:
        current_run().step("open", lambda: threading.Lock())

    export.delay()
    with running(app):
        wait_for(lambda: len(app.poison.list()) == 1, timeout_s=30)
    (poisoned,) = app.backend.poison.list()
    assert "the value of step 'open' cannot be kept: it is not JSON-encodable" in (
        poisoned.failure.message
    )


def test_an_async_handler_steps_and_sleeps(app: App) -> None:
    seen = Seen()

    async def fetch(page: int) -> list[int]:
        seen.call(f"fetch {page}")
        return [page] * 2

    @app.task(durable=True, keep_result=True)
    async def crawl(pages: int) -> int:
        run = current_run()
        total = 0
        for page in range(pages):
            total += sum(await run.astep(f"page {page}", fetch, page))
            if page == 1:
                run.sleep(0.3)
        return total

    handle = crawl.delay(3)
    with running(app):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    assert handle.result() == 6
    assert seen.calls == Counter({"fetch 0": 1, "fetch 1": 1, "fetch 2": 1})


def test_a_sleeping_run_can_be_cancelled(sqlite_app: App) -> None:
    app = sqlite_app
    seen = Seen()

    @app.task(durable=True)
    def nag() -> None:
        run = current_run()
        run.step("first", seen.call, "first")
        run.sleep(2.0)  # past the worker's lookahead (0.5 s): not claimed while it sleeps
        run.step("again", seen.call, "again")

    @app.task
    def sentinel() -> None:
        seen.call("sentinel")

    handle = nag.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.snoozed == 1, timeout_s=30)
        assert app.cancel(id=handle.id)
        sentinel.schedule(delay=2.5)  # due after the sleep would have ended
        wait_for(lambda: seen.calls["sentinel"] == 1, timeout_s=30)
    assert seen.calls["again"] == 0


def test_steps_in_a_task_that_is_not_durable_are_one_clear_error(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task(retry=RetryPolicy(retries=0))
    def plain() -> None:
        current_run().step("x", print)

    plain.delay()
    with running(app):
        wait_for(lambda: len(app.poison.list()) == 1, timeout_s=30)
    (poisoned,) = app.backend.poison.list()
    assert "is not durable: steps, sleeps and recorded values need @app.task(durable=True)" in (
        poisoned.failure.message
    )


@pytest.mark.parametrize("bad", ["yes please", 3])
def test_a_bad_durable_option_is_one_clear_error(sqlite_app: App, bad: Any) -> None:
    with pytest.raises(InvalidMessage, match=r"option durable=.* is not valid"):

        @sqlite_app.task(durable=bad)
        def job() -> None: ...


def test_a_drain_that_advances_the_test_clock_moves_through_a_ten_minute_sleep() -> None:
    """Under ``tickwork.testing``: each drain is a new burst worker (the one before
    stopped), and the clock moves with ``advance``: no real waiting."""
    app = App()
    seen = Seen()

    @app.task(durable=True, keep_result=True)
    def nap() -> str:
        run = current_run()
        run.step("before", seen.call, "before")
        run.sleep(timedelta(minutes=10))
        run.step("after", seen.call, "after")
        return "rested"

    with isolated(app) as tw:
        handle = nap.delay()
        assert tw.drain().outcomes == Counter({"snoozed": 1})
        assert tw.drain(advance=timedelta(minutes=9)).outcomes == Counter()
        assert tw.drain(advance=timedelta(minutes=1)).outcomes == Counter({"succeeded": 1})
        assert handle.result() == "rested"
    assert seen.calls == Counter({"before": 1, "after": 1})


def test_a_journal_is_stored_encrypted(app: App) -> None:
    """Through an ``Encryption`` hook a step's value is journaled encrypted: read back
    through the backend without the key, no byte of it is plain; the run replays it."""
    from tickwork.encryption import Encryption
    from tickwork.scheduler import open_backend
    from tickwork.scheduler.encryption import MAGIC
    from tickwork.scheduler.runs.journal import entry_id

    secret = "SECRET-durable-77"
    secure = App(app.settings.backend, hooks=[Encryption([Encryption.new_key()])])

    @secure.task(durable=True, keep_result=True)
    def keep() -> str:
        run = current_run()
        value = run.step("secret", lambda: secret)
        run.sleep(0.2)  # the replay reads it back through the key
        return str(value)

    handle = keep.delay()
    with running(secure):
        wait_for(lambda: handle.status().value == "succeeded", timeout_s=30)
    assert handle.result() == secret
    raw = open_backend(app.settings.backend)
    try:
        (stored,) = raw.results.get([entry_id(handle.id, 0)]).values()
        assert stored.startswith(MAGIC) and secret.encode() not in stored
    finally:
        raw.close()
    secure.close()


def test_a_journal_past_its_limits_is_refused_clearly(
    sqlite_app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's value over ``max_payload_bytes`` fails the run naming the step; a run
    asking for more entries than a journal holds fails with ``JournalFull`` (the limit
    lowered here from 10,000 so the test writes few)."""
    from tickwork.scheduler.runs import durable

    app = sqlite_app
    monkeypatch.setattr(durable, "MAX_JOURNAL_ENTRIES", 5)

    @app.task(durable=True, retry=RetryPolicy(retries=0))
    def huge() -> None:
        current_run().step("blob", lambda: "x" * (app.settings.max_payload_bytes + 1))

    @app.task(durable=True, retry=RetryPolicy(retries=0))
    def endless() -> None:
        run = current_run()
        for n in range(10):
            run.step(f"s{n}", lambda: None)

    huge.delay()
    endless.delay()
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 2, timeout_s=30)
    errors = sorted(p.failure.message for p in app.backend.poison.list())
    assert any(
        "the value of step 'blob' cannot be kept:" in e and "-byte limit (max_payload_bytes)" in e
        for e in errors
    ), errors
    assert any("asked for journal entry 6: a durable run journals at most 5" in e for e in errors)
    reasons = {p.failure.reason for p in app.backend.poison.list()}
    assert "journal_full" in reasons


def test_a_durable_run_in_the_process_pool_asks_its_parent(
    sqlite_app: App, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    """``--pool process``: a child journals its steps, sleeps, spawns and gathers through
    its parent (it opens no storage of its own); run the user's way."""
    from tests.support import durable_process_tasks as tasks
    from tests.support.served import console_script

    url = sqlite_app.settings.backend
    done = tmp_path / "done.txt"
    tasks.app.use_backend(url)
    handle = tasks.pipeline.delay("p")
    tasks.app.close()
    env = {**clean_env, "TICKWORK_BACKEND": url, "TICKWORK_TEST_DONE": str(done)}
    module = "tests.support.durable_process_tasks"
    command = [console_script(), "worker", "-A", module, "--pool", "process", "-c", "2"]
    worker = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    app = App(url)
    try:
        wait_for(lambda: app.result(handle.id).status.value == "succeeded", timeout_s=60)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=60)
    assert worker.returncode == 0, errors
    assert app.result(handle.id).value == ["p first", "p second", [10, 20], True]
    bodies = Counter(line.rsplit(" ", 1)[0] for line in done.read_text().splitlines())
    assert bodies == Counter({"p first": 1, "p second": 1})
    app.close()
