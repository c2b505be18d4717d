"""``GET /runs`` a page at a time: newest first, ``?limit=`` (default 100, at most 1000) and
an opaque ``?cursor=`` handed back in a ``Link: <...>; rel="next"`` header; the store is asked
for one page, live snapshots are merged into it, and no page or cursor crosses tenants."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

import httpx
import pytest
from operator_server import BASE, Served

from tinyagents import Runtime
from tinyagents.server import Control
from tinyagents.server.control import decode_cursor, encode_cursor
from tinyagents.store import MemoryStore, SqliteStore, Store
from tinyagents.store.sqlite import _SAVE_RUN, _run_row


def snap(
    run_id: str,
    at: int,
    *,
    tenant: str = "acme",
    status: str = "completed",
    root: str | None = None,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "root_run_id": root or run_id,
        "parent_run_id": root,
        "tenant_id": tenant,
        "status": status,
        "kind": "agent",
        "created_at": f"2026-11-{1 + at // 86400:02d}T{at // 3600 % 24:02d}:{at // 60 % 60:02d}:{at % 60:02d}+00:00",
    }


def next_link(response: httpx.Response) -> str | None:
    link = response.headers.get("link")
    if link is None:
        return None
    found = re.fullmatch(r'<([^>]*)>; rel="next"', link)
    assert found, link
    return found.group(1)


async def walk(served: Served, who: str, path: str) -> tuple[list[str], list[int]]:
    """Every run id the pages from ``path`` on list, and the size of each page."""
    ids: list[str] = []
    sizes: list[int] = []
    url: str | None = path
    while url is not None:
        r = await served.client.get(url, headers=served.as_(who))
        assert r.status_code == 200, r.text
        sizes.append(len(r.json()))
        ids += [run["run_id"] for run in r.json()]
        url = next_link(r)
    return ids, sizes


class CountingStore(MemoryStore):
    """A memory store that records what each listing asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[dict[str, Any]] = []

    async def list_runs(self, **kw: Any) -> list[dict[str, Any]]:
        self.asked.append(kw)
        return await super().list_runs(**kw)

    async def load_runs(self, *, tenant_id: str | None = None) -> list[dict[str, Any]]:
        raise AssertionError("a listing never loads every run")


# --------------------------------------------------------------------------- Control


async def test_control_asks_the_store_for_one_page() -> None:
    store = CountingStore()
    await store.save_runs([snap(f"r-{i:04d}", i) for i in range(1000)])
    control = Control(store=store)
    page = await control.page_runs(tenant_id="acme", limit=10)
    assert [r["run_id"] for r in page.runs] == [f"r-{i:04d}" for i in range(999, 989, -1)]
    assert store.asked == [
        {"tenant_id": "acme", "statuses": (), "root_run_id": None, "before": None, "limit": 11}
    ]
    assert page.next_cursor is not None
    assert decode_cursor(page.next_cursor) == (snap("r-0990", 990)["created_at"], "r-0990")


async def test_live_runs_are_merged_into_the_page_they_sort_into() -> None:
    store = MemoryStore()
    await store.save_runs([snap(f"r-{i:02d}", 100 + i) for i in range(30)])
    async with Runtime() as rt:
        control = Control(rt, store=store)
        live = await rt.start(_waiting_agent(), "work", tenant_id="acme")
        # The store holds a stale copy of the live run (saved before it went on).
        stale = {**live.info.snapshot(), "status": "completed", "stale": True}
        await store.save_runs([stale])
        pages: list[list[dict[str, Any]]] = []
        cursor = None
        while True:
            page = await control.page_runs(tenant_id="acme", limit=7, cursor=cursor)
            pages.append(page.runs)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        ids = [r["run_id"] for p in pages for r in p]
        assert ids == [live.run_id] + [f"r-{i:02d}" for i in reversed(range(30))]
        first = pages[0][0]
        assert first["status"] == "running" and "stale" not in first
        # Filtered by the fresh status, not the store's.
        done = await control.page_runs(tenant_id="acme", statuses=("completed",), limit=100)
        assert live.run_id not in [r["run_id"] for r in done.runs]
        running = await control.page_runs(tenant_id="acme", statuses=("running",), limit=100)
        assert [r["run_id"] for r in running.runs] == [live.run_id]
        assert (await control.page_runs(tenant_id="globex", limit=100)).runs == []
        await live.cancel()
        await live.result()
        control.close()


async def test_a_tree_lists_each_runs_children_oldest_first() -> None:
    store = MemoryStore()
    kids = [snap(f"k-{i}", 10 - i, root="top") for i in range(3)]  # k-2 started first
    await store.save_runs([snap("top", 0), *kids])
    tree = await Control(store=store).tree("top", tenant_id="acme")
    assert tree is not None
    assert [c["run_id"] for c in tree["children"]] == ["k-2", "k-1", "k-0"]


class FreshRuns:
    """Stands for the Redis control plane: other workers' live snapshots."""

    enabled = True

    def __init__(self, snaps: list[dict[str, Any]]) -> None:
        self.snaps = snaps

    async def list_runs(self, tenant_id: str | None, *, status: str | None = None) -> Any:
        return [s for s in self.snaps if tenant_id is None or s["tenant_id"] == tenant_id]

    async def get_run(self, run_id: str) -> dict[str, Any] | None:
        return next((s for s in self.snaps if s["run_id"] == run_id), None)


async def test_a_page_whose_store_rows_are_all_stale_still_moves_on() -> None:
    """Every store row of a page is stale (a fresher copy no longer matches the filter): the
    page comes back short, with a cursor past them, and the walk still ends."""
    store = MemoryStore()
    await store.save_runs([snap(f"r-{i:02d}", i, status="running") for i in range(12)])
    fresh = [snap(f"r-{i:02d}", i, status="completed") for i in range(5, 12)]
    control = Control(store=store, redis=FreshRuns(fresh))  # type: ignore[arg-type]

    async def walk_control(statuses: tuple[str, ...]) -> tuple[list[str], list[int]]:
        runs: list[str] = []
        sizes: list[int] = []
        cursor = None
        while True:
            page = await control.page_runs(
                tenant_id="acme", statuses=statuses, limit=5, cursor=cursor
            )
            runs += [r["run_id"] for r in page.runs]
            sizes.append(len(page.runs))
            if page.next_cursor is None:
                return runs, sizes
            cursor = page.next_cursor

    running, sizes = await walk_control(("running",))
    assert running == [f"r-{i:02d}" for i in reversed(range(5))]
    assert sizes[0] == 0
    done, _ = await walk_control(("completed",))
    assert done == [f"r-{i:02d}" for i in reversed(range(5, 12))]
    everything, _ = await walk_control(())
    assert everything == [f"r-{i:02d}" for i in reversed(range(12))]


def _waiting_agent() -> Any:
    from operator_server import busy_agent

    return busy_agent("live", think_s=0.05)


def test_cursors_round_trip_and_garbage_is_refused() -> None:
    key = ("2026-12-01T00:00:00+00:00", "r-1")
    assert decode_cursor(encode_cursor(key)) == key
    for bad in ("", "x", "!!!!", encode_cursor(key)[:-3], "eyJhIjoxfQ", "WzEsMl0"):
        with pytest.raises(ValueError):
            decode_cursor(bad)
    # the right shape, but no place a next link ever held: a time that is not one (it was
    # answered 200, compared as text)
    for made_up in (("not a date", "r-x"), ("2026-13-45T99:00:00", "r")):
        with pytest.raises(ValueError, match="not a cursor this server handed out"):
            decode_cursor(encode_cursor(made_up))
    assert decode_cursor(encode_cursor(("", "r-1"))) == ("", "r-1")  # a run saved with no time


# --------------------------------------------------------------------------- HTTP


async def _store(served: Served) -> Store:
    store = served.runtime.store
    assert isinstance(store, SqliteStore)
    return store


async def test_pages_walk_every_run_once_newest_first(served: Served) -> None:
    store = await _store(served)
    await store.save_runs([snap(f"a-{i:03d}", i) for i in range(250)])
    await store.save_runs([snap(f"g-{i:03d}", i, tenant="globex") for i in range(30)])

    first = await served.client.get(f"{BASE}/runs", headers=served.as_("alice"))
    assert first.status_code == 200
    assert [r["run_id"] for r in first.json()][:3] == ["a-249", "a-248", "a-247"]
    assert len(first.json()) == 100  # the default page
    nxt = next_link(first)
    assert nxt is not None and nxt.startswith(f"{BASE}/runs?") and "limit=100" in nxt

    ids, sizes = await walk(served, "alice", f"{BASE}/runs?limit=40")
    assert ids == [f"a-{i:03d}" for i in reversed(range(250))]
    assert sizes == [40] * 6 + [10]
    globex, _ = await walk(served, "bob", f"{BASE}/runs?limit=7")
    assert globex == [f"g-{i:03d}" for i in reversed(range(30))]


async def test_runs_added_between_pages_are_neither_missed_nor_repeated(served: Served) -> None:
    store = await _store(served)
    await store.save_runs([snap(f"a-{i:03d}", i) for i in range(60)])
    url: str | None = f"{BASE}/runs?limit=9"
    seen: list[str] = []
    added = 0
    while url is not None:
        r = await served.client.get(url, headers=served.as_("alice"))
        seen += [run["run_id"] for run in r.json()]
        added += 1
        await store.save_runs([snap(f"new-{added}", 10_000 + added)])
        url = next_link(r)
    assert seen == [f"a-{i:03d}" for i in reversed(range(60))]
    newest = (await served.client.get(f"{BASE}/runs?limit=1", headers=served.as_("alice"))).json()
    assert newest[0]["run_id"] == f"new-{added}"


async def test_filters_are_kept_in_the_next_link(served: Served) -> None:
    store = await _store(served)
    await store.save_runs(
        [snap(f"a-{i:02d}", i, status="failed" if i % 3 else "completed") for i in range(30)]
        + [snap(f"t-{i:02d}", 100 + i, root="a-00") for i in range(12)]
    )
    failed, _ = await walk(served, "alice", f"{BASE}/runs?status=failed&limit=4")
    assert failed == [f"a-{i:02d}" for i in reversed(range(30)) if i % 3]
    both, sizes = await walk(
        served, "alice", f"{BASE}/runs?status=failed&status=completed&limit=10"
    )
    assert len(both) == len(set(both)) == 42 and len(sizes) == 5  # the tree's are completed too
    # a token sent in the query stays out of the link (it would end up in logs and history)
    r = await served.client.get(
        f"{BASE}/runs", params={"limit": 5, "status": "failed"}, headers=served.as_("alice")
    )
    link = next_link(r)
    assert link is not None and "status=failed" in link
    tree, _ = await walk(served, "alice", f"{BASE}/runs?root_run_id=a-00&limit=5")
    assert tree == [f"t-{i:02d}" for i in reversed(range(12))] + ["a-00"]


async def test_bad_limits_and_cursors_are_422_json(served: Served) -> None:
    await (await _store(served)).save_runs([snap("a-1", 1)])
    for query in (
        "limit=0",
        "limit=1001",
        "limit=x",
        "cursor=garbage",
        "cursor=",
        "cursor=" + "A" * 5000,
        "cursor=W10",  # []
        "cursor=WyJhIiwgMV0",  # ["a", 1]
        "cursor=WyJcdTAwMDAiLCJyIl0",  # ["\u0000","r"]: no store can compare it
        "cursor=WyJcdWQ4MDAiLCJyIl0",  # ["\ud800","r"]
    ):
        r = await served.client.get(f"{BASE}/runs?{query}", headers=served.as_("alice"))
        assert r.status_code == 422, (query, r.text)
        assert r.headers["content-type"] == "application/json"
        assert r.json()["detail"] and r.json()["message"], query


async def test_another_tenants_cursor_leaks_nothing(served: Served) -> None:
    store = await _store(served)
    await store.save_runs([snap(f"a-{i:02d}", 2 * i) for i in range(20)])
    await store.save_runs([snap(f"g-{i:02d}", 2 * i + 1, tenant="globex") for i in range(20)])
    r = await served.client.get(f"{BASE}/runs?limit=5", headers=served.as_("alice"))
    alices = next_link(r)
    assert alices is not None
    # bob follows alice's link: a position in his own listing, never one of her runs
    ids, _ = await walk(served, "bob", alices)
    assert ids and all(i.startswith("g-") for i in ids)
    assert ids == [f"g-{i:02d}" for i in reversed(range(20)) if 2 * i + 1 < 2 * 15]


async def test_a_narrowed_tokens_pages_and_cursors_name_only_runs_it_may_see(
    served: Served,
) -> None:
    """A run outside a narrowed token's scope is answered as no run at all (404); the pages
    of its listing were the store's, filtered: their next links held cursors naming the
    last run of each store page, one the token may not see (its id and start time), and a
    walk was a run of empty pages, one per page of runs it may not see."""
    store = await _store(served)
    family = [snap("root", 100)] + [snap(f"c-{i:02d}", 101 + i, root="root") for i in range(5)]
    for s in family[1:]:
        s["parent_run_id"] = "c-00" if s["run_id"] != "c-00" else "root"
    before = [snap(f"x-{i:02d}", i) for i in range(30)]
    after = [snap(f"y-{i:02d}", 200 + i) for i in range(30)]
    await store.save_runs([*family, *before, *after])
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id="c-00")
    url: str | None = f"{BASE}/runs?limit=2"
    ids: list[str] = []
    sizes: list[int] = []
    named: list[str] = []
    while url is not None:
        r = await served.client.get(url, headers=served.as_(narrowed))
        assert r.status_code == 200, r.text
        ids += [run["run_id"] for run in r.json()]
        sizes.append(len(r.json()))
        url = next_link(r)
        if url is not None:
            named.append(decode_cursor(re.findall(r"cursor=([^&]+)", url)[0])[1])
    assert ids == [f"c-{i:02d}" for i in reversed(range(5))]
    assert sizes == [2, 2, 1]
    assert set(named) <= set(ids), named
    for hidden in ("x-00", "y-00"):
        r = await served.client.get(f"{BASE}/runs/{hidden}", headers=served.as_(narrowed))
        assert r.status_code == 404


async def test_a_narrowed_token_sees_its_subtree_across_pages(served: Served) -> None:
    """The lineage of a run whose parent is on another page is still known."""
    store = await _store(served)
    family = [snap("root", 0)] + [snap(f"c-{i:02d}", 1 + i, root="root") for i in range(20)]
    for s in family[1:]:
        s["parent_run_id"] = "c-00" if s["run_id"] != "c-00" else "root"
    await store.save_runs([*family, snap("other", 50)])
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id="c-00")
    ids, _ = await walk(served, narrowed, f"{BASE}/runs?limit=3")
    assert ids == [f"c-{i:02d}" for i in reversed(range(20))]


def _asking(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record what each listing of ``store`` asks for (and how many rows it answers)."""
    asked: list[dict[str, Any]] = []
    listing = store.list_runs

    async def list_runs(**kw: Any) -> list[dict[str, Any]]:
        rows = await listing(**kw)
        asked.append({**kw, "rows": len(rows)})
        return rows

    monkeypatch.setattr(store, "list_runs", list_runs)
    return asked


async def test_a_narrowed_tokens_listing_reads_its_tree_not_the_tenant(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A token narrowed to a run (``attenuate --run``) sees that run's subtree only, all of
    it in one tree: its listing read the tenant's every run, a store page at a time, and
    asked the token about each (seconds at 20,000 runs, on every request of the console).
    The store is now asked for that tree alone."""
    store = await _store(served)
    family = [snap("root", 1000)] + [snap(f"c-{i:02d}", 1001 + i, root="root") for i in range(5)]
    for s in family[1:]:
        s["parent_run_id"] = "c-00" if s["run_id"] != "c-00" else "root"
    await store.save_runs([*family, *(snap(f"x-{i:04d}", i) for i in range(600))])
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id="c-00")
    twice = served.auth.attenuate(narrowed, run_id="c-01", observe_only=True)
    asked = _asking(store, monkeypatch)
    ids, sizes = await walk(served, narrowed, f"{BASE}/runs?limit=2")
    assert ids == [f"c-{i:02d}" for i in reversed(range(5))] and sizes == [2, 2, 1]
    assert asked and all(a["root_run_id"] == "root" for a in asked), asked
    assert sum(a["rows"] for a in asked) <= 3 * len(family), asked
    asked.clear()
    ids, _ = await walk(served, twice, f"{BASE}/runs?status=completed")
    assert ids == ["c-01"]
    assert asked and all(a["root_run_id"] == "root" for a in asked), asked
    # a tree filter of another tree keeps nothing (the token may see no run there)
    r = await served.client.get(f"{BASE}/runs?root_run_id=x-0001", headers=served.as_(narrowed))
    assert r.status_code == 404


async def test_a_run_id_that_reads_as_two_narrowings_is_still_listed_whole(
    served: Served,
) -> None:
    """A block's source prints a run id unquoted: one holding ``");`` and a newline reads as
    two ``within`` checks. The listing still shows the run the token is narrowed to (a
    run named in a block is used to find the tree only once the token may see it)."""
    store = await _store(served)
    weird = 'w");\ncheck if within("c-00'
    family = [snap("root", 1000), snap("c-00", 1001, root="root")]
    family[1]["parent_run_id"] = "root"
    mine = [snap(weird, 900), snap("k-1", 901, root=weird)]
    await store.save_runs([*family, *(snap(f"x-{i:03d}", i) for i in range(50))])
    # written as an older version wrote it: a store now refuses an id with a newline
    assert isinstance(store, SqliteStore)
    with sqlite3.connect(store.path) as db:
        db.executemany(_SAVE_RUN, [_run_row(s) for s in mine])
    narrowed = served.auth.attenuate(served.tokens["alice"], run_id=weird)
    ids, _ = await walk(served, narrowed, f"{BASE}/runs?limit=1")
    assert ids == ["k-1", weird]
