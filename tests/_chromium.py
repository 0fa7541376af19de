"""Headless Chromium for the browser tests (the built book and a JupyterLab student copy).

Both open pages with the network cut off: every request goes through a proxy on a closed
port, and 127.0.0.1 is never proxied. Without Chromium a test skips, and fails in CI.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from _requirements import IN_CI

CLOSED_PORT_PROXY = "http://127.0.0.1:9"  # port 9 (discard) is closed: every proxied request fails


def unavailable(reason: str) -> None:
    """Skip the calling test, or fail it in CI, where nothing the test needs may be missing."""
    if IN_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def _find(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or (name if Path(name).is_file() else None)
        if found:
            return found
    return None


def start_chromium(window: tuple[int, int], *, extra_flags: tuple[str, ...] = (), page_load_timeout: int = 60):
    """A selenium Chrome driver for headless Chromium at ``window`` (width, height) pixels."""
    chromium = _find("chromium", "chromium-browser", "google-chrome")
    chromedriver = _find("chromedriver", "/usr/lib/chromium/chromedriver")
    if not (chromium and chromedriver):
        unavailable("Chromium not found: `apt-get install chromium chromium-driver` (CI installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={window[0]},{window[1]}",
        f"--proxy-server={CLOSED_PORT_PROXY}",
        *extra_flags,
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    browser.set_page_load_timeout(page_load_timeout)
    return browser
