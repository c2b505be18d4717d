"""The console in headless Chromium, round three (one browser session for the module: the
machine's cores are shared): an operator who has a run's id (from the CLI, a log, a
colleague) opens that run, though the tree lists only the newest trees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_console_browser import (
    _save_finished_runs,
    browser,
    screenshot_on_failure,
    serve_demo,
    waiter,
)

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)


def test_a_run_the_tree_does_not_list_is_opened_by_its_id(browser: Any, tmp_path: Path) -> None:
    """Thirty finished trees newer than the demo's fill the list (it shows twelve): the oldest
    of them was out of the console's reach (the page said to use ``tinyagents runs list
    --all``). Its id, typed in, selects it and shows it in the tree; an id of no run is
    refused with the server's reason, and nothing is selected."""
    from selenium.webdriver.common.by import By

    _save_finished_runs(tmp_path / "serve.db", 30)
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        wait.until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, '[data-testid="run-row"][data-run-id="old-0029"]'
            )
        )
        oldest = '[data-testid="run-row"][data-run-id="old-0000"]'
        assert not browser.find_elements(By.CSS_SELECTOR, oldest)

        field = browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-input"]')
        field.send_keys("no-such-run")
        browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-btn"]').click()
        wait.until(lambda d: "no such run" in d.find_element(By.ID, "toast").text)
        assert browser.find_element(By.ID, "detail-title").text == "No run selected"

        field.clear()
        field.send_keys("  old-0000 ")  # pasted with spaces around it
        browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-btn"]').click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == "old-0000")
        assert browser.find_element(By.ID, "run-status").text == "completed"
        row = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, oldest))
        # still there once the tree was polled again, and the selected one
        wait.until(
            lambda d: (
                d.find_element(By.CSS_SELECTOR, oldest).get_attribute("aria-pressed") == "true"
            )
        )
        assert row.get_attribute("data-status") == "completed"
