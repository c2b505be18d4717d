"""Real clients, round eight: a script paging ``GET /runs`` with ``requests`` (its ``Link``
headers) while runs keep starting, and the CLI's pages (``--cursor``) meanwhile
(test_real_clients to _7 have the routes, heads, caches, reconnects, races and the CLI's help
and tokens)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import requests
from operator_server import BASE, IDLE_S, Served

TINYAGENTS = Path(sys.executable).with_name("tinyagents")


def _pages(url: str, token: str, *, limit: int, between: Any) -> list[list[str]]:
    """Every page of ``GET /runs?limit=`` followed by its ``rel="next"`` link (as
    ``requests`` parses it), ``between()`` called after each page: the run ids of each."""
    pages: list[list[str]] = []
    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {token}"
        r = session.get(f"{url}{BASE}/runs", params={"limit": limit}, timeout=30)
        while True:
            assert r.status_code == 200, r.text
            pages.append([run["run_id"] for run in r.json()])
            between()
            following = r.links.get("next", {}).get("url")
            if not following:
                return pages
            r = session.get(requests.compat.urljoin(url, following), timeout=30)


async def test_paging_the_runs_while_runs_start_lists_each_run_once(served: Served) -> None:
    """A script pages the runs three at a time while two runs start after each page it
    reads: every run there when it began is listed, each once, newest first, none of the
    runs started meanwhile slipping into a later page (they are newer than its cursor)."""
    before = [await served.start_run("acme", think_s=IDLE_S) for _ in range(10)]
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def start_two() -> None:
        for _ in range(2):
            run = asyncio.run_coroutine_threadsafe(
                served.start_run("acme", think_s=IDLE_S), loop
            ).result(timeout=30)
            started.append(run.run_id)

    token = served.tokens["alice"]
    pages = await asyncio.to_thread(_pages, served.url, token, limit=3, between=start_two)
    listed = [run_id for page in pages for run_id in page]
    assert len(listed) == len(set(listed)), f"listed twice: {listed}"
    assert set(listed) == {run.run_id for run in before}, (listed, started)
    assert [len(page) for page in pages] == [3, 3, 3, 1]
    assert listed == [run.run_id for run in reversed(before)]  # newest first


async def test_the_clis_pages_go_on_from_its_cursor_while_runs_start(served: Served) -> None:
    """``tinyagents runs list --url --limit 4 --json`` prints a page, and on stderr the
    cursor of the next; runs started before the next page (``--cursor``) are not in it, and
    the two pages hold every earlier run once, the second saying there are no more."""
    before = [await served.start_run("acme", think_s=IDLE_S) for _ in range(7)]
    env = {**os.environ, "TINYAGENTS_TOKEN": served.tokens["alice"]}

    async def page(*extra: str) -> tuple[list[str], str | None]:
        proc = await asyncio.create_subprocess_exec(
            str(TINYAGENTS), "runs", "list", "--url", served.url, "--json", "--limit", "4",
            *extra,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )  # fmt: skip
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        cursor = re.search(r"--cursor (\S+)", err.decode())
        return [run["run_id"] for run in json.loads(out)], cursor and cursor.group(1)

    first, cursor = await page()
    for _ in range(3):
        await served.start_run("acme", think_s=IDLE_S)
    assert cursor, first
    second, end = await page("--cursor", cursor)
    assert first + second == [run.run_id for run in reversed(before)], (first, second)
    assert end is None
