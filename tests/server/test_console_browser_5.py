"""The console in headless Chromium, round five: what the selected run's facts say of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_console_browser import (
    _refund_question_row,
    browser,
    screenshot_on_failure,
    serve_demo,
    waiter,
)

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)


def test_a_graph_tasks_entry_is_said_to_be_a_task_of_its_graph_run(
    browser: Any, tmp_path: Path
) -> None:
    """The demo's refund question waits in a graph task, whose entry (``gt-...``) hangs under
    its graph run. Selected, the page said ``graph run, tenant default, started by
    refund-approval``: a run started by a run of the same name, where there is one graph run
    and this is a task of it. It says ``graph task``, of which graph run; the graph run itself
    is still a top-level ``graph run``."""
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(_refund_question_row)
        graph_run = row.get_attribute("data-root-run-id")
        row.click()
        kind = browser.find_element(By.ID, "run-kind")
        wait.until(lambda d: "graph task" in kind.text)
        assert kind.text == "graph task, tenant default, of graph run refund-approval", kind.text
        browser.find_element(
            By.CSS_SELECTOR, f'[data-testid="run-row"][data-run-id="{graph_run}"]'
        ).click()
        wait.until(lambda d: "top-level" in kind.text)
        assert kind.text == "graph run, tenant default, a top-level run", kind.text
