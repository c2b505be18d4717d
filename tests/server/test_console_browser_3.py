"""The console in headless Chromium, round three (one browser session for the module: the
machine's cores are shared): an operator who has a run's id (from the CLI, a log, a
colleague) opens that run, though the tree lists only the newest trees; the selected run is
in the page's address (``#run=<id>``), so a reload, back and forward and a link shared open
it; a question's answer is sent with Enter."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from test_console_browser import (
    _refund_question_row,
    _save_finished_runs,
    _save_runs,
    _sent,
    _terminal,
    browser,
    screenshot_on_failure,
    serve_demo,
    waiter,
)

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)

#: A run id as the id rule allows it (no '/', ':' or bidi control), with what a URL or HTML
#: reads as syntax: a fragment's '#', '&run=' and '+', a '%' escape, quotes and markup.
ODD_ID = (
    'ø 𝄞 #x&run=old-0001+%41 \'q"<img src=x onerror="window.__pwned=1"><script>window.__pwned=2'
)


def _run_in_url(driver: Any) -> str | None:
    """The ``run`` of the page address's fragment, as a link reader decodes it."""
    values = parse_qs(urlsplit(driver.current_url).fragment).get("run")
    return values[0] if values else None


def test_a_run_is_opened_by_its_id_or_its_link_and_kept_across_a_reload(
    browser: Any, tmp_path: Path
) -> None:
    """Thirty finished trees newer than the demo's fill the list (it shows twelve): the oldest
    of them was out of the console's reach (the page said to use ``tinyagents runs list
    --all``). Its id, typed in, selects it and shows it in the tree; an id of no run is
    refused with the server's reason, and nothing is selected.

    A reload lost the selected run (and the commands sent): the selected run is the address's
    ``#run=<id>``, escaped whatever the id holds, so a reload, back and forward and a link
    given to someone else open that run; the commands sent are kept across a reload. Enter in
    a question's answer field did nothing: it approves, as the form's first button."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    _save_finished_runs(tmp_path / "serve.db", 30)
    _save_runs(
        tmp_path / "serve.db",
        [
            {
                "run_id": ODD_ID,
                "root_run_id": ODD_ID,
                "parent_run_id": None,
                "tenant_id": "default",
                "agent_id": "archived",
                "kind": "agent",
                "status": "completed",
                "created_at": "2000-01-01T00:00:00+00:00",
            }
        ],
    )
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
        assert _run_in_url(browser) is None

        field = browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-input"]')
        field.send_keys("no-such-run")
        browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-btn"]').click()
        wait.until(lambda d: "no such run" in d.find_element(By.ID, "toast").text)
        assert browser.find_element(By.ID, "detail-title").text == "No run selected"
        assert _run_in_url(browser) is None

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
        assert _run_in_url(browser) == "old-0000"
        assert "token" not in browser.current_url

        # an id holding URL and HTML syntax goes into the address escaped and comes back whole
        field.clear()  # (chromedriver types no character beyond the BMP, such as 𝄞: pasted)
        browser.execute_script("arguments[0].value = arguments[1]", field, ODD_ID)
        browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-btn"]').click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == ODD_ID)
        assert _run_in_url(browser) == ODD_ID

        def shows(run_id: str) -> Any:
            return lambda d: d.find_element(By.ID, "run-id").text == run_id

        browser.back()
        wait.until(shows("old-0000"))
        assert _run_in_url(browser) == "old-0000"
        browser.forward()
        wait.until(shows(ODD_ID))
        browser.refresh()
        wait.until(shows(ODD_ID))
        assert browser.find_element(By.ID, "run-status").text == "completed"

        # a link given to someone (this tab holds the token): the run it names is opened, one
        # written by hand too; a link to no run (an id can hold no '/') says so, selecting none
        base = url.split("#")[0]
        browser.get(f"{base}#run={quote('old-0001', safe='')}")
        wait.until(shows("old-0001"))
        browser.get(f"{base}#run={quote(ODD_ID, safe='')}")
        wait.until(shows(ODD_ID))
        browser.get(f"{base}#run=no/such'run")
        wait.until(lambda d: "no such run" in d.find_element(By.ID, "toast").text)
        wait.until(lambda d: d.find_element(By.ID, "detail-title").text == "No run selected")
        assert browser.execute_script("return window.__pwned === undefined")
        assert not browser.find_elements(By.CSS_SELECTOR, "#app img, #app script")

        # Enter in the answer field approves the question, its value sent
        question = wait.until(_refund_question_row)
        task_id = question.get_attribute("data-run-id")
        question.click()
        wait.until(shows(task_id))
        assert _run_in_url(browser) == task_id
        answer = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="answer-value"]')
        )
        answer.send_keys("12.00 EUR" + Keys.ENTER)
        approve = wait.until(lambda d: _sent(d, "approve"))
        assert approve["receipt"] == "accepted", approve
        assert wait.until(lambda d: _terminal(d, approve["correlation_id"])) == "steering.applied"
        sent = browser.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]')
        assert len(sent) == 1  # Enter sent one command

        # a reload keeps the commands sent from this tab, with their outcome
        browser.refresh()
        wait.until(shows(task_id))
        cid = approve["correlation_id"]
        kept = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR, f'[data-testid="sent-command"][data-correlation-id="{cid}"]'
            )
        )
        assert kept.get_attribute("data-outcome") == "steering.applied"
        assert "approve" in kept.text and "accepted" in kept.text
