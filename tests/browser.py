"""A real headless Chromium for the page tests, driven by selenium through chromedriver.

Both come from the system's packages (Debian: chromium, chromium-driver; .ci/run installs them
as it installs Graphviz). Where either is missing, the tests that need a browser skip with the
reason. The browser runs with a fresh profile and no network features.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)


def chromium() -> Iterator[object]:
    """A selenium WebDriver on headless Chromium (a pytest fixture body)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    drv = shutil.which("chromedriver")
    if exe is None or drv is None:
        pytest.skip(
            "Chromium or chromedriver is not installed "
            "(apt-get install chromium chromium-driver; .ci/run installs them)"
        )
    profile = tempfile.mkdtemp(prefix="msc-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = exe
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(drv), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def script_errors(driver) -> list[str]:
    """Errors the page reported: uncaught exceptions and SEVERE console messages."""
    logs = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    caught = driver.execute_script("return window.__mscErrors || []")
    return logs + list(caught)
