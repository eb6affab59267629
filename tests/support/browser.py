"""A real headless Chromium for the dashboard tests: Debian's ``chromium`` and
``chromium-driver`` packages (installed on first use, as Redis is), driven by Selenium;
and a dashboard served by uvicorn on a free loopback port."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.servers import ensure_debian_packages, free_port, wait_for_port

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def ensure_chromium_installed() -> None:
    ensure_debian_packages(["chromium", "chromedriver"], ["chromium", "chromium-driver"])


@contextmanager
def browser() -> Iterator[Any]:
    """A headless Chromium under Selenium, closed after the block."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    ensure_chromium_installed()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,900")
    service = Service(shutil.which("chromedriver") or DRIVER)
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def served(asgi_app: Any) -> Iterator[str]:
    """``asgi_app`` served by uvicorn on a free loopback port; its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(asgi_app, host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
