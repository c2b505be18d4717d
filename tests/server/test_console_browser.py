"""The web console in a real browser: ``tinyagents serve --demo`` in a subprocess, Debian's
headless Chromium driven by Selenium.

A newcomer's minute: open the printed URL, pause a running sub-agent from the tree, see it
paused, resume it, steer it and see ``steering.applied`` in the timeline. Skips when Chromium
or its driver is missing (fails when ``CI=true``: ``make browser`` installs them).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from serve_process import free_port, serving

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


@contextlib.contextmanager
def serve_demo(tmp_path: Path, *extra: str) -> Iterator[tuple[str, Callable[[], str]]]:
    """``tinyagents serve --demo`` on a free port: (console URL, printed output). The URL
    carries the printed token, unless ``--insecure-dev`` is among ``extra``."""
    port = free_port()
    env = {**os.environ, "TINYAGENTS_DEMO_THINK_S": THINK_S, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    store = f"sqlite:///{tmp_path / 'serve.db'}"

    def url(printed: str) -> str | None:
        if "--insecure-dev" in extra:
            return f"http://127.0.0.1:{port}/" if f":{port}" in printed else None
        return console_url(printed, port)

    def ready(printed: str) -> bool:
        return url(printed) is not None

    argv = [str(TINYAGENTS), "serve", "--demo", "--port", str(port), "--store", store, *extra]
    with serving(argv, port, env=env, cwd=tmp_path, ready=ready) as printed:
        yield str(url(printed())), printed


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


def test_pause_resume_and_steer_a_demo_child_from_the_console(browser: Any, tmp_path: Path) -> None:
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        drive_console(browser, url, tmp_path)


def test_the_console_keeps_live_trees_when_newer_runs_fill_a_page(
    browser: Any, tmp_path: Path
) -> None:
    """The store holds more finished runs than a page, all newer than the demo's (created in
    2099): the newest page is all theirs, yet the demo's live trees are still in the tree, the
    usual minute still works, and the page says there are more runs."""
    from selenium.webdriver.common.by import By

    _save_finished_runs(tmp_path / "serve.db", 450)
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        drive_console(browser, url, tmp_path)
        wait = waiter(browser)
        wait.until(lambda d: d.find_element(By.ID, "tree-more").is_displayed())
        # finished trees fill the rest of the list, newest first
        wait.until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, '[data-testid="run-row"][data-run-id="old-0449"]'
            )
        )
        assert not browser.find_elements(
            By.CSS_SELECTOR, '[data-testid="run-row"][data-run-id="old-0000"]'
        )


def _save_finished_runs(path: Path, count: int) -> None:
    _save_runs(
        path,
        [
            {
                "run_id": f"old-{i:04d}",
                "root_run_id": f"old-{i:04d}",
                "parent_run_id": None,
                "tenant_id": "default",
                "agent_id": "archived",
                "kind": "agent",
                "status": "completed",
                "created_at": f"2099-01-01T00:{i // 60:02d}:{i % 60:02d}+00:00",
            }
            for i in range(count)
        ],
    )


def _save_runs(path: Path, snapshots: list[dict[str, Any]]) -> None:
    """Write run snapshots into the demo server's store before it starts."""
    import asyncio

    from tinyagents.store import SqliteStore

    async def save() -> None:
        store = SqliteStore(path)
        await store.open()
        await store.save_runs(snapshots)
        await store.close()

    asyncio.run(save())


def test_every_live_tree_is_shown(browser: Any, tmp_path: Path) -> None:
    # the tree showed at most 12 trees, live ones included: with more runs going at once the
    # others were nowhere on the page (nor said to be missing), so they could not be steered
    from selenium.webdriver.common.by import By

    _save_runs(
        tmp_path / "serve.db",
        [
            {
                "run_id": f"live-{i:02d}",
                "root_run_id": f"live-{i:02d}",
                "parent_run_id": None,
                "tenant_id": "default",
                "agent_id": "elsewhere",
                "kind": "agent",
                "status": "paused",
                "owner": "rt-gone",
                "created_at": f"2026-01-01T00:00:{i:02d}+00:00",
                "updated_at": "2026-01-01T00:01:00+00:00",
            }
            for i in range(15)
        ],
    )
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-agent="refund-approval"]'))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-agent="orchestrator"]'))
        wait.until(
            lambda d: (
                len(
                    d.find_elements(
                        By.CSS_SELECTOR, '[data-testid="run-row"][data-agent="elsewhere"]'
                    )
                )
                == 15
            )
        )


def test_a_run_whose_process_died_shows_its_owner_silent(browser: Any, tmp_path: Path) -> None:
    """A run another process owned, still 'running' in the store with no heartbeat for
    minutes (that process was killed): its row and its details say "(owner silent)", and
    Cancel declares it dead."""
    from selenium.webdriver.common.by import By

    _save_runs(
        tmp_path / "serve.db",
        [
            {
                "run_id": "orphan",
                "root_run_id": "orphan",
                "parent_run_id": None,
                "tenant_id": "default",
                "agent_id": "orphaned",
                "kind": "agent",
                "status": "running",
                "owner": "rt-killed",
                "created_at": "2099-01-01T00:00:00+00:00",
                "updated_at": "2026-01-01T00:00:00+00:00",
            }
        ],
    )
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR, '[data-testid="run-row"][data-run-id="orphan"]'
            )
        )
        wait.until(lambda d: "running (owner silent)" in row.text)
        row.click()
        status = wait.until(lambda d: d.find_element(By.ID, "run-status"))
        wait.until(lambda d: status.text == "running (owner silent)")
        assert "rt-killed" in (status.get_attribute("title") or "")
        # its process is gone for good: Cancel declares it dead (it was refused before)
        browser_click(browser, "cancel-btn")
        browser.switch_to.alert.accept()
        cancel = wait.until(lambda d: _sent(d, "cancel"))
        assert cancel["receipt"] == "accepted", cancel
        wait.until(lambda d: status.text == "cancelled")


def test_a_command_its_runs_owner_did_not_answer_in_time_is_not_called_unsent(
    browser: Any, tmp_path: Path
) -> None:
    # a run another process owns, which does not answer within the server's wait: the server
    # answers 504 with the command's correlation id, as the command may still be applied;
    # the page said "not sent" and dropped the id, so its outcome was never followed
    from datetime import UTC, datetime

    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        _save_runs(
            tmp_path / "serve.db",
            [
                {
                    "run_id": "elsewhere",
                    "root_run_id": "elsewhere",
                    "parent_run_id": None,
                    "tenant_id": "default",
                    "agent_id": "busy-elsewhere",
                    "kind": "agent",
                    "status": "running",
                    "owner": "rt-busy",  # alive (a fresh heartbeat), but it reads no inbox
                    "created_at": "2099-01-01T00:00:00+00:00",
                    "updated_at": datetime.now(UTC).isoformat(),
                }
            ],
        )
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR, '[data-testid="run-row"][data-run-id="elsewhere"]'
            )
        )
        row.click()
        browser_click(browser, "pause-btn")
        pause = wait.until(lambda d: _sent(d, "pause"))
        assert pause["receipt"] == "no answer", pause
        assert pause["correlation_id"].startswith("c-"), pause
        outcome = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="sent-command"] [data-testid="outcome"]'
        )
        assert "may still be applied" in outcome.text, outcome.text
        assert outcome.get_attribute("class") != "terminal"


def test_approve_the_demo_refund_question_from_the_console(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(_refund_question_row)
        # The question is answered from its task's row; the graph run above it completes.
        run_id = row.get_attribute("data-root-run-id")
        row.click()
        question = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="interrupt"]')
        )
        assert "Refund 129.00 EUR for invoice #1042?" in question.text
        browser_click(browser, "approve-btn")
        approve = wait.until(lambda d: _sent(d, "approve"))
        assert approve["receipt"] == "accepted", approve
        assert wait.until(lambda d: _terminal(d, approve["correlation_id"])) == "steering.applied"
        wait.until(
            lambda d: (
                d.find_element(
                    By.CSS_SELECTOR, f'[data-testid="run-row"][data-run-id="{run_id}"]'
                ).get_attribute("data-status")
                == "completed"
            )
        )
        save_screenshot(browser, tmp_path / "approved.png")


def test_a_questions_schema_is_shown_and_its_value_sent_from_the_console(
    browser: Any, tmp_path: Path
) -> None:
    """The demo's refund question has a ``response_schema``: the console says what it
    expects, and sends the answer field as the command's ``value`` (JSON when it reads as
    JSON, else text)."""
    import httpx
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(_refund_question_row)
        graph_id = row.get_attribute("data-root-run-id")
        row.click()
        expects = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="answer-schema"]')
        )
        assert expects.text == "expects {approved: boolean, value?: string, reason?: string}"
        field = browser.find_element(By.CSS_SELECTOR, '[data-testid="answer-value"]')
        assert field.get_attribute("placeholder") == "value: the amount to refund, if not all"
        field.send_keys("12.00 EUR")  # no JSON: sent as the text it is
        browser_click(browser, "approve-btn")
        approve = wait.until(lambda d: _sent(d, "approve"))
        assert approve["receipt"] == "accepted", approve
        assert wait.until(lambda d: _terminal(d, approve["correlation_id"])) == "steering.applied"

        base, headers = _api_of(url)
        history = httpx.get(f"{base}/api/agents/runs/{graph_id}/steering", headers=headers)
        (sent,) = [c for c in history.json() if c["correlation_id"] == approve["correlation_id"]]
        assert sent["payload_summary"]["value"] == "12.00 EUR", sent


def test_a_question_answered_meanwhile_shows_the_servers_receipt(
    browser: Any, tmp_path: Path
) -> None:
    # another operator (or another tab) answered the question first: the server answers the
    # second answer 404 with a rejected receipt, which the page showed as "not sent: no such
    # run (or not yours): ...", though the run was there and the command was refused
    import httpx
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(_refund_question_row)
        entry_id = row.get_attribute("data-run-id")
        row.click()
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="interrupt"]'))
        # the page learns nothing new from here on (its listings fail), as between two polls
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/api/agents/runs?*"]})

        base, headers = _api_of(url)
        snap = httpx.get(f"{base}/api/agents/runs/{entry_id}", headers=headers).json()
        ask = snap["interrupts"][0]
        first = httpx.post(
            f"{base}/api/agents/runs/{entry_id}/tasks/{ask['task_id']}/commands",
            headers=headers,
            json={"kind": "approve", "payload": {"interrupt_id": ask["id"]}},
        )
        assert first.json()["status"] == "accepted", first.text
        wait.until(
            lambda d: (
                not httpx.get(f"{base}/api/agents/runs/{entry_id}", headers=headers).json()[
                    "interrupts"
                ]
            )
        )

        browser_click(browser, "approve-btn")
        late = wait.until(lambda d: _sent(d, "approve"))
        assert late["receipt"] == "rejected", late
        assert late["correlation_id"]
        outcome = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="sent-command"] [data-testid="outcome"]'
        )
        assert outcome.text.startswith("rejected: not found: task "), outcome.text
        assert "no such run" not in outcome.text


def test_a_token_narrowed_to_the_refund_task_answers_its_question_from_the_console(
    browser: Any, tmp_path: Path
) -> None:
    # the task's own entry listed no interrupts (its graph run above held them, which this
    # token may not see), and Approve posted to the graph run's path: a 404 for this token
    import httpx
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        task_row = wait.until(_refund_question_row)
        entry_id = task_row.get_attribute("data-run-id")
        narrowed = token_cli(tmp_path, "attenuate", url.split("#token=")[1], "--run", entry_id)
        base = url.split("#")[0].rstrip("/")
        snap = httpx.get(
            f"{base}/api/agents/runs/{entry_id}", headers={"Authorization": f"Bearer {narrowed}"}
        ).json()
        assert [i["value"] for i in snap["interrupts"]] == [
            {"question": "Refund 129.00 EUR for invoice #1042?"}
        ], snap

        browser_click(browser, "sign-out")
        browser.get("about:blank")
        browser.get(f"{base}/#token={narrowed}")
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR,
                f'[data-testid="run-row"][data-run-id="{entry_id}"]:not([data-questions="0"])',
            )
        )
        row.click()
        question = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="interrupt"]')
        )
        assert "Refund 129.00 EUR for invoice #1042?" in question.text
        browser_click(browser, "approve-btn")
        approve = wait.until(lambda d: _sent(d, "approve"))
        assert approve["receipt"] == "accepted", approve
        wait.until(
            lambda d: (
                d.find_element(
                    By.CSS_SELECTOR, f'[data-testid="run-row"][data-run-id="{entry_id}"]'
                ).get_attribute("data-status")
                == "completed"
            )
        )
        # its outcome, though its events are the graph run's (which this token may not see)
        outcome = browser.find_element(
            By.CSS_SELECTOR,
            f'[data-testid="sent-command"][data-correlation-id="{approve["correlation_id"]}"]'
            ' [data-testid="outcome"]',
        )
        wait.until(lambda d: outcome.text == "applied")
        history = httpx.get(
            f"{base}/api/agents/runs/{entry_id}/steering",
            headers={"Authorization": f"Bearer {narrowed}"},
        ).json()
        assert [(c["correlation_id"], c["state"]) for c in history] == [
            (approve["correlation_id"], "applied")
        ]


def test_the_page_keeps_a_bounded_memory_of_a_tree_it_follows(browser: Any, tmp_path: Path) -> None:
    # every SSE id and every correlation id seen was kept for as long as one tree was
    # followed (only the timeline was capped): a console left open grew without end
    import httpx
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR,
                '[data-testid="run-row"][data-agent="refund-approval"][data-depth="0"]'
                '[data-status="interrupted"]',
            )
        )
        graph_id = row.get_attribute("data-run-id")
        row.click()
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")
        browser_click(browser, "pause-btn")
        mine = wait.until(lambda d: _sent(d, "pause"))
        assert mine["receipt"] == "accepted", mine
        outcome = f'[data-testid="sent-command"][data-correlation-id="{mine["correlation_id"]}"] [data-testid="outcome"]'
        # its final word: "delivered to the run" comes first and "applied" may follow after
        # the flood below starts, which is not what this test is about
        said = wait.until(
            lambda d: (
                (text := d.find_element(By.CSS_SELECTOR, outcome).text)
                in ("applied", "rejected", "superseded", "failed")
                and text
            )
        )

        base, headers = _api_of(url)
        with httpx.Client(base_url=f"{base}/api/agents", headers=headers, timeout=60) as client:
            for _ in range(300):  # other operators' commands to the same run
                r = client.post(f"/runs/{graph_id}/commands", json={"kind": "request_status"})
                assert r.status_code in (200, 202), r.text
            last = r.json()["correlation_id"]
        wait.until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, f'[data-testid="timeline-event"][data-correlation-id="{last}"]'
            )
        )
        # the page's memory and its timeline's ids read in one go: the stream goes on (the
        # later steps of the commands above), and an event shown between two reads made
        # last_event_id and the newest id on the page disagree
        memory, ids = browser.execute_script(
            "return [window.tinyagentsConsole.memory(), Array.from("
            "document.querySelectorAll('[data-testid=\"timeline-event\"]'), "
            "(e) => e.getAttribute('data-event-id'))]"
        )
        assert memory["outcomes"] <= 200 + memory["sent"], memory
        assert memory["timeline"] <= 500, memory
        assert browser.find_element(By.CSS_SELECTOR, outcome).text == said  # its own: kept
        assert len(ids) == len(set(ids))
        assert memory["last_event_id"] == max(int(i) for i in ids), memory


def test_a_command_to_a_run_of_another_tree_is_followed_to_its_end(
    browser: Any, tmp_path: Path
) -> None:
    # its outcome came only from the event stream of the tree followed: once the operator
    # picked a run of another tree, a command still open stayed "accepted, waiting for the
    # run's next safe point" for good, though the run had long applied it
    import httpx
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        base, headers = _api_of(url)
        for _ in range(3):
            row = wait.until(fresh("research", child=True))
            run_id = row.get_attribute("data-run-id")
            row.click()
            wait.until(lambda d, run_id=run_id: d.find_element(By.ID, "run-id").text == run_id)
            browser_click(browser, "pause-btn")
            wait.until(lambda d: d.find_element(By.ID, "run-status").text in ("paused", *_FINISHED))
            if browser.find_element(By.ID, "run-status").text == "paused":
                break
        else:
            pytest.fail("three demo children in a row finished before they could be paused")
        browser.find_element(By.ID, "steer-input").send_keys("focus only on billing evidence")
        browser_click(browser, "steer-btn")
        steer = wait.until(lambda d: _sent(d, "steer"))
        assert steer["receipt"] == "accepted", steer
        outcome = browser.find_element(
            By.CSS_SELECTOR,
            f'[data-testid="sent-command"][data-correlation-id="{steer["correlation_id"]}"]'
            ' [data-testid="outcome"]',
        )
        wait.until(lambda d: outcome.text.startswith("accepted"))  # queued while paused

        other = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="run-row"][data-agent="refund-approval"][data-depth="0"]'
        )
        other.click()  # another tree: its events are followed now
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")
        r = httpx.post(f"{base}/api/agents/runs/{run_id}/resume", headers=headers, json={})
        assert r.json()["status"] == "accepted", r.text
        wait.until(lambda d: outcome.get_attribute("class") == "terminal")
        history = httpx.get(f"{base}/api/agents/runs/{run_id}/steering", headers=headers).json()
        state = next(c["state"] for c in history if c["correlation_id"] == steer["correlation_id"])
        assert outcome.text.startswith(state), (outcome.text, state)


def test_a_commands_outcome_is_found_past_the_newest_page_of_its_runs_history(
    browser: Any, tmp_path: Path
) -> None:
    # the page read only the newest page (100 commands) of a run's command history for the
    # outcome of a command it sent: once more than 100 other commands had moved on that run
    # between two polls (a busy run, a tab the browser throttled, a network gone a while),
    # the command stayed "accepted" for good, though the run had long applied it
    import httpx
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        base, headers = _api_of(url)
        for _ in range(3):
            row = wait.until(fresh("research", child=True))
            run_id = row.get_attribute("data-run-id")
            row.click()
            wait.until(lambda d, run_id=run_id: d.find_element(By.ID, "run-id").text == run_id)
            browser_click(browser, "pause-btn")
            wait.until(lambda d: d.find_element(By.ID, "run-status").text in ("paused", *_FINISHED))
            if browser.find_element(By.ID, "run-status").text == "paused":
                break
        else:
            pytest.fail("three demo children in a row finished before they could be paused")
        browser.find_element(By.ID, "steer-input").send_keys("focus only on billing evidence")
        browser_click(browser, "steer-btn")
        steer = wait.until(lambda d: _sent(d, "steer"))
        assert steer["receipt"] == "accepted", steer
        cid = steer["correlation_id"]
        outcome = browser.find_element(
            By.CSS_SELECTOR,
            f'[data-testid="sent-command"][data-correlation-id="{cid}"] [data-testid="outcome"]',
        )
        wait.until(lambda d: outcome.text.startswith("accepted"))  # queued while paused
        other = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="run-row"][data-agent="refund-approval"][data-depth="0"]'
        )
        other.click()  # another tree: the command's outcome is polled for, not streamed
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")

        # The page loses the network; meanwhile the run applies the command, then 150 more
        # commands move on it.
        offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", offline)
        with httpx.Client(base_url=f"{base}/api/agents", headers=headers, timeout=60) as client:
            assert client.post(f"/runs/{run_id}/resume", json={}).json()["status"] == "accepted"

            def state_of(page: list[dict[str, Any]]) -> str | None:
                return next((c["state"] for c in page if c["correlation_id"] == cid), None)

            deadline = time.monotonic() + WAIT_S
            while state_of(client.get(f"/runs/{run_id}/steering").json()) != "applied":
                assert time.monotonic() < deadline, "the demo child never applied the steer"
                time.sleep(0.2)
            for _ in range(150):
                r = client.post(f"/runs/{run_id}/commands", json={"kind": "request_status"})
                assert r.status_code in (200, 202), r.text
            newest = client.get(f"/runs/{run_id}/steering").json()
            assert state_of(newest) is None, "the steer is still on the newest page"
            assert outcome.text.startswith("accepted"), outcome.text  # not polled meanwhile
        online = {**offline, "offline": False}
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", online)
        wait.until(lambda d: outcome.get_attribute("class") == "terminal")
        assert outcome.text == "applied", outcome.text


def test_narrow_the_tools_then_cancel_an_orchestrator_from_the_console(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(fresh("orchestrator", child=False))
        run_id = row.get_attribute("data-run-id")
        row.click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == run_id)
        tools = browser.find_element(By.ID, "tools-input")

        # Asking for a tool the run does not have is refused, with the reason, on the page.
        tools.send_keys("research, delete_records")
        browser_click(browser, "tools-btn")
        widen = wait.until(lambda d: _sent(d, "narrow tools to research, delete_records"))
        assert widen["receipt"] == "rejected", widen
        outcome = browser.find_element(
            By.CSS_SELECTOR,
            f'[data-testid="sent-command"][data-correlation-id="{widen["correlation_id"]}"]'
            ' [data-testid="outcome"]',
        )
        assert outcome.text.startswith("rejected: ") and "delete_records" in outcome.text

        tools.clear()
        keep = "research, spawn_subagent, steer_subagent, wait_subagents"  # not cancel_subagent
        tools.send_keys(keep)
        browser_click(browser, "tools-btn")
        narrow = wait.until(lambda d: _sent(d, f"narrow tools to {keep}"))
        assert narrow["receipt"] == "accepted", narrow
        assert wait.until(lambda d: _terminal(d, narrow["correlation_id"])) == "steering.applied"
        wait.until(lambda d: d.find_element(By.ID, "run-tools").text == keep)

        browser_click(browser, "cancel-btn")
        browser.switch_to.alert.accept()  # "Cancel orchestrator? A cancelled run does not come back."
        cancel = wait.until(lambda d: _sent(d, "cancel"))
        assert cancel["receipt"] == "accepted", cancel
        wait.until(lambda d: d.find_element(By.ID, "run-status").text == "cancelled")
        assert not browser.find_element(By.ID, "pause-btn").is_enabled()  # finished: no controls
        save_screenshot(browser, tmp_path / "cancelled.png")


def test_an_observe_only_token_watches_and_its_commands_are_refused_on_the_page(
    browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        token = token_cli(
            tmp_path, "mint", "--tenant", "default", "--user", "olga", "--rights", "agent:observe"
        )
        browser.get(url.split("#")[0] + f"?token={token}")
        wait = waiter(browser)
        wait.until(lambda d: "token" not in d.current_url)
        row = wait.until(fresh("orchestrator", child=False))
        run_id = row.get_attribute("data-run-id")
        row.click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == run_id)
        browser_click(browser, "pause-btn")
        pause = wait.until(lambda d: _sent(d, "pause"))
        assert pause["receipt"] == "not sent", pause
        refused = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="sent-command"] [data-testid="outcome"]'
        )
        assert refused.text.startswith("this token may not do that"), refused.text
        assert browser.find_element(By.ID, "run-status").text == "running"


def test_a_token_that_may_not_observe_is_told_what_it_lacks(browser: Any, tmp_path: Path) -> None:
    # every 403 was prefixed "(it needs agent:control)": a control-only token, refused the
    # listing for lacking agent:observe, read "it needs agent:control: this token does not
    # grant agent:observe"
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        token = token_cli(
            tmp_path, "mint", "--tenant", "default", "--user", "carl", "--rights", "agent:control"
        )
        browser.get(url.split("#")[0] + f"#token={token}")
        pill = waiter(browser).until(
            lambda d: (e := d.find_element(By.ID, "connection")).text == "error" and e
        )
        said = pill.get_attribute("title")
        assert "agent:observe" in said, said
        assert "agent:control" not in said, said


def test_a_token_that_expires_while_the_page_is_open_is_said_to_have_expired(
    browser: Any, tmp_path: Path
) -> None:
    # the sign-in form said "The server did not accept this token (401)" whatever the
    # server's reason: an expired token read as one of another server
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        token = token_cli(
            tmp_path,
            "mint",
            "--tenant",
            "default",
            "--user",
            "dana",
            "--rights",
            "agent:observe,agent:control",
            "--ttl",
            "3",
        )
        browser.get(url.split("#")[0] + f"#token={token}")
        error = browser.find_element(By.ID, "login-error")
        waiter(browser).until(lambda d: d.find_element(By.ID, "login").is_displayed())
        assert "expired" in error.text, error.text


def test_a_token_narrowed_to_a_child_follows_its_events_and_forgetting_it_clears_the_page(
    browser: Any, tmp_path: Path
) -> None:
    # the page followed the selected run's root over SSE, which a token narrowed to a child
    # may not see (404): the timeline stayed offline; "Forget token" left the last session's
    # timeline and commands on the page for the next token; an empty tool list took every
    # tool away without asking
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        child = wait.until(fresh("research", child=True))
        child_id = child.get_attribute("data-run-id")
        token = url.split("#token=")[1]
        narrowed = token_cli(tmp_path, "attenuate", token, "--run", child_id)
        browser_click(browser, "sign-out")
        browser.get("about:blank")  # a new hash alone would not load the page again
        browser.get(url.split("#")[0] + f"#token={narrowed}")
        row = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, f'[data-run-id="{child_id}"]'))
        row.click()
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="timeline-event"]'))

        tools = browser.find_element(By.ID, "tools-input")
        tools.clear()
        browser_click(browser, "tools-btn")
        browser.switch_to.alert.dismiss()  # "Take every tool away from research? ..."
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]')
        browser_click(browser, "pause-btn")
        wait.until(lambda d: _sent(d, "pause"))

        browser_click(browser, "sign-out")
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="timeline-event"]')
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]')
        assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="run-row"]')


class Gateway:
    """A TCP relay in front of the server, as a reverse proxy would be; ``down()`` cuts the
    open connections and answers ``502 Bad Gateway`` (the server restarting behind it) until
    ``up()`` (with ``page`` as its body: a proxy's HTML page)."""

    def __init__(self, port: int, page: bytes = b"") -> None:
        self.target = port
        self.page = page
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.is_down = False
        self.open: list[socket.socket] = []
        self.refused: list[str] = []  # the request lines answered 502
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.is_down:
                with contextlib.suppress(OSError):
                    self.refused.append(client.recv(65536).split(b"\r\n", 1)[0].decode())
                    client.sendall(
                        b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(self.page), self.page)
                    )
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.target))
            self.open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        self.is_down = True
        for sock in self.open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.open.clear()

    def up(self) -> None:
        self.is_down = False

    def close(self) -> None:
        self.down()
        self.listener.close()


def test_the_timeline_comes_back_after_a_proxy_answered_502(browser: Any, tmp_path: Path) -> None:
    # a stream whose reconnect is answered with an error status (a proxy's 502 while the
    # server restarts) is closed for good by the browser: the timeline stayed "offline", with
    # no new event, until the operator picked a run of another tree
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        port = int(re.search(r":(\d+)/", url).group(1))  # type: ignore[union-attr]
        gateway = Gateway(port)
        try:
            wait = waiter(browser)
            browser.get(url.replace(f":{port}/", f":{gateway.port}/"))
            row = wait.until(
                lambda d: d.find_element(
                    By.CSS_SELECTOR,
                    '[data-testid="run-row"][data-agent="refund-approval"][data-depth="0"]'
                    '[data-status="interrupted"]',
                )
            )
            graph_id = row.get_attribute("data-run-id")
            row.click()
            connection = browser.find_element(By.ID, "connection")
            wait.until(lambda d: connection.text == "live")
            gateway.down()
            # the stream's reconnect got the 502
            wait.until(lambda d: any("/api/agents/events?" in line for line in gateway.refused))
            # the stream's URL (what a proxy logs) holds a ticket, never the token
            streams = [line for line in gateway.refused if "/api/agents/events?" in line]
            assert all("ticket=" in line and "access_token" not in line for line in streams)
            wait.until(lambda d: connection.text != "live")
            gateway.up()
            wait.until(lambda d: connection.text == "live")
            # and what happens from now on shows
            browser_click(browser, "pause-btn")
            pause = wait.until(lambda d: _sent(d, "pause"))
            assert pause["receipt"] == "accepted", pause
            wait.until(
                lambda d: d.find_elements(
                    By.CSS_SELECTOR,
                    '[data-testid="timeline-event"][data-type="steering.applied"]'
                    f'[data-correlation-id="{pause["correlation_id"]}"]',
                )
            )
            ids = [
                e.get_attribute("data-event-id")
                for e in browser.find_elements(By.CSS_SELECTOR, '[data-testid="timeline-event"]')
            ]
            assert len(ids) == len(set(ids))  # nothing shown twice
            assert graph_id
        finally:
            gateway.close()


def test_a_proxys_error_page_is_shown_as_a_short_text(browser: Any, tmp_path: Path) -> None:
    # A command answered by a proxy's HTML page (its 502 while the server restarts) was
    # shown as "HTTP 502" alone: what the proxy said was lost. Its text is shown now, tags
    # left out, cut short, and never as HTML (the page's markup runs nothing).
    from selenium.webdriver.common.by import By

    page = (
        b"<html><head><title>502 Bad Gateway</title><style>h1 { color: red }</style>"
        b"<script>document.title = 'ran';</script></head><body><h1>502 Bad Gateway</h1>"
        b"<p>upstream   restarting</p><img src=x onerror=\"document.title='ran'\">"
        + b"<p>"
        + b"filler " * 100
        + b"</p><hr><center>nginx</center></body></html>"
    )
    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        port = int(re.search(r":(\d+)/", url).group(1))  # type: ignore[union-attr]
        gateway = Gateway(port, page)
        try:
            wait = waiter(browser)
            browser.get(url.replace(f":{port}/", f":{gateway.port}/"))
            wait.until(
                lambda d: d.find_element(
                    By.CSS_SELECTOR,
                    '[data-testid="run-row"][data-agent="refund-approval"][data-depth="0"]',
                )
            ).click()
            connection = browser.find_element(By.ID, "connection")
            wait.until(lambda d: connection.text == "live")
            title = browser.title
            gateway.down()
            browser_click(browser, "pause-btn")
            # the outcome's text, once the answer is in: the element is shown empty first
            # (found that way on a loaded machine: '' was asserted)
            outcome = wait.until(
                lambda d: (
                    d.find_element(
                        By.CSS_SELECTOR, '[data-testid="sent-command"] [data-testid="outcome"]'
                    ).text
                )
            )
            outcome = outcome.replace("\u2068", "").replace("\u2069", "")  # (bidi isolates)
            assert outcome.startswith(
                "HTTP 502: 502 Bad Gateway 502 Bad Gateway upstream restarting filler"
            ), outcome
            assert "<" not in outcome and "color" not in outcome and "ran" not in outcome
            assert outcome.endswith("\u2026") and len(outcome) < 220, outcome
            # at most 200 letters, the "…" one of them, as every shortened line of the page
            assert outcome.startswith("HTTP 502: ") and len(outcome) == 10 + 200, outcome
            sent = browser.find_element(By.CSS_SELECTOR, '[data-testid="sent-command"]')
            assert not sent.find_elements(By.CSS_SELECTOR, "img, h1, script")
            assert browser.title == title
        finally:
            gateway.close()


@contextlib.contextmanager
def storeless_server(port: int, run_id: str, kind: str) -> Iterator[None]:
    """``storeless_server.py`` (a server without a store: its event ids count from 1 again
    in each process) on ``port``, with one ``busy`` or ``brief`` run named ``run_id``."""
    script = Path(__file__).with_name("storeless_server.py")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port), run_id, kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line.strip() == "serving", line + proc.stdout.read()
        yield
    finally:
        proc.kill()  # as a crash: no goodbye to the open stream
        proc.wait()
        proc.stdout.close()


@pytest.mark.parametrize("then", ["brief", "ahead"])
def test_the_timeline_starts_over_when_a_server_without_a_store_restarts(
    browser: Any, tmp_path: Path, then: str
) -> None:
    # The page kept the highest event id it had shown and dropped every event at or below
    # it as a replay: after a restart without a store the ids count from 1 again, and the
    # timeline showed nothing of the new process until its ids got past the old ones
    # (``brief``), or, when the new log was past the id the page sent already (``ahead``),
    # went on from there, the new log's events before it never shown.
    from selenium.webdriver.common.by import By

    port, run_id = free_port(), "r-restarted"
    wait = waiter(browser)
    events = '[data-testid="timeline-event"]'
    with storeless_server(port, run_id, "busy"):
        browser.get(f"http://127.0.0.1:{port}/")
        browser_click(browser, "run-row")
        wait.until(lambda d: d.find_element(By.ID, "connection").text == "live")
        memory = "return window.tinyagentsConsole.memory()"
        # far more events than the brief run below logs in all
        wait.until(lambda d: d.execute_script(memory)["last_event_id"] >= 80)
        assert not browser.find_elements(By.CSS_SELECTOR, f'{events}[data-type="run.completed"]')
    restarted = datetime.now(UTC)
    with storeless_server(port, run_id, then):
        # the same run id, the new process's log: its run.started, not the old one's
        # (read in one go: the timeline of a busy run changes under a reader)
        timeline = (
            "return [...document.querySelectorAll('[data-testid=\"timeline-event\"]')]"
            ".map(e => [Number(e.dataset.eventId), e.dataset.type,"
            " e.querySelector('time').getAttribute('datetime')])"
        )

        def started_anew(d: Any) -> list[int]:
            return [
                i
                for i, kind, at in d.execute_script(timeline)
                if kind == "run.started" and datetime.fromisoformat(at) > restarted
            ]

        assert wait.until(started_anew) == [1]
        if then == "brief":  # it completes within a dozen events
            done = wait.until(
                lambda d: [
                    i for i, kind, _ in d.execute_script(timeline) if kind == "run.completed"
                ]
            )
            assert done[0] < 80
        # what is shown is the new log's alone, each event once
        ids = [i for i, _, _ in browser.execute_script(timeline)]
        assert len(ids) == len(set(ids)), ids


def test_the_token_line_serve_prints_can_be_pasted_whole(browser: Any, tmp_path: Path) -> None:
    # serve prints "Authorization: Bearer <token>"; pasted whole (or from "Bearer") into the
    # sign-in form it was sent as "Bearer Authorization: Bearer ...": a 401, "paste another
    # one", for the right token
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        token = url.split("#token=")[1]
        assert f"Authorization: Bearer {token}" in printed()
        wait = waiter(browser)
        for pasted in (f"Authorization: Bearer {token}", f"Bearer  {token}"):
            browser.get(url.split("#")[0])
            wait.until(lambda d: d.find_element(By.ID, "token-input").is_displayed())
            field = browser.find_element(By.ID, "token-input")
            field.send_keys(f"  {pasted} ")
            browser.find_element(By.CSS_SELECTOR, '#login-form button[type="submit"]').click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="run-row"]'))
            assert browser.find_element(By.ID, "app").is_displayed()
            stored = browser.execute_script("return sessionStorage.getItem('tinyagents.token')")
            assert stored == token
            browser_click(browser, "sign-out")


def test_an_instruction_that_could_not_be_sent_stays_in_its_field(
    browser: Any, tmp_path: Path
) -> None:
    # the field was emptied as the instruction left, whatever came back: when it did not
    # reach the server (network down, 503), the text written was gone with it
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(fresh("orchestrator", child=False))
        row.click()
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/steer"]})
        text = "check the invoice against the contract, then ask finance before any refund"
        field = browser.find_element(By.ID, "steer-input")
        field.send_keys(text)
        browser_click(browser, "steer-btn")
        sent = wait.until(lambda d: _sent(d, "steer"))
        assert sent["receipt"] == "not sent", sent
        assert browser.find_element(By.ID, "steer-input").get_attribute("value") == text

        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        browser_click(browser, "steer-btn")  # sent again as it is
        receipt = '[data-testid="sent-command"] [data-testid="receipt"]'
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, receipt).text not in ("sending…", "not sent")
        )
        assert browser.find_element(By.CSS_SELECTOR, receipt).text == "accepted"
        assert browser.find_element(By.ID, "steer-input").get_attribute("value") == ""


def test_an_insecure_dev_server_needs_no_token(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path, "--insecure-dev") as (url, printed):
        with screenshot_on_failure(browser, tmp_path, printed):
            wait = waiter(browser)
            browser.get(url)
            wait.until(lambda d: d.find_element(By.ID, "app").is_displayed())
            assert "insecure dev mode" in browser.find_element(By.ID, "who").text
            wait.until(
                lambda d: d.find_elements(
                    By.CSS_SELECTOR, '[data-testid="run-row"][data-agent="orchestrator"]'
                )
            )


def test_a_page_of_another_site_cannot_frame_the_console(browser: Any, tmp_path: Path) -> None:
    # the console answered without X-Frame-Options or a frame-ancestors policy: a page of
    # any site could show it in a frame (in the tab that had signed in, or against an
    # --insecure-dev server, with no token at all) and have the operator click its Pause,
    # Cancel or Approve under something else (clickjacking)
    import http.server

    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path, "--insecure-dev") as (url, printed):
        (tmp_path / "evil").mkdir()
        (tmp_path / "evil" / "index.html").write_text(
            f'<!doctype html><p>win a prize</p><iframe id="f" src="{url}"></iframe>'
        )
        handler = functools.partial(
            http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "evil")
        )
        evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=evil.serve_forever, daemon=True).start()
        try:
            with screenshot_on_failure(browser, tmp_path, printed):
                # the console itself still works (under its content security policy)
                browser.get(url)
                waiter(browser).until(
                    lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="run-row"]')
                )
                # localhost: another origin than the console's 127.0.0.1
                browser.get(f"http://localhost:{evil.server_address[1]}/")
                browser.switch_to.frame(browser.find_element(By.ID, "f"))
                waiter(browser).until(
                    lambda d: d.execute_script("return document.readyState") == "complete"
                )
                # the frame holds no console at all (the browser refused to show it there)
                assert not browser.find_elements(By.ID, "app")
                assert not browser.find_elements(By.ID, "pause-btn")
        finally:
            evil.shutdown()
            evil.server_close()


@contextlib.contextmanager
def screenshot_on_failure(
    driver: Any, tmp_path: Path, printed: Callable[[], str]
) -> Iterator[None]:
    try:
        yield
    except BaseException:
        save_screenshot(driver, tmp_path / "console-failed.png")
        print(printed())
        raise


def save_screenshot(driver: Any, path: Path) -> None:
    """The whole page at the laptop width (the window grows to the page's height)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(900, min(int(height) + 140, 4000)))
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 0


def token_cli(tmp_path: Path, *args: str) -> str:
    """``tinyagents token <args> --store <the demo server's store>``: the token it prints."""
    done = subprocess.run(
        [str(TINYAGENTS), "token", *args, "--store", f"sqlite:///{tmp_path / 'serve.db'}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()[-1]


def waiter(driver: Any) -> Any:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(
        driver, WAIT_S, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
    )


def drive_console(driver: Any, url: str, tmp_path: Path) -> None:
    """What the test does in the page (also run by hand against a scratch server)."""
    from selenium.webdriver.common.by import By

    wait = waiter(driver)
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
    row = wait.until(fresh("research", child=True))
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
    save_screenshot(driver, tmp_path / "console.png")
    return True


_FINISHED = ("completed", "cancelled", "aborted", "limit_exceeded", "failed")


def browser_click(driver: Any, testid: str) -> None:
    """Click the element with ``data-testid``, found afresh (the page redraws what changed)."""
    from selenium.webdriver.common.by import By

    def click(d: Any) -> bool:
        d.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]').click()
        return True

    waiter(driver).until(click)


def fresh(agent: str, *, child: bool) -> Callable[[Any], Any]:
    """A wait condition: a running ``agent`` row (a sub-agent or a top-level run) early in its
    life (at most one model call), so it still runs for the whole exercise."""
    from selenium.webdriver.common.by import By

    def find(driver: Any) -> Any:
        for row in driver.find_elements(
            By.CSS_SELECTOR, f'[data-testid="run-row"][data-status="running"][data-agent="{agent}"]'
        ):
            if (row.get_attribute("data-depth") != "0") == child and int(
                row.get_attribute("data-model-calls") or 0
            ) <= 1:
                return row
        return False

    return find


def pause_a_research_child(driver: Any, wait: Any) -> str:
    """Pause a fresh ``research`` child from the page (its row clicked, then Pause) and wait
    until it shows ``paused``; one that ends first is let go, three tries in all. Its run id."""
    from selenium.webdriver.common.by import By

    for _ in range(3):
        row = wait.until(fresh("research", child=True))
        run_id = str(row.get_attribute("data-run-id"))
        row.click()
        wait.until(lambda d, r=run_id: d.find_element(By.ID, "run-id").text == r)
        browser_click(driver, "pause-btn")
        assert wait.until(lambda d: _sent(d, "pause"))["receipt"] == "accepted"
        status = driver.find_element(By.ID, "run-status")
        wait.until(lambda d, s=status: s.text in ("paused", "completed", "cancelled", "failed"))
        if status.text == "paused":
            return run_id
    pytest.fail("three research children in a row ended before they could be paused")


def _refund_question_row(driver: Any) -> Any:
    """The demo's refund-approval task row once its question is waiting (for ``wait.until``)."""
    from selenium.webdriver.common.by import By

    return driver.find_element(
        By.CSS_SELECTOR,
        '[data-testid="run-row"][data-agent="refund-approval"][data-depth="1"]'
        '[data-status="interrupted"]:not([data-questions="0"])',
    )


def _api_of(url: str) -> tuple[str, dict[str, str]]:
    """The server's base URL and the Authorization header of the token in a console URL."""
    return url.split("#")[0].rstrip("/"), {"Authorization": f"Bearer {url.split('#token=')[1]}"}


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


@contextlib.contextmanager
def hostile_server(port: int) -> Iterator[None]:
    """``hostile_server.py`` on ``port``: runs whose every string is an HTML/JS payload."""
    script = Path(__file__).with_name("hostile_server.py")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line.strip() == "serving", line + proc.stdout.read()
        yield
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def _not_run(driver: Any) -> None:
    """No payload ran: none set ``window.__pwned`` or the title, and none became markup."""
    assert driver.execute_script("return window.__pwned") is None
    assert driver.title == "tinyagents console"
    assert (
        driver.execute_script(
            "return document.querySelectorAll('#app img, #app script, #app a, #app iframe').length"
        )
        == 0
    )


def test_strings_of_runs_show_as_text_and_never_run_as_script(browser: Any, tmp_path: Path) -> None:
    # Run and thread ids, agent, model, tool and node names, tool arguments and results,
    # model errors, steering text, senders and reasons, interrupt questions and answer
    # schemas come from agents, models and other operators: each is an HTML/JS payload here.
    from hostile_server import hostile, hostile_id
    from selenium.webdriver.common.by import By

    port = free_port()
    wait = waiter(browser)
    rows = '[data-testid="run-row"]'
    events = '[data-testid="timeline-event"]'
    with hostile_server(port), screenshot_on_failure(browser, tmp_path, lambda: ""):
        browser.get(f"http://127.0.0.1:{port}/")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, rows)) == 5)
        body = lambda: browser.find_element(By.TAG_NAME, "body").text  # noqa: E731

        # the agent run: its pending steering commands and its timeline
        browser.find_element(
            By.CSS_SELECTOR, f'{rows}[data-status="running"][data-run-id^="run"]'
        ).click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == hostile_id("run"))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="pending-command"]'))
        wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, f'{events}[data-type="steering.rejected"]')
        )
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'{events}[data-type="tool.result"]'))
        # (isolated from the page's words around it: see the bidi test below)
        title = browser.find_element(By.ID, "detail-title").text
        assert title == f"\u2068{hostile('agent')}\u2069"
        shown = body()
        for field in ("agent", "model", "tool-result", "operator", "instruction"):
            assert hostile(field)[:60] in shown, field
        assert "tool-arg\\\"'><img src=x onerror" in shown  # (the arguments as JSON)
        # what the operator types is text too, in the list of commands sent
        browser.find_element(By.ID, "steer-input").send_keys(hostile("typed"))
        browser_click(browser, "steer-btn")
        wait.until(lambda d: _sent(d, "steer"))
        _not_run(browser)

        # the run whose model failed
        browser.find_element(By.CSS_SELECTOR, f'{rows}[data-status="failed"]').click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == hostile_id("failed-run"))
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'{events}[data-type="run.failed"]'))
        assert "model-error" in body()
        _not_run(browser)

        # the graph task waiting on a question
        browser.find_element(By.CSS_SELECTOR, f'{rows}[data-depth="1"]').click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '[data-testid="interrupt"]'))
        question = browser.find_element(By.CSS_SELECTOR, '[data-testid="interrupt"] .question')
        assert hostile("question")[:60] in question.text
        wait.until(
            lambda d: d.find_elements(By.CSS_SELECTOR, f'{events}[data-type="graph.interrupt"]')
        )
        _not_run(browser)


#: Whether the character at ``arguments[2]`` of the text of ``arguments[0]`` shows after (to
#: the right of, or on a line below) the one at ``arguments[1]``, in a left-to-right page.
_SHOWN_AFTER = """
const [element, before, after] = arguments;
const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
const text = [];
for (let node = walker.nextNode(); node; node = walker.nextNode()) text.push(node);
function rect(index) {
  let at = index < 0 ? text.reduce((n, t) => n + t.length, 0) + index : index;
  for (const node of text) {
    if (at < node.length) {
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + 1);
      return range.getBoundingClientRect();
    }
    at -= node.length;
  }
  throw new Error("no such character");
}
const a = rect(before), b = rect(after);
return b.top >= a.bottom - 1 || (Math.abs(a.top - b.top) < 2 && b.left >= a.right - 1);
"""


def test_a_bidi_override_in_a_runs_string_does_not_reorder_the_page_around_it(
    browser: Any, tmp_path: Path
) -> None:
    # A right-to-left override (U+202E) in a node name or a sender's name reversed the text
    # the page wrote after it: the row's "0 model calls" read "sllac ledom 0", the closing
    # parenthesis after a pending command's sender jumped before it. An agent could dress
    # up what the page says about it (a status, a count) that way. (Ids refuse the override
    # now, node names among them: the graph's name and the sender's still carry it here, and
    # a run stored before the id rule refused it still shows its old id.)
    from selenium.webdriver.common.by import By

    port = free_port()
    wait = waiter(browser)
    rows = '[data-testid="run-row"]'
    with hostile_server(port), screenshot_on_failure(browser, tmp_path, lambda: ""):
        browser.get(f"http://127.0.0.1:{port}/")
        # the graph task's row: "graph · node<payload with an override>", then its counts
        meta = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, f'{rows}[data-depth="1"] .run-meta')
        )
        assert meta.text == "0 model calls · 0 tool calls"
        assert browser.execute_script(_SHOWN_AFTER, meta, 0, -1)
        # the pending command's line: "... (from human <payload with an override>) "
        browser.find_element(
            By.CSS_SELECTOR, f'{rows}[data-status="running"][data-run-id^="run"]'
        ).click()
        line = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="pending-command"]')
        )
        text = browser.execute_script("return arguments[0].firstChild.data", line)
        closing = text.rindex(")")
        assert browser.execute_script(_SHOWN_AFTER, line, closing - 1, closing)


def test_a_very_long_name_or_id_does_not_widen_the_page(browser: Any, tmp_path: Path) -> None:
    # A name of one long word (an agent's, a model's; 3,000 characters) and a run id of 256
    # widened the tree past its card and the page past the window: the run ids and the
    # buttons beside the tree went out of sight, behind a sideways scroll.
    from hostile_server import LONG_ID
    from selenium.webdriver.common.by import By

    port = free_port()
    wait = waiter(browser)
    wider = (
        "return [document.documentElement, document.getElementById('tree')]"
        ".filter(e => e.scrollWidth > e.clientWidth).map(e => e.id || e.tagName)"
    )
    with hostile_server(port), screenshot_on_failure(browser, tmp_path, lambda: ""):
        browser.get(f"http://127.0.0.1:{port}/")
        row = wait.until(
            lambda d: d.find_element(
                By.CSS_SELECTOR, f'[data-testid="run-row"][data-run-id="{LONG_ID}"]'
            )
        )
        row.click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == LONG_ID)
        wait.until(
            lambda d: d.find_elements(
                By.CSS_SELECTOR, '[data-testid="timeline-event"][data-type="model.response"]'
            )
        )
        assert browser.execute_script(wider) == []


def test_a_refused_answer_shows_the_servers_sentence_not_its_json(
    browser: Any, tmp_path: Path
) -> None:
    # A 422 lists its problems in ``detail`` (loc, msg, type) and says them in one sentence
    # in ``message``: the page showed the list as JSON, '[{"loc":["body"],"msg":...}]'.
    from selenium.webdriver.common.by import By

    port = free_port()
    wait = waiter(browser)
    with hostile_server(port), screenshot_on_failure(browser, tmp_path, lambda: ""):
        browser.get(f"http://127.0.0.1:{port}/")
        browser_click(browser, "run-row")  # (any row: the question is the graph task's)
        browser.find_element(By.CSS_SELECTOR, '[data-testid="run-row"][data-depth="1"]').click()
        field = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="answer-value"]')
        )
        # an answer nested deeper than a command's payload may be
        field.send_keys("[" * 200 + "]" * 200)
        browser_click(browser, "approve-btn")
        wait.until(lambda d: _sent(d, "approve"))
        outcome = browser.find_element(
            By.CSS_SELECTOR, '[data-testid="sent-command"] [data-testid="outcome"]'
        ).text
        assert outcome.startswith("invalid input: invalid payload for approve"), outcome
        assert '"loc"' not in outcome
        assert outcome in browser.find_element(By.ID, "toast").get_attribute("textContent")


def test_a_tree_a_thousand_runs_deep_is_shown_without_crashing_the_tab(
    browser: Any, tmp_path: Path
) -> None:
    # Each run was drawn inside its parent's list: a chain of sub-agents a thousand deep
    # (as many as the page reads of a tree) nested the page two thousand elements deep, and
    # Chromium's tab crashed laying it out ("tab crashed"), the operator left with no console.
    from selenium.webdriver.common.by import By

    count = 1000
    _save_runs(
        tmp_path / "serve.db",
        [
            {
                "run_id": f"deep-{i:04d}",
                "root_run_id": "deep-0000",
                "parent_run_id": None if i == 0 else f"deep-{i - 1:04d}",
                "tenant_id": "default",
                "agent_id": "deep",
                "kind": "agent",
                "status": "paused",
                "owner": "rt-gone",
                "created_at": f"2026-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00",
                "updated_at": "2026-01-01T01:00:00+00:00",
            }
            for i in range(count)
        ],
    )
    with (
        serve_demo(tmp_path, "--insecure-dev") as (url, printed),
        screenshot_on_failure(browser, tmp_path, printed),
    ):
        wait = waiter(browser)
        browser.get(url)
        # the live page holds the newest 200 of the chain; picking one reads the whole tree
        wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="run-row"][data-agent="deep"]')
        ).click()
        last = f'[data-run-id="deep-{count - 1:04d}"][data-depth="{count - 1}"]'
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, last)).click()
        wait.until(lambda d: d.find_element(By.ID, "run-id").text == f"deep-{count - 1:04d}")
        assert len(browser.find_elements(By.CSS_SELECTOR, '[data-agent="deep"]')) == count
