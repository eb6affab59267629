"""The example Django project (``examples/django_site``) as its users run it: migrate,
``runserver``, a view that saves an order and enqueues in one ``atomic()``, the worker
through ``manage.py tickwork worker``, and the dashboard behind Django's login in a real
headless browser. Each step is its own process, as in production."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.support.browser import browser
from tests.support.helpers import wait_for
from tests.support.servers import free_port, wait_for_port

pytestmark = pytest.mark.slow

SITE = Path(__file__).resolve().parents[2] / "examples" / "django_site"
PASSWORD = "example-password"


def _manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=SITE,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def site(tmp_path: Path, clean_env: dict[str, str]) -> Iterator[tuple[str, dict[str, str]]]:
    """The site migrated, with a superuser, served by runserver: (base URL, env)."""
    env = {**clean_env, "DJANGO_SITE_DATA": str(tmp_path)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    _manage(env, "migrate", "--verbosity", "0")
    _manage(
        {**env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD},
        "createsuperuser",
        "--noinput",
        "--username",
        "admin",
        "--email",
        "admin@example.com",
    )
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=SITE,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, 60)
        yield f"http://127.0.0.1:{port}", env
    finally:
        server.terminate()
        server.wait(30)


def _json(url: str, data: dict[str, Any] | None = None) -> tuple[int, Any]:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, body, {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, None


def test_an_order_is_saved_and_confirmed_by_the_worker(site: tuple[str, dict[str, str]]) -> None:
    base, env = site
    status, placed = _json(f"{base}/orders/", {"customer": "ada"})
    assert status == 201
    status, _ = _json(f"{base}/orders/", {"customer": "bob", "refuse_payment": True})
    assert status == 402
    assert _json(f"{base}/orders/{placed['order'] + 1}/")[0] == 404, "bob's order rolled back"
    _, before = _json(f"{base}/orders/{placed['order']}/?job={placed['job']}")
    assert before["confirmed"] is False and before["job"]["status"] == "ready"
    _manage(env, "tickwork", "worker", "--burst", "--log-level", "warning")
    _, after = _json(f"{base}/orders/{placed['order']}/?job={placed['job']}")
    assert after["confirmed"] is True
    assert after["job"] == {"status": "succeeded", "value": "confirmation sent to ada"}
    stats = json.loads(_manage(env, "tickwork", "--json", "stats"))
    default = next(q for q in stats if q["queue"] == "default")
    # ada's two messages and the periodic task's first run; none of bob's
    assert default["counters"]["acked"] == 3
    schedules = _manage(env, "tickwork", "--json", "schedules")
    assert "tidy_carts" in schedules, "the periodic task, installed by the worker"


def test_the_dashboard_is_behind_djangos_login(site: tuple[str, dict[str, str]]) -> None:
    base, _ = site
    _json(f"{base}/orders/", {"customer": "ada"})
    with browser() as driver:
        driver.get(f"{base}/tickwork/")
        assert "/accounts/login/" in driver.current_url
        driver.find_element(By.NAME, "username").send_keys("admin")
        driver.find_element(By.NAME, "password").send_keys(PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: "tickwork · Queues" in driver.title, 20)
        driver.find_element(By.CSS_SELECTOR, 'button[data-action="/queues/default/pause"]').click()
        wait_for(lambda: "paused default" in driver.page_source, 20)
        driver.find_element(By.LINK_TEXT, "Schedules").click()
        wait_for(lambda: "tickwork · Schedules" in driver.title, 20)
