"""The console in headless Chromium, round seven: a tenant with no runs, a run with thousands
of events, keyboard-only steering and the names every control is announced by."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_console_browser import (
    _save_runs,
    _sent,
    browser,
    fresh,
    pause_a_research_child,
    screenshot_on_failure,
    serve_demo,
    token_cli,
    waiter,
)

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)

ROWS = '[data-testid="run-row"]'


def _resources(driver: Any, path: str) -> int:
    """How many requests the page made whose URL holds ``path``."""
    return int(
        driver.execute_script(
            "return performance.getEntriesByType('resource')"
            ".filter(e => e.name.includes(arguments[0])).length",
            path,
        )
    )


def test_a_tenant_with_no_runs_sees_an_empty_tree_that_says_so(
    browser: Any, tmp_path: Path
) -> None:
    """A token of a tenant that has started nothing yet, on a server whose other tenant is
    busy (the demo's): the page says there are no runs yet, with what to do, for poll after
    poll; no run of the other tenant ever shows, and opening one by its id is told it is no
    run of this token's, the page left as it was."""
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        # a demo run of the default tenant, to ask for by its id
        browser.get(url)
        other = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ROWS)).get_attribute(
            "data-run-id"
        )
        token = token_cli(
            tmp_path, "mint", "--tenant", "newcomer", "--user", "nina",
            "--rights", "agent:observe,agent:control",
        )  # fmt: skip
        browser.get("about:blank")
        browser.get(url.split("#")[0] + f"#token={token}")
        empty = browser.find_element(By.ID, "tree-empty")
        wait.until(lambda d: empty.is_displayed())
        assert "No runs yet" in empty.text, empty.text
        # poll after poll (each asks for /runs), the tree stays empty and says so
        polls = _resources(browser, "/api/agents/runs?")
        wait.until(lambda d: _resources(d, "/api/agents/runs?") >= polls + 6)
        assert empty.is_displayed()
        assert not browser.find_elements(By.CSS_SELECTOR, ROWS)
        assert not browser.find_element(By.ID, "tree-more").is_displayed()
        assert browser.find_element(By.ID, "detail-title").text == "No run selected"
        connection = browser.find_element(By.ID, "connection")
        assert "error" not in connection.get_attribute("class"), connection.text

        browser.find_element(By.ID, "open-run-input").send_keys(other)
        browser.find_element(By.CSS_SELECTOR, '[data-testid="open-run-btn"]').click()
        toast = browser.find_element(By.ID, "toast")
        wait.until(lambda d: "no such run" in toast.text)
        assert browser.find_element(By.ID, "detail-title").text == "No run selected"
        assert not browser.find_elements(By.CSS_SELECTOR, ROWS)
        assert empty.is_displayed()


#: Events of the chatty run written into the store before the server starts.
CHATTY_EVENTS = 3000


def _save_chatty_run(path: Path) -> None:
    """A finished run whose log holds ``CHATTY_EVENTS`` events: started, tool calls and
    results, completed."""
    from tinyagents.events import Event, RunEvent, ToolEvent
    from tinyagents.store import SqliteStore

    where = {"run_id": "chatty", "root_run_id": "chatty", "tenant_id": "default"}
    events: list[Event] = [RunEvent(type="run.started", agent_id="chatty", **where)]
    for i in range(CHATTY_EVENTS - 2):
        kind = "tool.call" if i % 2 == 0 else "tool.result"
        events.append(ToolEvent(type=kind, tool_call_id=f"t-{i // 2}", name="step", **where))
    events.append(RunEvent(type="run.completed", status="completed", **where))

    async def save() -> None:
        store = SqliteStore(path)
        await store.open()
        await store.append_events(events)
        await store.close()

    _save_runs(
        path,
        [
            {
                **where,
                "parent_run_id": None,
                "agent_id": "chatty",
                "kind": "agent",
                "status": "completed",
                "created_at": "2099-01-01T00:00:00+00:00",
            }
        ],
    )
    asyncio.run(save())


def test_a_run_with_thousands_of_events_shows_its_newest_and_keeps_the_tab_light(
    browser: Any, tmp_path: Path
) -> None:
    """A run whose log holds 3,000 events, opened by its link: the stream replays them all,
    the timeline keeps the newest 500 of them, newest first (its ``run.completed`` at the
    top), each once, and the page goes on answering (another run is picked and followed)."""
    from selenium.webdriver.common.by import By

    _save_chatty_run(tmp_path / "serve.db")
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url.split("#")[0] + "#run=chatty&" + url.split("#")[1])
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == "chatty")
        memory = "return window.tinyagentsConsole.memory()"
        ids = (
            "return [...document.querySelectorAll('[data-testid=\"timeline-event\"]')]"
            ".map(e => [Number(e.dataset.eventId), e.dataset.type])"
        )
        # the whole log replayed: the page saw the run's last event
        wait.until(
            lambda d: d.execute_script(ids)[:1] and d.execute_script(ids)[0][1] == "run.completed"
        )
        shown = browser.execute_script(ids)
        assert len(shown) == 500, len(shown)
        numbers = [i for i, _ in shown]
        assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == 500
        assert numbers[0] - numbers[-1] == 499  # the newest 500, none skipped
        assert browser.execute_script(memory)["last_event_id"] == numbers[0]
        assert {kind for _, kind in shown[1:]} == {"tool.call", "tool.result"}

        row = wait.until(fresh("orchestrator", child=False))
        run_id = row.get_attribute("data-run-id")
        row.click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == run_id)
        wait.until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, f'[data-testid="timeline-event"][data-run-id="{run_id}"]'
            )
        )
        assert not browser.find_elements(
            By.CSS_SELECTOR, '[data-testid="timeline-event"][data-run-id="chatty"]'
        )


def _focused(driver: Any) -> Any:
    return driver.switch_to.active_element


def _tab_to(driver: Any, matches: Any, *, most: int = 400, back: bool = False) -> Any:
    """Press Tab (Shift+Tab with ``back``) until the focused element ``matches``; it."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    for _ in range(most):
        if back:
            ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(
                Keys.SHIFT
            ).perform()
        else:
            ActionChains(driver).send_keys(Keys.TAB).perform()
        element = _focused(driver)
        if matches(element):
            return element
    pytest.fail(f"Tab never reached the element asked for in {most} presses")


def _keys(driver: Any, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(*keys).perform()


def test_a_run_is_paused_resumed_and_steered_with_the_keyboard_alone(
    browser: Any, tmp_path: Path
) -> None:
    """No mouse: Tab reaches a running orchestrator's row and Enter picks it; Tab reaches
    Pause (Space presses it), Resume (Enter), the instruction's field (typed into) and its
    Send button (Enter). Each command is accepted, and the keys never land elsewhere (a poll
    redrawing the tree meanwhile does not take the focus away)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    def attr(name: str, value: str) -> Any:
        return lambda e: e.get_attribute(name) == value

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(fresh("orchestrator", child=False))
        run_id = row.get_attribute("data-run-id")
        focused = _tab_to(browser, attr("data-run-id", run_id))
        _keys(browser, Keys.ENTER)
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == run_id)
        # polls went on redrawing the tree: the row still has the focus
        polls = _resources(browser, "/api/agents/runs?")
        wait.until(lambda d: _resources(d, "/api/agents/runs?") >= polls + 4)
        assert _focused(browser) == focused

        _tab_to(browser, attr("id", "pause-btn"))
        _keys(browser, Keys.SPACE)
        assert wait.until(lambda d: _sent(d, "pause"))["receipt"] == "accepted"
        _tab_to(browser, attr("id", "resume-btn"))
        _keys(browser, Keys.ENTER)
        assert wait.until(lambda d: _sent(d, "resume"))["receipt"] == "accepted"
        _tab_to(browser, attr("id", "steer-input"))
        _keys(browser, "focus only on billing evidence")
        _tab_to(browser, attr("id", "steer-btn"))
        _keys(browser, Keys.ENTER)
        steer = wait.until(lambda d: _sent(d, "steer"))
        assert steer["receipt"] == "accepted", steer
        assert browser.find_element(By.ID, "steer-input").get_attribute("value") == ""
        sent = [
            r.find_element(By.TAG_NAME, "td").text
            for r in browser.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]')
        ]
        assert [s.split(":")[0] for s in sent] == ["steer", "resume", "pause"], sent


#: Each control in the page without a name a screen reader could announce, as
#: "tag#id.class: its outer HTML's start" (none: the list is empty).
UNNAMED = """
const named = (e) => {
  const label = (e.getAttribute('aria-label') || '').trim();
  const by = (e.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean)
    .map((id) => (document.getElementById(id) || {}).textContent || '').join('').trim();
  const labels = [...(e.labels || [])].map((l) => l.textContent).join('').trim();
  const own = e.tagName === 'BUTTON' ? e.textContent.trim() : '';
  return Boolean(label || by || labels || own);
};
return [...document.querySelectorAll('button, input, textarea, select, [role=button]')]
  .filter((e) => e.type !== 'hidden' && !named(e))
  .map((e) => e.outerHTML.slice(0, 120));
"""


def test_every_control_of_the_console_has_a_name_and_the_page_a_language(
    browser: Any, tmp_path: Path
) -> None:
    """What a screen reader needs of the page: each button, field and checkbox has a name
    (its label, its text or an ``aria-label``), on the sign-in form, the tree's rows, the
    selected run's controls and a waiting question's answer form; the page says its
    language; the connection and the receipts are live regions; the tree's list is named."""
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url.split("#")[0])  # no token: the sign-in form
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        assert browser.execute_script(UNNAMED) == []
        browser.get("about:blank")
        browser.get(url)
        # the refund question's row, picked: its answer field and buttons are drawn
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR,
                f'{ROWS}[data-agent="refund-approval"][data-status="interrupted"]'
                ':not([data-questions="0"])',
            )
        )
        row.click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="answer-value"]'))
        browser.find_element(By.CSS_SELECTOR, '[data-testid="pause-btn"]')
        assert browser.execute_script(UNNAMED) == []
        assert browser.execute_script("return document.documentElement.lang") == "en"
        assert browser.find_element(By.ID, "connection").get_attribute("aria-live") == "polite"
        assert browser.find_element(By.ID, "sent").get_attribute("aria-live") == "polite"
        assert browser.find_element(By.ID, "tree").get_attribute("aria-label")
        # a row says which run it is, its status and what it used, and whether it is picked
        label = row.get_attribute("aria-label")
        assert label.startswith("refund-approval") and "interrupted" in label, label
        assert row.get_attribute("aria-pressed") == "true"


def test_a_focused_row_keeps_the_focus_when_a_tree_above_it_goes(
    browser: Any, tmp_path: Path
) -> None:
    """Finished trees hidden, the keyboard's focus on the refund graph's row (it waits on its
    question, live until answered): another operator cancels a newer tree above it (through
    the API), which leaves the page. The rows below it were taken out and put back to close
    the gap, and a row taken out of the page loses the focus: the next Enter or Tab started
    over from the top of the page. The focused row keeps it."""
    import requests
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from test_console_browser import _api_of

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        browser.find_element(By.ID, "show-finished").click()
        top = f'{ROWS}[data-depth="0"]'

        def a_tree_above_the_refund(d: Any) -> tuple[str, str] | bool:
            rows = [(r.get_attribute("data-run-id"), r.get_attribute("data-agent"))
                    for r in d.find_elements(By.CSS_SELECTOR, top)]  # fmt: skip
            refund = [i for i, (_, agent) in enumerate(rows) if agent == "refund-approval"]
            return (rows[0][0], rows[refund[0]][0]) if refund and refund[0] > 0 else False

        newer, refund = wait.until(a_tree_above_the_refund)
        focused = _tab_to(browser, lambda e: e.get_attribute("data-run-id") == refund)
        base, headers = _api_of(url)
        r = requests.post(f"{base}/api/agents/runs/{newer}/abort", headers=headers, timeout=60)
        assert r.status_code == 200, r.text
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, f'{ROWS}[data-run-id="{newer}"]'))
        assert _focused(browser) == focused, _focused(browser).get_attribute("outerHTML")[:200]
        # and the next key goes on from it: Enter picks the refund graph
        _keys(browser, Keys.ENTER)
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == refund)


def test_a_colleagues_cancel_from_the_cli_is_shown_as_the_end_of_the_pages_commands(
    browser: Any, tmp_path: Path
) -> None:
    """Two operators on one run: in the console, Pause a research child, then Steer it (the
    instruction waits, the run paused); meanwhile a colleague cancels it with ``tinyagents
    runs cancel --url``. The cancel wins: the CLI says accepted, and the page tells the truth
    of its own commands (the pause applied, the instruction superseded by the cancel), shows
    the run cancelled and offers no more controls for it."""
    import os
    import subprocess

    from selenium.webdriver.common.by import By
    from test_console_browser import TINYAGENTS, _terminal, browser_click

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        run_id = pause_a_research_child(browser, wait)
        browser.find_element(By.ID, "steer-input").send_keys("focus only on billing evidence")
        browser_click(browser, "steer-btn")
        steer = wait.until(lambda d: _sent(d, "steer"))
        assert steer["receipt"] == "accepted", steer

        colleague = token_cli(
            tmp_path, "mint", "--tenant", "default", "--user", "colin",
            "--rights", "agent:observe,agent:control",
        )  # fmt: skip
        done = subprocess.run(
            [str(TINYAGENTS), "runs", "cancel", run_id, "--url", url.split("#")[0].rstrip("/"),
             "--json", "--reason", "duplicate investigation"],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "TINYAGENTS_TOKEN": colleague},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert '"accepted"' in done.stdout, done.stdout

        wait.until(lambda d: d.find_element(By.ID, "run-status").text == "cancelled")
        cid = steer["correlation_id"]
        assert wait.until(lambda d: _terminal(d, cid)) == "steering.superseded"
        outcome = browser.find_element(
            By.CSS_SELECTOR,
            f'[data-testid="sent-command"][data-correlation-id="{cid}"] [data-testid="outcome"]',
        )
        wait.until(lambda d: outcome.text.startswith("superseded"))
        pause = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="sent-command"][data-outcome="steering.applied"]'
        )
        assert pause.find_element(By.TAG_NAME, "td").text == "pause"
        for control in ("pause-btn", "resume-btn", "cancel-btn", "steer-btn"):
            assert not browser.find_element(By.ID, control).is_enabled(), control


def test_an_instruction_refused_for_its_size_stays_in_its_field_to_be_shortened(
    browser: Any, tmp_path: Path
) -> None:
    """9,000 accented letters (18,000 bytes, past the server's 16 KiB of the payload's UTF-8)
    were sent, refused, and the field, emptied as the instruction left, lost the text to
    shorten. An instruction refused stays in its field: one past the limit is not sent (the
    field counts bytes since round 8), one the server refuses (it shows nothing: zero-width
    spaces) comes back; once shortened it is accepted, and the field empties."""
    from selenium.webdriver.common.by import By
    from test_console_browser import browser_click

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(fresh("orchestrator", child=False))
        row.click()
        field = browser.find_element(By.ID, "steer-input")
        text = "é" * 9000
        browser.execute_script("arguments[0].value = arguments[1]", field, text[:-1])
        field.send_keys("é")  # (typed, as the rest could have been)
        assert field.get_attribute("value") == text
        browser_click(browser, "steer-btn")
        toast = browser.find_element(By.ID, "toast")
        wait.until(lambda d: toast.text.startswith("Too long to send"))
        assert not _sent(browser, "steer")
        assert field.get_attribute("value") == text, "the refused instruction is gone"

        browser.execute_script("arguments[0].value = arguments[1]", field, "\u200b" * 3)
        browser_click(browser, "steer-btn")
        refused = wait.until(lambda d: _sent(d, "steer"))
        assert refused["receipt"] == "not sent", refused
        assert field.get_attribute("value") == "\u200b" * 3, "the refused instruction is gone"

        browser.execute_script("arguments[0].value = arguments[1]", field, "é" * 100)
        browser_click(browser, "steer-btn")
        receipt = '[data-testid="sent-command"] [data-testid="receipt"]'
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, receipt).text == "accepted")
        assert field.get_attribute("value") == ""


def test_hiding_finished_trees_does_not_say_there_are_no_runs(browser: Any) -> None:
    """A server whose only run has completed, the finished trees hidden: the tree is empty,
    and the page said "No runs yet. Start one", which the operator believes (there is one,
    hidden). It says the finished trees are hidden, how many, and how to show them; shown
    again, the run is back and the hint goes."""
    from selenium.webdriver.common.by import By
    from test_console_browser import free_port, storeless_server

    port = free_port()
    with storeless_server(port, "r-done", "brief"):
        wait = waiter(browser)
        browser.get(f"http://127.0.0.1:{port}/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'{ROWS}[data-status="completed"]'))
        empty = browser.find_element(By.ID, "tree-empty")
        assert not empty.is_displayed()
        browser.find_element(By.ID, "show-finished").click()
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, ROWS))
        assert not empty.is_displayed(), "the page says there are no runs"
        hidden = browser.find_element(By.ID, "tree-hidden")
        assert hidden.is_displayed()
        assert hidden.text.startswith("No live runs: 1 finished tree hidden"), hidden.text
        browser.find_element(By.ID, "show-finished").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'{ROWS}[data-run-id="r-done"]'))
        assert not empty.is_displayed() and not hidden.is_displayed()


def test_a_question_is_answered_with_the_keyboard_and_polls_keep_what_is_typed(
    browser: Any, tmp_path: Path
) -> None:
    """Tab reaches the refund question's row (Enter picks it) and its answer field; what is
    typed there stays, with the focus, poll after poll (the form is not drawn anew under
    the typist), and Enter approves: the answer is accepted and applied."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from test_console_browser import _refund_question_row, _terminal

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        task = wait.until(_refund_question_row).get_attribute("data-run-id")
        _tab_to(browser, lambda e: e.get_attribute("data-run-id") == task)
        _keys(browser, Keys.ENTER)
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == task)
        field = _tab_to(browser, lambda e: e.get_attribute("data-testid") == "answer-value")
        _keys(browser, "refund approved by the keyboard")
        polls = _resources(browser, "/api/agents/runs?")
        wait.until(lambda d: _resources(d, "/api/agents/runs?") >= polls + 4)
        assert _focused(browser) == field
        assert field.get_attribute("value") == "refund approved by the keyboard"
        _keys(browser, Keys.ENTER)
        sent = wait.until(lambda d: _sent(d, "approve"))
        assert sent["receipt"] == "accepted", sent
        assert wait.until(lambda d: _terminal(d, sent["correlation_id"])) == "steering.applied"


@contextmanager
def _stuck_run_open(browser: Any) -> Iterator[tuple[Any, Any]]:
    """A server whose one run, ``r-stuck``, waits an hour on its model: the console open on it
    once it shows ``running``; the page's waiter and the run's status element."""
    from selenium.webdriver.common.by import By
    from test_console_browser import browser_click, free_port, storeless_server

    port = free_port()
    with storeless_server(port, "r-stuck", "stuck"):
        wait = waiter(browser)
        browser.get(f"http://127.0.0.1:{port}/")
        browser_click(browser, "run-row")
        status = browser.find_element(By.ID, "run-status")
        wait.until(lambda d: status.text == "running")
        yield wait, status


def test_cancel_stops_a_run_waiting_on_a_slow_model_call(browser: Any) -> None:
    """The console says Cancel stops the run for good, only a running tool call allowed to
    finish; yet it sent a cancel for the run's next safe point, after its model call: a run
    waiting on a model that takes minutes (here an hour) went on running, its cancel
    ``accepted`` and nothing more. Cancel interrupts an in-flight model request (an
    ``immediate`` cancel): the run is cancelled and the cancel applied."""
    from test_console_browser import _terminal, browser_click

    with _stuck_run_open(browser) as (wait, status):
        browser_click(browser, "cancel-btn")
        browser.switch_to.alert.accept()
        cancel = wait.until(lambda d: _sent(d, "cancel"))
        assert cancel["receipt"] == "accepted", cancel
        wait.until(lambda d: status.text == "cancelled")
        assert wait.until(lambda d: _terminal(d, cancel["correlation_id"])) == "steering.applied"


def test_the_keyboards_focus_stays_in_the_run_panel_when_its_focused_control_is_disabled(
    browser: Any,
) -> None:
    """Found by round 7: a keyboard user on Pause whose run finished (a colleague cancelled
    it) had the button disabled under the focus, which then fell to the page's start: the
    next Tab began again from the top. The focus moves to the run's heading (which names
    it), and Tab goes on from there."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with _stuck_run_open(browser) as (wait, status):
        _tab_to(browser, lambda e: e.get_attribute("id") == "pause-btn")
        # a colleague's cancel, sent as the page's own requests are, leaving the focus be
        browser.execute_script(
            "fetch('/api/agents/runs/r-stuck/abort', {method: 'POST', headers: "
            "{'Content-Type': 'application/json'}, body: '{\"delivery\": \"immediate\"}'})"
        )
        wait.until(lambda d: status.text == "cancelled")
        wait.until(lambda d: d.find_element(By.ID, "pause-btn").get_attribute("disabled"))
        focused = _focused(browser)
        assert focused.get_attribute("id") == "detail-title", focused.get_attribute("outerHTML")
        _keys(browser, Keys.TAB)  # on from the run's panel, not from the page's start
        title = browser.find_element(By.ID, "detail-title")
        assert browser.execute_script(
            "return Boolean(arguments[0].compareDocumentPosition(document.activeElement)"
            " & Node.DOCUMENT_POSITION_FOLLOWING)",
            title,
        ), _focused(browser).get_attribute("outerHTML")
