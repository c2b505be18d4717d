"""The console in headless Chromium, round nine: long instructions of letters past U+FFFF
(emoji), whose shortened forms on the page (the sent command's label, the timeline's line)
were cut inside a letter, the timeline under a burst of instructions, and an instruction sent
as another operator's cancel settles the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_console_browser import (
    _sent,
    browser,
    browser_click,
    pause_a_research_child,
    screenshot_on_failure,
    serve_demo,
    waiter,
)

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)

#: which of the page's shortened lines (each sent command's label, each timeline line) hold
#: half a letter: a UTF-16 surrogate without its other half (``\p{Cs}`` matches only those in
#: a ``u`` pattern, which reads a whole pair as one letter); their testids and places, not
#: their texts (the driver cannot hand back a text holding half a letter)
HALVES = """
return Array.from(document.querySelectorAll(
  '[data-testid="sent-command"] td:first-child, [data-testid="timeline-event"] .ev-text'
)).map((e, i) => [i, e.closest("[data-testid]").dataset.testid, e.textContent])
  .filter(([i, id, t]) => /\\p{Cs}/u.test(t)).map(([i, id]) => `${id} ${i}`);
"""

#: how many timeline lines show an accepted instruction of emoji (counted in the page)
STEERED = """
return Array.from(document.querySelectorAll(
  '[data-testid="timeline-event"][data-type="steering.accepted"] .ev-text'
)).filter((e) => e.textContent.includes("\\u{1F600}")).length;
"""

#: the labels of the steers sent from the page, each as its first ten letters
LABELS = """
return Array.from(document.querySelectorAll('[data-testid="sent-command"] td:first-child'))
  .map((e) => Array.from(e.textContent).slice(0, 10).join(""));
"""

#: each steer label sent from the page as [shortened, letters, expected]: whether the
#: instruction in it ends with "…" inside its isolate and quote, how many letters (graphemes,
#: the "…" one of them) it shows of the instruction, and whether what it shows is one of
#: ``arguments[0]``; told by the page (a label holding half a letter cannot be handed back)
CUTS = """
const letters = (t) => Array.from(new Intl.Segmenter(undefined, {granularity: "grapheme"})
  .segment(t)).length;
return Array.from(document.querySelectorAll('[data-testid="sent-command"] td:first-child'))
  .map((e) => e.textContent).filter((t) => t.startsWith("steer"))
  .map((t) => {
    const held = /^steer: \u201c\u2068([\\s\\S]*)\u2069\u201d$/u.exec(t);
    const said = held ? held[1] : t;
    return [said.endsWith("\u2026"), letters(said), arguments[0].includes(said)];
  });
"""

#: long instructions, each as its letters (graphemes): emoji after one letter or none (both
#: cut places of an emoji of two UTF-16 units), a family of three joined by U+200D (five code
#: points), a flag (two regional indicators), an ``e`` and its combining acute accent
INSTRUCTIONS = [
    ["a"] + ["\U0001f600"] * 200,
    ["\U0001f600"] * 200,
    ["\U0001f468\u200d\U0001f469\u200d\U0001f467"] * 200,
    ["\U0001f1eb\U0001f1f7"] * 200,
    ["e\u0301"] * 200,
]


def test_long_instructions_of_emoji_are_shortened_between_letters_not_inside_one(
    browser: Any, tmp_path: Path
) -> None:
    """Found: the page shortens a steer's label to its first 60 UTF-16 units and a timeline
    line to 299; an emoji is two, so an instruction of emoji (after one letter, or none) was
    cut inside one, and the page showed half a letter (a lone surrogate, drawn as a box or
    ``\ufffd``). Then, cut between code points, a family of emoji, a flag, a letter and its
    accent were still cut in two. Both are cut between letters (graphemes) now."""
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path, "--insecure-dev") as (url, printed):
        with screenshot_on_failure(browser, tmp_path, printed):
            wait = waiter(browser)
            browser.get(url)
            pause_a_research_child(browser, wait)
            for letters in INSTRUCTIONS:
                field = browser.find_element(By.ID, "steer-input")
                browser.execute_script("arguments[0].value = arguments[1]", field, "".join(letters))
                field.send_keys(".")  # (typed: the page hears an input)
                browser_click(browser, "steer-btn")
                wait.until(
                    lambda d: d.find_element(By.ID, "steer-input").get_attribute("value") == ""
                )
            wait.until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, '[data-testid="sent-command"]')) >= 6
            )
            wait.until(lambda d: d.execute_script(STEERED) >= 2)
            labels = browser.execute_script(LABELS)
            assert sum(label.startswith("steer") for label in labels) == 5, labels
            # shortened (over 200 letters sent): its first 59 letters and "…", 60 in all
            shown = ["".join(letters[:59]) + "\u2026" for letters in INSTRUCTIONS]
            assert browser.execute_script(CUTS, shown) == [[True, 60, True]] * 5
            assert browser.execute_script(HALVES) == []


#: the timeline's event ids, newest first as the page shows them
TIMELINE_IDS = """
return Array.from(document.querySelectorAll('[data-testid="timeline-event"]'))
  .map((e) => Number(e.dataset.eventId));
"""


def test_the_timeline_under_a_burst_of_instructions_keeps_its_newest_events_each_once(
    browser: Any, tmp_path: Path
) -> None:
    """Eight scripts send a paused run 400 instructions at once while the console follows
    the demo: the timeline keeps at most its 500 newest events, each once, newest first, and
    the last instruction sent is among them."""
    from concurrent.futures import ThreadPoolExecutor

    import requests
    from selenium.webdriver.common.by import By

    with serve_demo(tmp_path, "--insecure-dev") as (url, printed):
        with screenshot_on_failure(browser, tmp_path, printed):
            wait = waiter(browser)
            browser.get(url)
            run_id = pause_a_research_child(browser, wait)
            steer = f"{url.rstrip('/')}/api/agents/runs/{run_id}/steer"

            def send(i: int) -> str:
                r = requests.post(
                    steer, json={"message": f"burst {i}", "correlation_id": f"b-{i}"}, timeout=60
                )
                return str(r.json()["status"])

            with ThreadPoolExecutor(8) as pool:
                assert set(pool.map(send, range(399))) == {"accepted"}
            assert send(399) == "accepted"  # the last one, after all the others
            wait.until(
                lambda d: d.find_elements(
                    By.CSS_SELECTOR,
                    '[data-testid="timeline-event"][data-type="steering.accepted"]'
                    '[data-correlation-id="b-399"]',
                )
            )
            ids = browser.execute_script(TIMELINE_IDS)
            assert len(ids) == 500, len(ids)  # (the burst alone is 800 events)
            assert ids == sorted(set(ids), reverse=True), ids


def test_an_instruction_sent_as_another_operator_cancels_the_run_is_shown_failed(
    browser: Any, tmp_path: Path
) -> None:
    """Two operators on one paused run: one cancels it from a script, and the console's
    instruction is sent in the same moment (before the page has heard of the cancel). The
    page does not leave it as ``accepted``: its row ends with the command's real outcome
    (failed or superseded: the run finished before it was delivered), the run shows
    cancelled, and the instruction's controls are off."""
    import requests
    from selenium.webdriver.common.by import By
    from test_console_browser import _terminal

    with serve_demo(tmp_path, "--insecure-dev") as (url, printed):
        with screenshot_on_failure(browser, tmp_path, printed):
            wait = waiter(browser)
            browser.get(url)
            run_id = pause_a_research_child(browser, wait)
            field = browser.find_element(By.ID, "steer-input")
            browser.execute_script("arguments[0].value = arguments[1]", field, "wrap it up")
            field.send_keys("!")
            r = requests.post(
                f"{url.rstrip('/')}/api/agents/runs/{run_id}/abort",
                json={"delivery": "immediate", "reason": "a colleague's cancel"},
                timeout=60,
            )
            assert r.json()["status"] == "accepted", r.text
            # (the click lands before the page hears of the cancel: submitted at once)
            browser.execute_script("document.getElementById('steer-form').requestSubmit()")
            steer = wait.until(lambda d: _sent(d, "steer"))
            assert steer["receipt"] in ("accepted", "rejected"), steer
            wait.until(lambda d: d.find_element(By.ID, "run-status").text == "cancelled")
            cid = steer["correlation_id"]
            if steer["receipt"] == "accepted":
                assert wait.until(lambda d: _terminal(d, cid)) in (
                    "steering.failed",
                    "steering.superseded",
                )
            outcome = browser.find_element(
                By.CSS_SELECTOR,
                f'[data-testid="sent-command"][data-correlation-id="{cid}"] '
                '[data-testid="outcome"]',
            )
            wait.until(
                lambda d: outcome.text.startswith(("failed", "superseded", "rejected")),
            )
            for control in ("pause-btn", "resume-btn", "cancel-btn", "steer-btn"):
                assert not browser.find_element(By.ID, control).is_enabled(), control
