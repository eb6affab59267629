"""The dashboard's hardening over a real backend: every response carries the security
headers (a page, a refusal, a redirect, a 404), a request body past the bound is a 413
with nothing changed (declared, or streamed in), and stored values that hold markup are
shown as text in a real browser, where no script of theirs runs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from tests.support.helpers import running, wait_for
from tickwork.api.hardening import CONTENT_SECURITY_POLICY, MAX_BODY_BYTES
from tickwork.api.security import Access
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, Call, RetryPolicy
from tickwork.triggers import Cron

#: markup a stored value may hold: each sets ``window.__xss`` if it ever runs
SCRIPT = "<script>window.__xss = 1</script>"
IMAGE = '"><img src=x onerror="window.__xss = 2">'
SVG = '<svg onload="window.__xss = 3"></svg>'


def _csrf(client: TestClient) -> str:
    page = client.get("/").text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_every_response_carries_the_security_headers(sqlite_app: App) -> None:
    client = TestClient(create_dashboard(sqlite_app, Access(token="s3cret")))
    answers = [
        client.get("/", auth=("", "s3cret")),
        client.get("/"),  # refused: no token
        client.get("/nowhere", auth=("", "s3cret")),
    ]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert answer.headers["x-frame-options"] == "DENY"
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
    assert [a.status_code for a in answers] == [200, 401, 404]
    cookie = answers[0].headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie


def test_a_request_body_past_the_bound_is_refused_with_nothing_changed(sqlite_app: App) -> None:
    app = sqlite_app

    @app.task
    def noop() -> None: ...

    noop.delay()  # the queue's row, with its pause button and the CSRF token
    client = TestClient(create_dashboard(app))
    token = _csrf(client)
    padding = "x" * (MAX_BODY_BYTES + 1)
    answer = client.post(
        "/queues/default/pause",
        data={"csrf": token, "next": "/", "pad": padding},
        follow_redirects=False,
    )
    assert answer.status_code == 413 and "larger than" in answer.text
    assert app.queues.paused() == []

    def streamed() -> Iterator[bytes]:  # no Content-Length: counted as it comes
        yield f"csrf={token}&next=/&pad=".encode()
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b"x" * 1024

    answer = client.post(
        "/queues/default/pause",
        content=streamed(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        follow_redirects=False,
    )
    assert answer.status_code == 413
    assert app.queues.paused() == []
    answer = client.post(
        "/queues/default/pause", data={"csrf": token, "next": "/"}, follow_redirects=False
    )
    assert answer.status_code == 303 and app.queues.paused() == ["default"]


@pytest.mark.slow
def test_stored_markup_renders_as_text_and_never_runs(sqlite_app: App) -> None:
    from selenium.webdriver.common.by import By

    from tests.support.browser import browser, served

    app = sqlite_app

    @app.task
    def report(title: str) -> None: ...

    @app.task(retry=RetryPolicy(retries=0))
    def fails(note: str) -> None:
        raise ValueError(f"bad input {SCRIPT}")

    @app.task(on_events="order.*")
    def book(event: dict[str, object]) -> None: ...

    key = f"k{IMAGE}"
    app.enqueue(Call(report.name, (SCRIPT,), key=key, trigger=Cron("0 9 * * *")))
    app.schedules.pause(key, note=SVG, actor=IMAGE)
    fails.delay(SVG)
    app.emit("order.placed", {"html": SCRIPT}, key=IMAGE)
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 1)
        wait_for(lambda: len(app.events.recent()) == 1)
    pages = [
        "/",
        "/schedules",
        f"/history?key={quote(key)}",
        f"/message?key={quote(key)}",
        "/poison",
        "/events",
    ]
    with served(create_dashboard(app)) as base, browser() as driver:
        for path in pages:
            driver.get(base + path)
            assert driver.execute_script("return window.__xss") is None, path
            assert not driver.find_elements(By.CSS_SELECTOR, "img[src=x]"), path
            assert not driver.find_elements(By.CSS_SELECTOR, "main script, body script"), path
        driver.get(f"{base}/message?key={quote(key)}")
        assert SCRIPT in driver.find_element(By.TAG_NAME, "body").text
        driver.get(f"{base}/history?key={quote(key)}")
        assert SVG in driver.find_element(By.TAG_NAME, "body").text
        driver.get(f"{base}/poison")
        assert f"bad input {SCRIPT}" in driver.find_element(By.TAG_NAME, "body").text
        driver.get(f"{base}/events")
        assert IMAGE in driver.find_element(By.TAG_NAME, "body").text
