"""The console in headless Chromium, round four (one browser window for the module: the
machine's cores are shared), on the scale-out setup: ``tinyagents serve --demo --workers 2``
over PostgreSQL with Redis, its console's requests landing on either worker."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import free_port, serving
from services import pg_schema, postgres_dsn, redis_url, unique_prefix
from test_console_browser import (
    THINK_S,
    TINYAGENTS,
    _api_of,
    _refund_question_row,
    _sent,
    _terminal,
    browser,
    browser_click,
    console_url,
    exercise_one_child,
    screenshot_on_failure,
    waiter,
)
from test_real_clients_4 import drop_own

__all__ = ["browser"]  # the fixture, used by name

pytestmark = pytest.mark.timeout(300)


@contextmanager
def serve_scaled_demo(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """``serve --demo --workers 2 --redis ... --store postgresql://...?schema=...`` (a schema
    and a Redis prefix of its own) on a free port: (console URL, printed output)."""
    port, prefix = free_port(), unique_prefix("rc4").rstrip(":")
    store = f"{postgres_dsn()}?schema={pg_schema()}"  # a schema of its own
    env = {**os.environ, "TINYAGENTS_DEMO_THINK_S": THINK_S, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("TINYAGENTS_SERVER_KEY", None)
    argv = [str(TINYAGENTS), "serve", "--demo", "--port", str(port), "--workers", "2",
            "--redis", redis_url(), "--redis-prefix", prefix, "--store", store,
            "--key-file", str(tmp_path / "server.key")]  # fmt: skip
    try:
        with serving(
            argv,
            port,
            env=env,
            cwd=tmp_path,
            ready=lambda out: console_url(out, port) is not None,
            wait_s=90,  # a bound on a hang, not a timing
            stop_s=30,
        ) as printed:
            yield str(console_url(printed(), port)), printed
    finally:
        asyncio.run(drop_own(prefix))


def test_the_consoles_workflows_on_two_workers_and_a_string_answer_sent_as_typed(
    browser: Any, tmp_path: Path
) -> None:
    """On two workers over PostgreSQL and Redis: pause, resume and steer a demo child, each
    applied; then the refund question, whose schema's ``value`` is a string ("the amount to
    refund, if not all"): ``50.00`` typed in its field was sent as the JSON number 50 (a
    pydantic ``response_schema`` with ``value: str`` refuses that answer). A field whose
    schema says string is sent as the text typed."""
    from selenium.webdriver.common.by import By

    with (
        serve_scaled_demo(tmp_path) as (url, printed),
        screenshot_on_failure(browser, tmp_path, printed),
    ):
        wait = waiter(browser)
        browser.get(url)
        wait.until(lambda d: d.find_element(By.ID, "app").is_displayed())
        assert any(exercise_one_child(browser, wait, tmp_path) for _ in range(3))

        row = wait.until(_refund_question_row)
        graph_id = row.get_attribute("data-root-run-id")
        row.click()
        field = wait.until(
            lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="answer-value"]')
        )
        field.send_keys("50.00")
        browser_click(browser, "approve-btn")
        approve = wait.until(lambda d: _sent(d, "approve"))
        assert approve["receipt"] == "accepted", approve
        assert wait.until(lambda d: _terminal(d, approve["correlation_id"])) == "steering.applied"
        base, headers = _api_of(url)
        history = httpx.get(
            f"{base}/api/agents/runs/{graph_id}/steering", headers=headers, timeout=60
        )
        (sent,) = [c for c in history.json() if c["correlation_id"] == approve["correlation_id"]]
        assert sent["payload_summary"]["value"] == "50.00", sent
