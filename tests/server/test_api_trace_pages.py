"""``GET /runs/{id}/trace`` a page at a time: the run's latest ``?limit=`` frames (default
500, at most 5000), oldest first, and the page of older ones in a ``Link: <...>;
rel="next"`` header (``?before=`` the oldest id shown). The store is asked for that page
alone, newest first, however long the run's log is."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from operator_server import BASE, Served, _serve, eventually

from tinyagents.events import Event, RunEvent
from tinyagents.server import Control
from tinyagents.store import SqliteStore


def events_of(run_id: str, n: int, *, tenant: str = "acme") -> list[Event]:
    return [
        RunEvent(
            type="run.status",
            run_id=run_id,
            root_run_id=run_id,
            tenant_id=tenant,
            status=f"step {i}",
        )
        for i in range(n)
    ]


class CountingStore(SqliteStore):
    """A SQLite store that counts the event-log rows each read hands back."""

    rows_read = 0

    async def read_events(self, **kw: Any) -> Any:
        rows = await super().read_events(**kw)
        self.rows_read += len(rows)
        return rows

    async def last_events(self, **kw: Any) -> Any:
        rows = await super().last_events(**kw)
        self.rows_read += len(rows)
        return rows


async def test_a_trace_reads_its_page_not_the_runs_whole_log(tmp_path: Path) -> None:
    """The trace kept the last ``limit`` frames of the run's whole log, read from its first
    event in pages of 1,000: a run with millions of events made every trace request read
    (and parse) all of them. It now reads the page it answers, newest first."""
    store = CountingStore(tmp_path / "runs.db")
    await store.open()
    try:
        run = {"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme", "status": "running"}
        await store.save_runs([run])
        for _ in range(6):
            await store.append_events(events_of("r-1", 1000))
        await store.append_events(events_of("r-2", 10))  # another run's, after it
        control = Control(store=store)
        store.rows_read = 0
        frames = await control.trace("r-1", tenant_id="acme", limit=10)
        assert frames is not None
        assert [f["id"] for f in frames] == list(range(5991, 6001))
        assert [f["status"] for f in frames] == [f"step {i}" for i in range(990, 1000)]
        assert store.rows_read <= 11, store.rows_read
        older = await control.trace("r-1", tenant_id="acme", limit=3, before=5991)
        assert [f["id"] for f in older or ()] == [5988, 5989, 5990]
        assert await control.trace("r-1", tenant_id="globex", limit=3) is None
    finally:
        await store.close()


def next_link(response: httpx.Response) -> str | None:
    link = response.headers.get("link")
    if link is None:
        return None
    found = re.fullmatch(r'<([^>]*)>; rel="next"', link)
    assert found, link
    return found.group(1)


@pytest.mark.parametrize("store", [None, "memory://", "sqlite"])
async def test_the_pages_of_a_trace_walk_back_through_the_whole_log(
    tmp_path: Path, store: str | None
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}" if store == "sqlite" else store
    async for s in _serve(tmp_path, store=url):
        run = await s.start_run("acme")
        await run.cancel("done")
        await run.result()
        for e in events_of(run.run_id, 40):
            s.runtime.bus.publish(e)
        path = f"{BASE}/runs/{run.run_id}/trace"

        async def logged(
            s: Served = s, path: str = path
        ) -> httpx.Response | None:  # the 40 are in the log (a store writes
            r = await s.client.get(path, headers=s.as_("alice"))  # them a moment later)
            return (
                r if sum(f.get("status", "").startswith("step ") for f in r.json()) == 40 else None
            )

        r = await eventually(logged)
        assert r.status_code == 200 and "link" not in r.headers  # the whole trace: no more
        whole = r.json()
        assert len(whole) > 40
        pages: list[list[dict[str, Any]]] = []
        link: str | None = f"{path}?limit=7"
        while link is not None:
            r = await s.client.get(link, headers=s.as_("alice"))
            assert r.status_code == 200, r.text
            page = r.json()
            assert 1 <= len(page) <= 7
            assert [f["id"] for f in page] == sorted(f["id"] for f in page)
            pages.append(page)
            link = next_link(r)
            if link is not None:
                assert link.startswith(f"{path}?") and "limit=7" in link
                assert f"before={page[0]['id']}" in link
        assert [f for p in reversed(pages) for f in p] == whole
        assert all(len(p) == 7 for p in pages[:-1])
        # the cursor is a place in the log: another tenant's token gets the unknown run's 404
        for who in ("bob",):
            r = await s.client.get(f"{path}?before={whole[-1]['id']}", headers=s.as_(who))
            unknown = await s.client.get(
                f"{BASE}/runs/r-000000000000/trace?before=1", headers=s.as_(who)
            )
            assert (
                (r.status_code, r.text)
                == (unknown.status_code, unknown.text)
                == (
                    404,
                    unknown.text,
                )
            )
        # before the first event: nothing (no link)
        r = await s.client.get(f"{path}?before={whole[0]['id']}", headers=s.as_("alice"))
        assert r.status_code == 200 and r.json() == [] and "link" not in r.headers


@pytest.mark.parametrize(
    "query",
    [
        "before=0",
        "before=-1",
        "before=abc",
        "before=",
        "before=1.5",
        "before=1&before=2",
        f"before={2**63}",
        "before=" + "9" * 5000,
        # digits only, as an event id of /events is: int() reads these as 30, 5, 5 and 5
        "before=3_0",
        "before=%2B5",
        "before=5.0",
        "before=%205",
    ],
)
async def test_a_bad_trace_cursor_is_a_422_naming_it(tmp_path: Path, query: str) -> None:
    async for s in _serve(tmp_path, store=None):
        run = await s.start_run("acme")
        r = await s.client.get(f"{BASE}/runs/{run.run_id}/trace?{query}", headers=s.as_("alice"))
        assert r.status_code == 422, (query, r.status_code, r.text[:200])
        assert "before" in r.json()["message"], r.json()
        assert len(r.text) < 4000


async def test_the_trace_cursor_is_in_the_openapi_document(tmp_path: Path) -> None:
    async for s in _serve(tmp_path, store=None):
        doc = (await s.client.get(f"{BASE}/openapi.json")).json()
        trace = doc["paths"][f"{BASE}/runs/{{run_id}}/trace"]["get"]
        params = {p["name"]: p for p in trace["parameters"]}
        assert params["limit"]["schema"]["default"] == 500
        assert params["limit"]["schema"]["maximum"] == 5000
        assert params["before"]["schema"]["anyOf"][0]["minimum"] == 1
        assert "Link" in trace["responses"]["200"]["headers"]


async def test_a_trace_holding_a_lone_surrogate_is_answered_and_reads_back(
    tmp_path: Path,
) -> None:
    """A run's event holding half a UTF-16 pair (from a model's or a tool's output) made its
    trace a 500: the response's UTF-8 had no bytes for it. It is JSON's escape, as in
    ``Event.to_json``, and reads back as the character."""
    async for s in _serve(tmp_path, store=None):
        run = await s.start_run("acme")
        await run.cancel("done")
        await run.result()
        s.runtime.bus.publish(
            RunEvent(
                type="run.status",
                run_id=run.run_id,
                root_run_id=run.run_id,
                tenant_id="acme",
                status="half a pair: \ud800!",
                detail={"a key's half \udfff": ["\udc00"]},  # a key's was U+FFFD
            )
        )
        r = await s.client.get(f"{BASE}/runs/{run.run_id}/trace", headers=s.as_("alice"))
        assert r.status_code == 200, r.text
        assert "\\ud800" in r.content.decode("ascii", "replace")
        assert r.json()[-1]["status"] == "half a pair: \ud800!"
        assert r.json()[-1]["detail"] == {"a key's half \udfff": ["\udc00"]}
