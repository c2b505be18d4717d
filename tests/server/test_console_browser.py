"""The web console in a real browser: ``tinyagents serve --demo`` in a subprocess, Debian's
headless Chromium driven by Selenium.

A newcomer's minute: open the printed URL, pause a running sub-agent from the tree, see it
paused, resume it, steer it and see ``steering.applied`` in the timeline. Skips when Chromium
or its driver is missing (fails when ``CI=true``: ``make browser`` installs them).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
TINYAGENTS = Path(sys.executable).with_name("tinyagents")
#: Seconds each scripted demo model answer takes: a research child lives three of them.
THINK_S = "3"
WAIT_S = 60.0

pytestmark = pytest.mark.timeout(300)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need_browser() -> None:
    """Skip (or, under CI=true, fail) when Debian's chromium and chromedriver are missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    if missing:
        message = (
            f"{', '.join(missing)} missing: run `make browser` (Debian chromium, chromium-driver)"
        )
        if _in_ci():
            pytest.fail(f"CI=true and {message}", pytrace=False)
        pytest.skip(message)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def console_url(printed: str, port: int) -> str | None:
    """The console URL with its token, from what ``serve`` printed (None until it has both)."""
    urls = re.findall(r"https?://[^\s'\"]+", printed)
    for url in urls:
        if re.search(r"[#?&]token=", url):
            return url
    token = re.search(r"(?:Bearer|token:?)\s+([A-Za-z0-9_\-=+/.]{20,})", printed)
    if token and urls:
        return f"http://127.0.0.1:{port}/#token={token.group(1)}"
    return None


@pytest.fixture
def demo_server(tmp_path: Path) -> Iterator[tuple[str, Callable[[], str]]]:
    """``tinyagents serve --demo`` on a free port: (console URL with token, printed output)."""
    port = free_port()
    env = {**os.environ, "TINYAGENTS_DEMO_THINK_S": THINK_S, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(
        [
            str(TINYAGENTS),
            "serve",
            "--demo",
            "--port",
            str(port),
            "--store",
            f"sqlite:///{tmp_path / 'serve.db'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    lines: list[str] = []
    reader = threading.Thread(
        target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True
    )  # type: ignore[union-attr]
    reader.start()
    printed = lambda: "".join(lines)  # noqa: E731
    try:
        deadline = time.monotonic() + WAIT_S
        url = None
        while url is None or not _listening(port):
            assert proc.poll() is None, f"serve --demo exited:\n{printed()}"
            assert time.monotonic() < deadline, (
                f"serve --demo printed no URL with a token:\n{printed()}"
            )
            time.sleep(0.2)
            url = console_url(printed(), port)
        yield url, printed
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_pause_resume_and_steer_a_demo_child_from_the_console(
    demo_server: tuple[str, Callable[[], str]], browser: Any, tmp_path: Path
) -> None:
    url, printed = demo_server
    try:
        drive_console(browser, url, tmp_path)
    except BaseException:
        browser.save_screenshot(str(tmp_path / "console-failed.png"))
        print(printed())
        raise


def drive_console(driver: Any, url: str, tmp_path: Path) -> None:
    """What the test does in the page (also run by hand against a scratch server)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        driver, WAIT_S, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
    )
    token = re.search(r"token=([^&#]+)", url).group(1)  # type: ignore[union-attr]
    driver.get(url)
    wait.until(lambda d: d.find_element(By.ID, "app").is_displayed())
    # The token left the address bar and stays in this tab's session storage.
    assert "token" not in driver.current_url
    assert driver.execute_script("return sessionStorage.getItem('tinyagents.token')") == token

    for _ in range(3):
        if exercise_one_child(driver, wait, tmp_path):
            return
    pytest.fail("three demo children in a row finished before they could be paused and steered")


def exercise_one_child(driver: Any, wait: Any, tmp_path: Path) -> bool:
    """Pause, resume and steer one research child; False when it ended too early to finish."""
    from selenium.webdriver.common.by import By

    # A sub-agent early in its life, so it is still running for the whole exercise.
    row = wait.until(_fresh_child)
    run_id = row.get_attribute("data-run-id")
    row.click()
    wait.until(lambda d: d.find_element(By.ID, "run-id").text == run_id)

    def status(d: Any) -> str:
        return str(d.find_element(By.ID, "run-status").text)

    browser_click(driver, "pause-btn")
    pause = wait.until(lambda d: _sent(d, "pause"))
    assert pause["receipt"] == "accepted", pause
    wait.until(lambda d: status(d) in ("paused", *_FINISHED))
    if status(driver) != "paused":
        return False  # it ended before its next safe point: try the next tree's child
    row = driver.find_element(By.CSS_SELECTOR, f'[data-testid="run-row"][data-run-id="{run_id}"]')
    assert row.get_attribute("data-status") == "paused"

    browser_click(driver, "resume-btn")
    resume = wait.until(lambda d: _sent(d, "resume"))
    assert resume["receipt"] == "accepted", resume
    wait.until(lambda d: status(d) != "paused")

    driver.find_element(By.ID, "steer-input").send_keys("focus only on billing evidence")
    browser_click(driver, "steer-btn")
    steer = wait.until(lambda d: _sent(d, "steer"))
    assert steer["receipt"] == "accepted", steer
    cid = steer["correlation_id"]
    if wait.until(lambda d: _terminal(d, cid)) != "steering.applied":
        return False  # the child finished before the steer's boundary (it can, at its end)
    event = driver.find_element(
        By.CSS_SELECTOR,
        f'[data-testid="timeline-event"][data-type="steering.applied"][data-correlation-id="{cid}"]',
    )
    assert event.get_attribute("data-run-id") == run_id
    outcome = driver.find_element(
        By.CSS_SELECTOR,
        f'[data-testid="sent-command"][data-correlation-id="{cid}"] [data-testid="outcome"]',
    )
    assert "applied" in outcome.text
    shot = tmp_path / "console.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 0
    return True


_FINISHED = ("completed", "cancelled", "aborted", "limit_exceeded", "failed")


def browser_click(driver: Any, testid: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]').click()


def _fresh_child(driver: Any) -> Any:
    from selenium.webdriver.common.by import By

    for row in driver.find_elements(
        By.CSS_SELECTOR, '[data-testid="run-row"][data-status="running"]'
    ):
        if (
            row.get_attribute("data-agent") == "research"
            and row.get_attribute("data-depth") != "0"
            and int(row.get_attribute("data-model-calls") or 0) <= 1
        ):
            return row
    return False


def _sent(driver: Any, label: str) -> dict[str, str] | bool:
    """The newest command sent from the page whose label starts with ``label``, once it has a
    receipt."""
    from selenium.webdriver.common.by import By

    for row in driver.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]'):
        cells = row.find_elements(By.TAG_NAME, "td")
        if cells and cells[0].text.startswith(label):
            receipt = row.find_element(By.CSS_SELECTOR, '[data-testid="receipt"]').text
            if receipt == "sending…":
                return False
            return {"receipt": receipt, "correlation_id": row.get_attribute("data-correlation-id")}
    return False


def _terminal(driver: Any, cid: str) -> str | bool:
    from selenium.webdriver.common.by import By

    for kind in ("steering.applied", "steering.failed", "steering.superseded", "steering.rejected"):
        if driver.find_elements(
            By.CSS_SELECTOR,
            f'[data-testid="timeline-event"][data-type="{kind}"][data-correlation-id="{cid}"]',
        ):
            return kind
    return False
