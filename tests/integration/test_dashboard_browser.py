"""The dashboard in a real browser (headless Chromium from Debian's packages, driven by
Selenium) against a real backend with data: every page loads, and clicking pause,
resume, run now and replay changes the backend. With ``TICKWORK_SCREENSHOTS=DIR`` the
main pages are saved there as PNG (how the screenshots in docs/ are made)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.support.browser import browser, served
from tests.support.graphs import mesh, mesh_name
from tests.support.helpers import running, wait_for
from tickwork.dashboard import create_dashboard
from tickwork.scheduler import App, Call, RetryPolicy, graph
from tickwork.triggers import Cron

pytestmark = pytest.mark.slow


def _click(driver: Any, action: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'button[data-action="{action}"]').click()


def _follow(driver: Any, text: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.LINK_TEXT, text).click()


def _shot(driver: Any, name: str) -> None:
    if where := os.environ.get("TICKWORK_SCREENSHOTS"):
        driver.save_screenshot(str(Path(where) / f"dashboard-{name}.png"))


def test_pages_load_and_buttons_change_the_backend(app: App) -> None:
    @app.task
    def report() -> None: ...

    @app.task(retry=RetryPolicy(retries=0))
    def sync_crm(account: int) -> None:
        raise ConnectionError(f"CRM refused account {account}")

    app.enqueue(Call(report.name, key="daily-report", trigger=Cron("0 9 * * *", tz="Europe/Paris")))
    for account in (42, 43, 44, 45):
        app.enqueue(Call(sync_crm.name, (account,)))
    with running(app):
        wait_for(lambda: len(app.backend.poison.list()) == 4)
    # the order of failures is the claims' (random over Cassandra's shards): pick by account
    (poisoned,) = [r for r in app.backend.poison.list() if r.failure.message.endswith(" 42")]
    others = [r for r in app.backend.poison.list() if r != poisoned]
    with served(create_dashboard(app)) as base, browser() as driver:
        driver.get(base + "/")
        assert "tickwork · Queues" in driver.title
        # the charts of the last hour: the four failed runs the worker logged when it stopped
        bars = driver.find_elements(By.CSS_SELECTOR, "#throughput-chart g.minute")
        assert len(bars) == 60
        assert sum(int(bar.get_attribute("data-failed") or 0) for bar in bars) == 4
        assert driver.find_element(By.ID, "lateness-chart").is_displayed()
        _shot(driver, "queues")
        _click(driver, "/queues/default/pause")
        wait_for(lambda: "paused default" in driver.page_source, 10)
        assert app.backend.queues.paused() == ["default"]
        _click(driver, "/queues/default/resume")
        wait_for(lambda: "resumed default" in driver.page_source, 10)
        assert app.backend.queues.paused() == []

        driver.get(base + "/schedules")
        assert "daily-report" in driver.page_source
        assert "T09:00+01:00 Europe/Paris" in driver.page_source, "next run in its timezone"
        _shot(driver, "schedules")
        _click(driver, "/schedules/default/daily-report/pause")
        wait_for(lambda: "paused daily-report" in driver.page_source, 10)
        paused = app.get(key="daily-report")
        assert paused is not None and paused.message.paused_at is not None
        _click(driver, "/schedules/default/daily-report/resume")
        wait_for(lambda: "resumed daily-report" in driver.page_source, 10)
        _click(driver, "/schedules/default/daily-report/run")
        wait_for(lambda: "runs now as" in driver.page_source, 10)
        with running(app):
            wait_for(lambda: len(app.schedules.history("daily-report")) == 1)
        driver.get(base + "/schedules")
        _follow(driver, "succeeded")  # the last outcome links to the schedule's history
        wait_for(lambda: 'id="history"' in driver.page_source, 10)
        assert "manual" in driver.page_source and "succeeded" in driver.page_source
        _shot(driver, "history")

        driver.get(base + "/poison")
        assert "CRM refused account 42" in driver.page_source
        _shot(driver, "poison")
        _click(driver, f"/poison/{poisoned.envelope.id}/replay")
        wait_for(lambda: f"replayed {poisoned.envelope.id}" in driver.page_source, 10)
        assert {r.envelope.id for r in app.backend.poison.list()} == {o.envelope.id for o in others}
        # a filter typed into the form, then everything it matches purged
        driver.find_element(By.NAME, "text").send_keys("account 43")
        driver.find_element(By.CSS_SELECTOR, "#poison-filter button").click()
        wait_for(lambda: "1 matching" in driver.page_source, 10)
        _click(driver, "/poison-selection/purge")
        wait_for(lambda: "purged 1 matching the filter" in driver.page_source, 10)
        # two boxes ticked by hand, then replayed together
        driver.get(base + "/poison")
        for box in driver.find_elements(By.CSS_SELECTOR, 'input[type="checkbox"][name="id"]'):
            box.click()
        _click(driver, "/poison-selection/replay")
        wait_for(lambda: "replayed 2 of 2 ticked" in driver.page_source, 10)
        assert app.backend.poison.list() == []

        for page in ("/workers", "/limits", "/message?key=daily-report", "/workflow"):
            driver.get(base + page)
            assert "tickwork ·" in driver.title and "Traceback" not in driver.page_source


def test_the_workflow_page_draws_a_graph_of_200_steps(sqlite_app: App) -> None:
    app = sqlite_app

    started_last_level: list[int] = []

    @app.task
    def step(level: int, place: int) -> int:
        if (level, place) == (19, 3):
            # it fails once the others of its level started: the stop holds none of them
            wait_for(lambda: len(started_last_level) == 9, 60)
            raise ValueError("the last level fails once")
        if level == 19:
            started_last_level.append(place)
        return level

    handle = app.enqueue(graph(mesh(10, 20, lambda lv, p: step.si(lv, p))))

    def settled() -> bool:  # the failure may be poisoned before its level's others end
        view = app.batches.workflow(handle)
        return view is not None and "199 succeeded, 1 failed, 0 pending" in view.summary

    with running(app, concurrency=8):
        wait_for(lambda: len(app.backend.poison.list()) == 1 and settled(), 60)
    with served(create_dashboard(app)) as base, browser() as driver:
        driver.get(f"{base}/workflow?id={handle}")
        steps = driver.find_elements(By.CSS_SELECTOR, "#graph g.step")
        assert len(steps) == 200
        assert len(driver.find_elements(By.CSS_SELECTOR, "#graph line.edge")) == 380
        assert len(driver.find_elements(By.CSS_SELECTOR, "#graph g.failed")) == 1
        failed = driver.find_element(By.CSS_SELECTOR, f'#graph g[data-step="{mesh_name(19, 3)}"]')
        assert "the last level fails once" in failed.find_element(
            By.TAG_NAME, "title"
        ).get_attribute("textContent")
        summary = driver.find_element(By.ID, "summary").text
        assert "199 succeeded, 1 failed" in summary and "stopped" in summary
        _shot(driver, "graph")
