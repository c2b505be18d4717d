"""``GET /runs/{id}/steering`` a page at a time: the run's latest ``?limit=`` commands
(default 100, at most 1000), in the order first seen, and the page of older ones in a
``Link: <...>; rel="next"`` header (``?before=`` the oldest event id shown). The store is
asked for the run's latest steering events alone, however long its log is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from operator_server import BASE, _serve, eventually
from test_api_trace_pages import CountingStore, events_of, next_link

from tinyagents.events import Event, SteeringEvent
from tinyagents.protocol import SteeringActor, SteeringKind, SteeringTarget
from tinyagents.server import Control


def command_events(run_id: str, cid: str, *, tenant: str = "acme") -> list[Event]:
    return [
        SteeringEvent(
            type=type_,  # type: ignore[arg-type]
            run_id=run_id,
            root_run_id=run_id,
            tenant_id=tenant,
            target=SteeringTarget.agent_run(run_id),
            actor=SteeringActor.human("alice", tenant_id=tenant),
            kind=SteeringKind.PAUSE,
            correlation_id=cid,
        )
        for type_ in ("steering.requested", "steering.rejected")
    ]


async def test_a_command_history_reads_its_page_not_the_runs_whole_log(tmp_path: Path) -> None:
    """The history was every steering event of the run, read and grouped on each request
    (``load_events``): a run sent commands for days answered with all of them. It now reads
    the run's latest steering events back from the end, until the page has ``limit``
    commands."""
    store = CountingStore(tmp_path / "runs.db")
    await store.open()
    try:
        run = {"run_id": "r-1", "root_run_id": "r-1", "tenant_id": "acme", "status": "running"}
        await store.save_runs([run])
        for i in range(6):
            await store.append_events(command_events("r-1", f"c-{i}"))
            await store.append_events(events_of("r-1", 1000))
        control = Control(store=store)
        store.rows_read = 0
        page = await control.steering("r-1", tenant_id="acme", limit=2)
        assert page is not None
        assert [c["correlation_id"] for c in page.commands] == ["c-4", "c-5"]
        assert [c["state"] for c in page.commands] == ["rejected", "rejected"]
        assert store.rows_read <= 10, store.rows_read
        assert page.before is not None
        older = await control.steering("r-1", tenant_id="acme", limit=10, before=page.before)
        assert older is not None and older.before is None
        assert [c["correlation_id"] for c in older.commands] == ["c-0", "c-1", "c-2", "c-3"]
        assert await control.steering("r-1", tenant_id="globex", limit=3) is None
    finally:
        await store.close()


@pytest.mark.parametrize("store", [None, "memory://", "sqlite"])
async def test_the_pages_of_a_command_history_walk_back_through_all_of_it(
    tmp_path: Path, store: str | None
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}" if store == "sqlite" else store
    async for s in _serve(tmp_path, store=url):
        run = await s.start_run("acme")
        sent = []
        for i in range(7):  # one at a time: each one's events are all before the next one's
            body = {"message": f"m{i}"}
            r = await s.client.post(
                f"{BASE}/runs/{run.run_id}/steer", json=body, headers=s.as_("alice")
            )
            cid = r.json()["correlation_id"]
            sent.append(cid)

            async def applied(s: Any = s, cid: str = cid, run_id: str = run.run_id) -> bool:
                r = await s.client.get(f"{BASE}/runs/{run_id}/steering", headers=s.as_("alice"))
                return any(c["correlation_id"] == cid and c["terminal"] for c in r.json())

            await eventually(applied)
        path = f"{BASE}/runs/{run.run_id}/steering"
        r = await s.client.get(path, headers=s.as_("alice"))
        assert r.status_code == 200 and "link" not in r.headers
        whole = r.json()
        assert [c["correlation_id"] for c in whole] == sent
        pages: list[list[dict[str, Any]]] = []
        link: str | None = f"{path}?limit=3"
        while link is not None:
            r = await s.client.get(link, headers=s.as_("alice"))
            assert r.status_code == 200, r.text
            pages.append(r.json())
            link = next_link(r)
            if link is not None:
                assert link.startswith(f"{path}?") and "limit=3" in link
                first = min(e["id"] for c in pages[-1] for e in c["events"])
                assert f"before={first}" in link
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [c for p in reversed(pages) for c in p] == whole
        r = await s.client.get(f"{path}?before=1", headers=s.as_("alice"))
        assert r.status_code == 200 and r.json() == [] and "link" not in r.headers
        for query in ("limit=0", "limit=1001", "before=0", "before=abc", "before=1&before=2"):
            r = await s.client.get(f"{path}?{query}", headers=s.as_("alice"))
            assert r.status_code == 422, (query, r.text)
        # another tenant's token gets the unknown run's 404, cursor or not
        r = await s.client.get(f"{path}?before=5", headers=s.as_("bob"))
        unknown = await s.client.get(
            f"{BASE}/runs/r-000000000000/steering?before=5", headers=s.as_("bob")
        )
        assert (r.status_code, r.text) == (unknown.status_code, unknown.text)
        assert r.status_code == 404
