"""The dashboard's pages update from the stream of runs' changes, without a reload, in a
real browser (headless Chromium), against the servers the docs start: ``tickwork
dashboard -A`` and ``tickwork worker -A``, each a process of its own. The queues page
lists each change as it comes and its queue table follows the work; a message's page
follows its run until it ended; the poison page gains a poisoned run, but leaves a table
alone while a box in it is ticked."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.support.backends import backend_url
from tests.support.browser import browser
from tests.support.helpers import wait_for
from tests.support.served import call_api, console_script, worker
from tests.support.servers import free_port, wait_for_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

APP = """
import time
from pathlib import Path

from tickwork import App, RetryPolicy

app = App()


@app.task(queue="mail")
def send(n: int) -> None:
    time.sleep(0.05)


@app.task(queue="mail", retry=RetryPolicy(retries=0))
def bounce(n: int) -> None:
    raise ValueError(f"no such mailbox {n}")


@app.task(queue="reports", keep_result=True)
def report(release: str) -> None:
    while not Path(release).exists():
        time.sleep(0.02)
"""


@pytest.fixture
def site(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """``tickwork dashboard -A lively`` (loopback, no token) and ``tickwork worker -A
    lively`` over a PostgreSQL schema of its own; the base URL, a folder and the env."""
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "lively.py").write_text(textwrap.dedent(APP))
    env = {
        **clean_env,
        "PYTHONPATH": f"{tmp_path / 'app'}:{ROOT}",
        "TICKWORK_BACKEND": backend_url("postgres", tmp_path),
    }
    port = free_port()
    command = [console_script(), "dashboard", "-A", "lively", "--port", str(port)]
    with worker("lively", tmp_path, env, "-Q", "mail", "-Q", "reports"):
        server = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_port(port)
            yield f"http://127.0.0.1:{port}", tmp_path, env
        finally:
            server.terminate()
            server.communicate(timeout=60)


def _enqueue(base: str, task: str, *args: Any) -> str:
    status, answer = call_api(base, "POST", "/messages", {"task": task, "args": list(args)})
    assert status == 200 and isinstance(answer, dict), answer
    return str(answer["id"])


def _text(driver: Any, element_id: str) -> str:
    """An element's text, read in one step in the page (the page swaps it as it updates:
    an element found, then read, may be gone in between)."""
    script = "const e = document.getElementById(arguments[0]); return e ? e.innerText : ''"
    return str(driver.execute_script(script, element_id))


def _live(driver: Any) -> None:
    wait_for(lambda: driver.find_element(By.TAG_NAME, "body").get_attribute("data-stream"), 30)
    driver.execute_script("window.notReloaded = true")


def test_the_queues_page_follows_the_work_without_a_reload(
    site: tuple[str, Path, dict[str, str]],
) -> None:
    base, _, _ = site
    with browser() as driver:
        driver.get(base + "/")
        assert "no queue has been written to yet" in _text(driver, "queues")
        _live(driver)
        sent = [_enqueue(base, "lively.send", n) for n in range(3)]

        def feed() -> str:
            return _text(driver, "live-feed")

        wait_for(lambda: all(f"{i}" in feed() for i in sent) and feed().count("succeeded") == 3, 30)
        wait_for(lambda: "mail" in _text(driver, "queues"), 30)
        assert driver.execute_script("return window.notReloaded") is True


def test_a_message_page_follows_its_run_until_it_ended(
    site: tuple[str, Path, dict[str, str]],
) -> None:
    base, folder, _ = site
    release = folder / "release"
    running = _enqueue(base, "lively.report", str(release))
    with browser() as driver:
        driver.get(f"{base}/message?id={running}")

        def state() -> str:
            return _text(driver, "message-state")

        _live(driver)
        assert running in state()
        release.touch()
        wait_for(lambda: "succeeded" in state(), 30)
        assert driver.execute_script("return window.notReloaded") is True


def test_the_poison_page_follows_failures_but_not_under_the_users_hand(
    site: tuple[str, Path, dict[str, str]],
) -> None:
    base, _, _ = site
    first = _enqueue(base, "lively.bounce", 1)
    with browser() as driver:
        find = driver.find_element

        def refreshes() -> int:
            return int(find(By.TAG_NAME, "body").get_attribute("data-refreshes") or 0)

        def refreshed_after(*tasks: str) -> None:
            """Enqueue each of ``tasks`` in turn and wait for a refresh after it."""
            for task in tasks:
                seen = refreshes()
                _enqueue(base, task, 0)
                wait_for(lambda seen=seen: refreshes() > seen, 30)  # type: ignore[misc]

        driver.get(f"{base}/poison")  # the first may not be poisoned yet: it is, live
        _live(driver)
        wait_for(lambda: first in _text(driver, "poison"), 30)
        second = _enqueue(base, "lively.bounce", 2)
        wait_for(lambda: second in _text(driver, "poison"), 30)
        assert driver.execute_script("return window.notReloaded") is True
        box = find(By.CSS_SELECTOR, f'tr[data-id="{first}"] input[type=checkbox]')
        box.click()  # the user picks a row to replay: the table stays as it is
        third = _enqueue(base, "lively.bounce", 3)
        wait_for(lambda: third in str(call_api(base, "GET", "/poison?queue=mail")[1]), 30)
        refreshed_after("lively.send", "lively.send")  # each fetched the page with it
        assert third not in _text(driver, "poison"), "the table changed under the user's hand"
        assert box.is_selected(), "the ticked box was swapped away"
        box.click()
        driver.execute_script("document.activeElement.blur()")  # the user is done
        refreshed_after("lively.send")
        wait_for(lambda: third in _text(driver, "poison"), 30)
