"""The dashboard over a real backend, through Starlette's test client: every page renders
with data; actions need the CSRF token of the page, the token when one is set, and are
refused in read-only mode; each action changes the backend."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.dashboard import Access, create_dashboard
from tickwork.scheduler import App, Call, RetryPolicy, batch, group
from tickwork.triggers import Cron, Repeating


@pytest.fixture
def seeded(app: App) -> Iterator[tuple[App, str]]:
    @app.task
    def tick() -> None: ...

    @app.task(retry=RetryPolicy(retries=0))
    def broken() -> None:
        raise ValueError("no good")

    @app.task
    def part(n: int) -> int:
        return n

    app.enqueue(Call(tick.name, key="every-hour", trigger=Repeating(interval=timedelta(hours=1))))
    app.enqueue(Call(broken.name))
    handle = app.batches.enqueue(batch(group([part.call(1), part.call(2)])))
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 1 and app.batches.get(handle).complete)
    yield app, handle


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page carries a CSRF token"
    return found.group(1)


def test_every_page_renders_with_data_and_actions_change_the_backend(
    seeded: tuple[App, str],
) -> None:
    app, _ = seeded
    client = TestClient(create_dashboard(app))
    home = client.get("/")
    assert home.status_code == 200 and "default" in home.text and "pause" in home.text
    assert "every-hour" in client.get("/schedules").text
    assert "no good" in client.get("/poison").text
    assert "no worker has registered" in client.get("/workers").text
    with running(app):
        wait_for(lambda: len(app.workers.live()) == 1)
        assert "alive" in client.get("/workers").text
    (poisoned,) = app.backend.poison.list()
    shown = client.get("/message", params={"key": "every-hour"})
    assert "every-hour" in shown.text and "every 1h" in shown.text
    token = _csrf(home.text)

    moved = client.post(
        "/queues/default/pause", data={"csrf": token, "next": "/"}, follow_redirects=False
    )
    assert moved.status_code == 303 and app.backend.queues.paused() == ["default"]
    page = client.get(moved.headers["location"])
    assert "paused default" in page.text and "resume" in page.text
    client.post("/queues/default/resume", data={"csrf": token, "next": "/"})
    assert app.backend.queues.paused() == []

    client.post("/schedules/default/every-hour/pause", data={"csrf": token, "next": "/schedules"})
    paused = app.get(key="every-hour")
    assert paused is not None and paused.message.paused_at is not None
    client.post(
        "/schedules/default/every-hour/resume",
        data={"csrf": token, "next": "/schedules", "misfire": "skip"},
    )
    resumed = app.get(key="every-hour")
    assert resumed is not None and resumed.message.paused_at is None
    ran = client.post("/schedules/default/every-hour/run", data={"csrf": token, "next": "/"})
    assert "runs now as" in ran.text

    client.post(f"/poison/{poisoned.envelope.id}/replay", data={"csrf": token, "next": "/poison"})
    assert app.backend.poison.list() == [] and app.get(id=poisoned.envelope.id) is not None
    client.post(f"/messages/{poisoned.envelope.id}/cancel", data={"csrf": token, "next": "/"})
    assert app.get(id=poisoned.envelope.id) is None


def test_a_whole_poisoned_queue_is_replayed_or_purged(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task(retry=RetryPolicy(retries=0))
    def flaky(n: int) -> None:
        raise RuntimeError(f"failed {n}")

    for n in range(3):
        flaky.delay(n)
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 3)
    client = TestClient(create_dashboard(app))
    page = client.get("/poison")
    assert "replay all" in page.text and "purge all" in page.text
    token = _csrf(page.text)
    done = client.post("/poison-queue/default/replay", data={"csrf": token, "next": "/poison"})
    assert "replayed 3 of default" in done.text and app.backend.poison.list() == []
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 3)
    done = client.post("/poison-queue/default/purge", data={"csrf": token, "next": "/poison"})
    assert "purged 3 of default" in done.text and app.backend.poison.list() == []
    assert app.backend.queues.stats("default")[0].ready == 0


def test_poisoned_messages_are_picked_by_hand_or_by_a_filter(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task(retry=RetryPolicy(retries=0))
    def flaky(n: int) -> None:
        raise RuntimeError(f"failed {n}")

    @app.task(retry=RetryPolicy(retries=0))
    def broken(n: int) -> None:
        raise KeyError(f"missing {n}")

    handles = [flaky.delay(n) for n in range(4)] + [broken.delay(n) for n in range(3)]
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 7)
    ids = [h.id for h in handles]
    client = TestClient(create_dashboard(app))
    # the filter narrows the page: by task, by a piece of the error
    page = client.get("/poison", params={"task": broken.name})
    assert "3 matching" in page.text and "missing 0" in page.text and "failed 0" not in page.text
    assert "1 matching" in client.get("/poison", params={"text": "FAILED 2"}).text
    token = _csrf(page.text)
    # two ticked boxes: replay one pair, purge another; the rest stay
    done = client.post(
        "/poison-selection/replay", data={"csrf": token, "next": "/poison", "id": ids[:2]}
    )
    assert "replayed 2 of 2 ticked" in done.text
    done = client.post(
        "/poison-selection/purge", data={"csrf": token, "next": "/poison", "id": ids[2:4]}
    )
    assert "purged 2 of 2 ticked" in done.text
    left = {r.envelope.id for r in app.backend.poison.list()}
    assert left == set(ids[4:]) and app.get(id=ids[0]) is not None and app.get(id=ids[2]) is None
    # everything a filter matches; an empty filter is refused rather than taken as "all"
    refused = client.post(
        "/poison-selection/purge", data={"csrf": token, "next": "/poison", "matching": "1"}
    )
    assert refused.status_code == 400 and len(app.backend.poison.list()) == 3
    matching = {"csrf": token, "next": "/poison", "matching": "1", "text": "missing 1"}
    done = client.post("/poison-selection/purge", data=matching)
    assert "purged 1 matching the filter" in done.text
    matching.update(text="", task=broken.name)
    done = client.post("/poison-selection/replay", data=matching)
    assert "replayed 2 matching the filter" in done.text and app.backend.poison.list() == []
    # one message purged from its own row
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 4)
    done = client.post(f"/poison/{ids[0]}/purge", data={"csrf": token, "next": "/poison"})
    assert f"purged {ids[0]}" in done.text and len(app.backend.poison.list()) == 3


def test_a_backfill_from_the_page_reads_times_in_the_schedules_zone(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def morning() -> None: ...

    app.enqueue(Call(morning.name, key="tokyo-9", trigger=Cron("0 9 * * *", tz="Asia/Tokyo")))
    client = TestClient(create_dashboard(app))
    page = client.get("/schedules")
    assert 'action="/schedules/default/tokyo-9/backfill"' in page.text and "Asia/Tokyo" in page.text
    form = {"csrf": _csrf(page.text), "next": "/schedules"}
    # 08:30 to 09:30 on the wall in Tokyo holds one occurrence (read as UTC it would hold none)
    span = {"start": "2026-11-20T08:30", "end": "2026-11-20T09:30"}
    done = client.post("/schedules/default/tokyo-9/backfill", data={**form, **span})
    assert "1 occurrence(s) in the range, enqueued 1, 0 backfilled before" in done.text
    done = client.post("/schedules/default/tokyo-9/backfill", data={**form, **span})
    assert "enqueued 0, 1 backfilled before" in done.text
    bad = client.post("/schedules/default/tokyo-9/backfill", data={**form, "start": "soon"})
    assert "error: backfill needs a start and an end time" in bad.text


def test_mounted_under_a_prefix_its_links_and_actions_stay_under_it(sqlite_app: App) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = sqlite_app

    @app.task
    def tick() -> None: ...

    app.enqueue(Call(tick.name, key="every-hour", trigger=Repeating(interval=timedelta(hours=1))))
    host = Starlette(routes=[Mount("/ops/tickwork", app=create_dashboard(app))])
    client = TestClient(host)
    page = client.get("/ops/tickwork/schedules")
    assert page.status_code == 200 and "every-hour" in page.text
    assert 'href="/ops/tickwork/limits"' in page.text and 'href="/limits"' not in page.text
    assert 'class="here">Schedules' in page.text.replace('href="/ops/tickwork/schedules" ', "")
    pause = "/ops/tickwork/schedules/default/every-hour/pause"
    assert f'action="{pause}"' in page.text
    done = client.post(pause, data={"csrf": _csrf(page.text), "next": "/ops/tickwork/schedules"})
    assert done.url.path == "/ops/tickwork/schedules" and "paused every-hour" in done.text
    # a next page outside the mount is not followed: back to the dashboard's own root
    elsewhere = client.post(
        "/ops/tickwork/queues/default/pause", data={"csrf": _csrf(page.text), "next": "/admin"}
    )
    assert elsewhere.url.path == "/ops/tickwork/" and "paused default" in elsewhere.text


def test_a_workflow_page_shows_a_batch(seeded: tuple[App, str]) -> None:
    app, handle = seeded
    client = TestClient(create_dashboard(app))
    page = client.get("/workflow", params={"id": handle})
    assert "2 members: 2 succeeded, 0 failed, 0 pending" in page.text
    assert f"{handle}.1" in page.text
    missing = client.get("/workflow", params={"id": "nope"})
    assert "no batch or chain nope" in missing.text


def test_actions_need_the_csrf_token_of_the_page(sqlite_app: App) -> None:
    client = TestClient(create_dashboard(sqlite_app))
    client.get("/")
    refused = client.post("/queues/default/pause", data={"next": "/"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    forged = client.post("/queues/default/pause", data={"csrf": "guess", "next": "/"})
    assert forged.status_code == 403
    assert sqlite_app.backend.queues.paused() == []


def test_a_token_guards_every_page_and_read_only_serves_no_action(sqlite_app: App) -> None:
    guarded = TestClient(create_dashboard(sqlite_app, Access(token="s3cret")))
    assert guarded.get("/").status_code == 401
    assert guarded.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    basic = base64.b64encode(b"ops:s3cret").decode()
    page = guarded.get("/", headers={"Authorization": f"Basic {basic}"})
    assert page.status_code == 200
    headers = {"Authorization": "Bearer s3cret"}
    sqlite_app.backend.queues.pause("default")  # a queue to show, with a button
    token = _csrf(guarded.get("/", headers=headers).text)
    ok = guarded.post("/queues/default/resume", data={"csrf": token, "next": "/"}, headers=headers)
    assert ok.status_code == 200 and sqlite_app.backend.queues.paused() == []

    viewer = TestClient(create_dashboard(sqlite_app, Access(read_only=True)))
    assert "<button" not in viewer.get("/").text
    assert viewer.post("/queues/default/pause", data={"csrf": "x"}).status_code == 403
    assert sqlite_app.backend.queues.paused() == []


def test_actions_without_a_token_are_served_on_loopback_only() -> None:
    Access().check_binding("127.0.0.1")
    Access(token="t").check_binding("0.0.0.0")
    Access(read_only=True).check_binding("0.0.0.0")
    with pytest.raises(ValueError, match=r"without authentication on 0\.0\.0\.0"):
        Access().check_binding("0.0.0.0")


def test_the_history_page_shows_a_schedules_ledger(app: App) -> None:
    @app.task(retry=RetryPolicy(retries=1, base_s=0.05))
    def sync() -> None:
        if not getattr(sync, "failed", False):
            sync.failed = True  # type: ignore[attr-defined]
            raise ConnectionError("reset")

    sync.schedule(trigger=Repeating(interval=timedelta(milliseconds=300)), key="sync")
    with running(app):
        wait_for(lambda: len(app.schedules.history("sync")) >= 3)
    client = TestClient(create_dashboard(app))
    listing = client.get("/schedules").text
    assert "/history?key=sync&queue=default" in listing
    page = client.get("/history", params={"key": "sync", "queue": "default"}).text
    assert '<table id="history">' in page and "succeeded" in page
    assert "retried" in page and "ConnectionError: reset" in page
    assert "no history recorded for nope" in client.get("/history", params={"key": "nope"}).text
