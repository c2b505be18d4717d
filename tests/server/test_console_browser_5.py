"""The console in headless Chromium, round five: what the selected run's facts say of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_console_browser import (
    _refund_question_row,
    browser,
    fresh,
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


def test_a_function_nodes_task_shows_only_the_controls_its_graph_run_takes(
    browser: Any, tmp_path: Path
) -> None:
    """The demo's refund task runs a function node (``approve_refund``): its graph run
    refuses a pause, a resume, an instruction or a narrowing of tools for it (only an agent
    node's run takes them), yet its entry showed those controls as for any run, each a
    command refused at once. The API's snapshot of the entry says what it takes
    (``accepts``), and the page offers only those: the others are disabled, with the reason
    shown, while Cancel and the question's answers stay. A run that takes everything (the
    demo's agent runs) keeps every control."""
    from selenium.webdriver.common.by import By

    refused = ("pause-btn", "resume-btn", "steer-btn", "tools-btn")
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(_refund_question_row)
        row.click()
        wait.until(lambda d: "graph task" in d.find_element(By.ID, "run-kind").text)
        note = browser.find_element(By.ID, "control-note")
        wait.until(lambda d: note.is_displayed())
        for control in refused:
            button = browser.find_element(By.ID, control)
            assert not button.is_enabled(), control
            assert "approve_refund" in button.get_attribute("title"), control
        assert "approve_refund" in note.text and "pause" in note.text, note.text
        assert browser.find_element(By.ID, "cancel-btn").is_enabled()
        assert not browser.find_element(By.ID, "steer-input").is_enabled()
        assert not browser.find_element(By.ID, "tools-input").is_enabled()
        assert browser.find_elements(By.CSS_SELECTOR, '[data-testid="approve-btn"]')

        agent = wait.until(fresh("orchestrator", child=False))
        run_id = agent.get_attribute("data-run-id")
        agent.click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == run_id)
        assert not note.is_displayed()
        for control in (*refused, "cancel-btn"):
            assert browser.find_element(By.ID, control).is_enabled(), control


def test_a_graph_runs_own_entry_shows_only_the_controls_it_takes(
    browser: Any, tmp_path: Path
) -> None:
    """The demo's graph run (``refund-approval``) refuses an instruction or a narrowing of
    tools for itself (only an agent node's run takes them), yet its entry showed Steer and
    Narrow tools as for any run. Its snapshot says what it takes (``accepts``): those two are
    disabled, saying so of the graph run itself, while Pause, Resume and Cancel stay."""
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(_refund_question_row)
        graph_run = row.get_attribute("data-root-run-id")
        browser.find_element(
            By.CSS_SELECTOR, f'[data-testid="run-row"][data-run-id="{graph_run}"]'
        ).click()
        kind = browser.find_element(By.ID, "run-kind")
        wait.until(lambda d: "top-level" in kind.text and kind.text.startswith("graph run"))
        note = browser.find_element(By.ID, "control-note")
        wait.until(lambda d: note.is_displayed())
        for control in ("steer-btn", "tools-btn"):
            button = browser.find_element(By.ID, control)
            assert not button.is_enabled(), control
            assert "this graph run" in button.get_attribute("title"), control
        assert "steer" in note.text and "narrow tools" in note.text, note.text
        assert "this graph run" in note.text and "pause" in note.text, note.text
        assert not browser.find_element(By.ID, "steer-input").is_enabled()
        assert not browser.find_element(By.ID, "tools-input").is_enabled()
        for control in ("pause-btn", "resume-btn", "cancel-btn"):
            assert browser.find_element(By.ID, control).is_enabled(), control
