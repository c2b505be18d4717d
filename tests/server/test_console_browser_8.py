"""The console in headless Chromium, round eight: finished trees hidden while more pages of
runs remain, and an instruction measured as the server measures it (UTF-8 bytes of its JSON,
not characters)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_process import serving
from test_console_browser import (
    TINYAGENTS,
    _save_finished_runs,
    _sent,
    browser,
    free_port,
    storeless_server,
    waiter,
)

from tinyagents.steering.policies import DEFAULT_MAX_TEXT_BYTES

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)

ROWS = '[data-testid="run-row"]'


@contextlib.contextmanager
def serve_store(tmp_path: Path) -> Iterator[str]:
    """``tinyagents serve --insecure-dev`` (no demo: nothing runs) over ``serve.db``: its URL."""
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    argv = [str(TINYAGENTS), "serve", "--insecure-dev", "--port", str(port),
            "--store", f"sqlite:///{tmp_path / 'serve.db'}"]  # fmt: skip
    with serving(argv, port, env=env, cwd=tmp_path):
        yield f"http://127.0.0.1:{port}/"


def test_finished_trees_hidden_with_more_pages_to_read_are_n_or_more(
    browser: Any, tmp_path: Path
) -> None:
    """450 finished runs and none live, more than the 200 the console reads a poll: hidden,
    the page says "200 or more finished trees" (it read only the newest page), and "them";
    the "more runs" note stays. Shown again, the newest twelve trees are back and the hint
    goes."""
    from selenium.webdriver.common.by import By

    _save_finished_runs(tmp_path / "serve.db", 450)
    with serve_store(tmp_path) as url:
        wait = waiter(browser)
        browser.get(url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f'{ROWS}[data-run-id="old-0449"]'))
        assert len(browser.find_elements(By.CSS_SELECTOR, ROWS)) == 12
        browser.find_element(By.ID, "show-finished").click()
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, ROWS))
        hidden = browser.find_element(By.ID, "tree-hidden")
        assert hidden.is_displayed()
        assert hidden.text == (
            "No live runs: 200 or more finished trees hidden "
            "(tick “show finished trees” to see them)."
        ), hidden.text
        assert browser.find_element(By.ID, "tree-more").is_displayed()
        assert not browser.find_element(By.ID, "tree-empty").is_displayed()
        browser.find_element(By.ID, "show-finished").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ROWS)) == 12)
        assert not hidden.is_displayed()


#: ``{"text":""}``: what the payload of an instruction adds to its text's bytes.
WRAPPING = len('{"text":""}')


def _type(driver: Any, field: Any, text: str) -> None:
    """``text`` into ``field``: all but its last character set, the last typed (an input
    event, as typing the whole would give)."""
    driver.execute_script("arguments[0].value = arguments[1]", field, text[:-1])
    field.send_keys(text[-1])


def _sent_rows(driver: Any) -> int:
    from selenium.webdriver.common.by import By

    return len(driver.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]'))


def test_the_instruction_field_counts_the_bytes_the_server_counts(browser: Any) -> None:
    """The field counted 16,000 characters: English past 16,000 characters (within the
    server's 16 KiB) was cut, and 9,000 accented letters (18,000 bytes) were let through to
    be refused. It counts UTF-8 bytes of the payload's JSON: ASCII up to the limit is kept
    whole and accepted; accented text one byte over is not sent, said to be too long (by how
    much), and kept; one byte less is accepted. Line breaks count as their JSON escapes."""
    from selenium.webdriver.common.by import By
    from test_console_browser import browser_click

    room = DEFAULT_MAX_TEXT_BYTES - WRAPPING  # bytes of text that fit
    port = free_port()
    with storeless_server(port, "r-busy", "busy"):
        wait = waiter(browser)
        browser.get(f"http://127.0.0.1:{port}/")
        browser_click(browser, "run-row")
        status = browser.find_element(By.ID, "run-status")
        wait.until(lambda d: status.text == "running")
        field = browser.find_element(By.ID, "steer-input")

        english = "a" * room  # 16,373 characters: past the old 16,000
        _type(browser, field, english)
        assert field.get_attribute("value") == english, "the field cut the text"
        size = browser.find_element(By.ID, "steer-size")
        assert not size.is_displayed(), size.text
        browser_click(browser, "steer-btn")
        sent = wait.until(lambda d: _sent(d, "steer"))
        assert sent["receipt"] == "accepted", sent
        assert field.get_attribute("value") == ""

        over = "é" * (room // 2) + "é"  # 16,374 bytes of text (8,187 characters)
        _type(browser, field, over)
        wait.until(lambda d: size.is_displayed())
        assert f"{len(over.encode()) + WRAPPING:,} bytes" in size.text, size.text
        assert f"{DEFAULT_MAX_TEXT_BYTES:,}" in size.text, size.text
        assert field.get_attribute("aria-invalid") == "true"
        rows = _sent_rows(browser)
        browser_click(browser, "steer-btn")
        toast = browser.find_element(By.ID, "toast")
        wait.until(lambda d: toast.text.startswith("Too long to send"))
        assert _sent_rows(browser) == rows, "an instruction past the limit was sent"
        assert field.get_attribute("value") == over, "the text to shorten is gone"

        fits = "é" * (room // 2) + "a"  # 16,373 bytes: exactly the room
        _type(browser, field, fits)
        wait.until(lambda d: not size.is_displayed())
        assert field.get_attribute("aria-invalid") != "true"
        browser_click(browser, "steer-btn")
        wait.until(lambda d: _sent_rows(d) == rows + 1)
        sent = wait.until(lambda d: _sent(d, "steer"))
        assert sent["receipt"] == "accepted", sent

        # a line break is two bytes of JSON (its escape), as the server counts it
        _type(browser, field, "\n" * (room // 2 + 1) + "a")
        wait.until(lambda d: size.is_displayed())
        lines = "\n" * (room // 2) + "a"  # 8,187 characters, exactly the room
        _type(browser, field, lines)
        wait.until(lambda d: not size.is_displayed())
        browser_click(browser, "steer-btn")
        wait.until(lambda d: _sent_rows(d) == rows + 2)
        sent = wait.until(lambda d: _sent(d, "steer"))
        assert sent["receipt"] == "accepted", sent


def test_an_instruction_written_for_one_run_stays_with_it_when_another_is_picked(
    browser: Any, tmp_path: Path
) -> None:
    """An instruction (and tools to narrow to) written for one run stayed in the fields when
    another run was picked, by a click or by Back: Send then steered a run it was not
    written for. Each run keeps what was written for it: the other run's fields are empty,
    and Back brings the first run back with its text, Forward the other without. An
    instruction the server refuses once another run is picked (its answer slowed) goes back
    to its own run's field, not to the run selected then."""
    from selenium.webdriver.common.by import By
    from test_console_browser import fresh, screenshot_on_failure, serve_demo

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        row = wait.until(fresh("orchestrator", child=False))
        first = row.get_attribute("data-run-id")
        row.click()
        run_id = browser.find_element(By.ID, "run-id")
        wait.until(lambda d: run_id.text == first)
        steer = browser.find_element(By.ID, "steer-input")
        tools = browser.find_element(By.ID, "tools-input")
        steer.send_keys("only billing evidence, for the first run")
        tools.send_keys("search")

        other = wait.until(
            lambda d: [
                r for r in d.find_elements(By.CSS_SELECTOR, ROWS)
                if r.get_attribute("data-run-id") != first
            ]
        )[0]  # fmt: skip
        second = other.get_attribute("data-run-id")
        other.click()
        wait.until(lambda d: run_id.text == second)
        assert steer.get_attribute("value") == "", "the first run's instruction is offered"
        assert tools.get_attribute("value") == ""

        browser.back()
        wait.until(lambda d: run_id.text == first)
        assert steer.get_attribute("value") == "only billing evidence, for the first run"
        assert tools.get_attribute("value") == "search"
        browser.forward()
        wait.until(lambda d: run_id.text == second)
        assert steer.get_attribute("value") == ""
        assert tools.get_attribute("value") == ""

        # an instruction refused once another run is picked goes back to its own run
        browser.execute_script(
            "const real = window.fetch; window.fetch = (url, init) => String(url).endsWith('/steer')"
            " ? new Promise(r => setTimeout(r, 1500)).then(() => real(url, init))"
            " : real(url, init);"
        )  # its answer slowed, so that another run is picked before it comes
        browser.back()
        wait.until(lambda d: run_id.text == first)
        steer.clear()
        steer.send_keys("\u200b\u200b")  # shows nothing: the server refuses it (422)
        browser.find_element(By.ID, "steer-btn").click()
        assert steer.get_attribute("value") == ""  # gone with the request
        browser.forward()
        wait.until(lambda d: run_id.text == second)
        refused = wait.until(lambda d: _sent(d, "steer"))
        assert refused["receipt"] == "not sent", refused
        assert steer.get_attribute("value") == "", "the first run's instruction is offered"
        browser.back()
        wait.until(lambda d: run_id.text == first)
        assert steer.get_attribute("value") == "\u200b\u200b"
        assert tools.get_attribute("value") == "search"

        # signing out forgets what was written (the next token may be another tenant's)
        browser.forward()  # the first run's text kept for it
        wait.until(lambda d: run_id.text == second)
        browser.find_element(By.ID, "sign-out").click()
        token = url.split("#token=")[1]
        browser.find_element(By.ID, "token-input").send_keys(token)
        browser.find_element(By.ID, "token-input").submit()
        wait.until(lambda d: run_id.text == second)
        # (its row, once the tree is read again)
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, f'{ROWS}[data-run-id="{first}"]'))
        browser.find_element(By.CSS_SELECTOR, f'{ROWS}[data-run-id="{first}"]').click()
        wait.until(lambda d: run_id.text == first)
        assert steer.get_attribute("value") == "", "a signed-out session's text is offered"
        assert tools.get_attribute("value") == ""


def _held_fetch(passes: str, sent: str) -> str:
    """The source of a ``window.fetch`` that passes on at once a request for which the JS
    condition ``passes`` holds (of ``url``) and holds any other ``arguments[0]`` ms, then sends
    it as ``sent`` (a JS expression of ``init`` and ``token``, ``arguments[1]``).
    ``window.__held`` is set once a request is held, ``window.__answered`` once the page has
    had its answer (a moment after it came)."""
    return f"""
window.__realFetch = window.__realFetch || window.fetch;
const real = window.__realFetch;
const [ms, token] = arguments;
window.__held = false;
window.__answered = false;
window.fetch = (url, init) => {{
  if ({passes}) return real(url, init);
  window.__held = true;
  const sent = {sent};
  return new Promise((r) => setTimeout(r, ms))
    .then(() => real(url, sent))
    .then(async (response) => {{
      const body = await response.text();
      setTimeout(() => {{ window.__answered = true; }}, 300);
      return new Response(body, {{ status: response.status, headers: response.headers }});
    }});
}};
"""


#: ``window.fetch`` with the answer to a ``/steer`` slowed by ``arguments[0]`` ms and its
#: instruction one the server refuses (it shows nothing: a 422), or, with a token in
#: ``arguments[1]``, sent with that token (a 401).
_SLOW_REFUSED_STEER = _held_fetch(
    "!String(url).endsWith('/steer')",
    "token ? { ...init, headers: { ...init.headers, Authorization: `Bearer ${token}` } }"
    " : { ...init, body: JSON.stringify({ message: '\\u200b' }) }",
)


def test_an_instruction_refused_after_signing_out_is_not_kept_for_the_next_session(
    browser: Any, tmp_path: Path
) -> None:
    """Signing out forgets what was written, but an instruction in flight meanwhile came
    back when the server refused it: kept as its run's draft (answered while signed out, or
    a 401 that signed the page out), or put back in the field (answered once signed in
    again), for the next session, perhaps another tenant's, to see when that run is picked;
    a toast said it too. An answer to the session before is dropped: the field stays empty,
    nothing says the text."""
    from selenium.webdriver.common.by import By
    from test_console_browser import fresh, screenshot_on_failure, serve_demo

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        token = url.split("#token=")[1]
        row = wait.until(fresh("orchestrator", child=False))
        first = row.get_attribute("data-run-id")
        row.click()
        run_id = browser.find_element(By.ID, "run-id")
        wait.until(lambda d: run_id.text == first)
        steer = browser.find_element(By.ID, "steer-input")
        tools = browser.find_element(By.ID, "tools-input")
        toast = browser.find_element(By.ID, "toast")

        def answered(d: Any) -> bool:
            return bool(d.execute_script("return window.__answered"))

        def sign_in() -> None:
            browser.find_element(By.ID, "token-input").send_keys(token)
            browser.find_element(By.ID, "token-input").submit()
            wait.until(lambda d: run_id.text == first)  # the run in the address, picked again

        def steer_then_sign_out(text: str) -> None:
            steer.send_keys(text)
            tools.send_keys("search")
            browser.find_element(By.ID, "steer-btn").click()
            browser.find_element(By.ID, "sign-out").click()
            assert steer.get_attribute("value") == ""
            assert tools.get_attribute("value") == ""

        def forgotten(text: str) -> None:
            assert steer.get_attribute("value") == "", "a signed-out session's text is offered"
            assert tools.get_attribute("value") == ""
            assert text not in (toast.get_attribute("textContent") or ""), "a toast says it"
            assert _sent_rows(browser) == 0

        # refused while signed out: it was kept as its run's draft
        browser.execute_script(_SLOW_REFUSED_STEER, 1500, None)
        steer_then_sign_out("billing evidence only, session one")
        wait.until(answered)
        sign_in()
        forgotten("session one")

        # refused once signed in again and the run picked: it was put back in the field
        browser.execute_script(_SLOW_REFUSED_STEER, 4000, None)
        steer_then_sign_out("billing evidence only, session two")
        sign_in()
        assert not answered(browser), "signed in again after the answer: not this case"
        wait.until(answered)
        forgotten("session two")

        # a 401 (the token refused) signs the page out: the text was kept as the run's draft
        browser.execute_script(_SLOW_REFUSED_STEER, 0, "not-a-token")
        steer.send_keys("billing evidence only, session three")
        browser.find_element(By.ID, "steer-btn").click()
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        wait.until(answered)
        assert "not accept this token" in browser.find_element(By.ID, "login-error").text
        sign_in()
        forgotten("session three")

        # (the same session's refused instruction still comes back to its field)
        browser.execute_script(_SLOW_REFUSED_STEER, 0, None)
        steer.send_keys("billing evidence only, session four")
        browser.find_element(By.ID, "steer-btn").click()
        wait.until(answered)
        assert steer.get_attribute("value") == "billing evidence only, session four"


#: ``window.fetch`` with the next poll's ``GET /runs?limit=`` held ``arguments[0]`` ms and
#: then answered 401 (sent with a token the server does not know, as when the token it was
#: made with has expired meanwhile).
_HELD_POLL_REFUSED = _held_fetch(
    "window.__held || !String(url).includes('/runs?limit=')",
    "{ ...init, headers: { ...init.headers, Authorization: 'Bearer not-a-token' } }",
)


def test_a_401_answering_the_session_before_does_not_sign_out_the_next(
    browser: Any, tmp_path: Path
) -> None:
    """A poll made with one token and refused (401) after the operator signed out and in
    with another signed the page out again: the answer was taken for the new token's. It
    belongs to a session that is over and is dropped: the page stays signed in with the new
    token, its runs listed, no sign-in prompt and no error."""
    from selenium.webdriver.common.by import By
    from test_console_browser import screenshot_on_failure, serve_demo, token_cli

    with serve_demo(tmp_path) as (url, printed), screenshot_on_failure(browser, tmp_path, printed):
        wait = waiter(browser)
        browser.get(url)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ROWS))
        other = token_cli(
            tmp_path, "mint", "--tenant", "default", "--user", "colin",
            "--rights", "agent:observe,agent:control",
        )  # fmt: skip
        login = browser.find_element(By.ID, "login")
        app = browser.find_element(By.ID, "app")

        browser.execute_script(_HELD_POLL_REFUSED, 4000)
        wait.until(lambda d: d.execute_script("return window.__held"))
        browser.find_element(By.ID, "sign-out").click()
        wait.until(lambda d: login.is_displayed())
        browser.find_element(By.ID, "token-input").send_keys(other)
        browser.find_element(By.ID, "token-input").submit()
        wait.until(lambda d: app.is_displayed())
        assert not browser.execute_script("return window.__answered"), "answered too soon"

        wait.until(lambda d: d.execute_script("return window.__answered"))
        assert not login.is_displayed(), "the last session's 401 signed the new one out"
        assert app.is_displayed()
        assert browser.find_element(By.ID, "login-error").text == ""
        # the next poll (the held one kept the page's polls waiting) lists the runs again
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ROWS))
        assert not login.is_displayed()
        assert browser.execute_script("return sessionStorage.getItem('tinyagents.token')") == other
