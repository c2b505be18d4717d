"""Run listing, one page at a time (every backend): ``store.list_runs`` filters by tenant,
status and tree in the store, orders newest first by (created_at, run_id), and a keyset
``before`` walks the runs exactly once while runs are added between pages."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tinyagents.store import SqliteStore, Store
from tinyagents.store.base import run_key
from tinyagents.store.sqlite import MIGRATIONS


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
        "created_at": f"2026-12-01T00:{at // 60:02d}:{at % 60:02d}+00:00",
    }


async def walk(store: Store, limit: int, **filters: Any) -> list[str]:
    seen: list[str] = []
    before = None
    while True:
        page = await store.list_runs(before=before, limit=limit + 1, **filters)
        seen += [r["run_id"] for r in page[:limit]]
        if len(page) <= limit:
            return seen
        before = run_key(page[limit - 1])


async def test_newest_first_one_page_at_a_time(store: Store) -> None:
    await store.save_runs([snap(f"r-{i:02d}", i) for i in range(10)])
    await store.save_runs([snap("g-1", 5, tenant="globex")])
    page = await store.list_runs(tenant_id="acme", limit=3)
    assert [r["run_id"] for r in page] == ["r-09", "r-08", "r-07"]
    after = await store.list_runs(tenant_id="acme", before=run_key(page[-1]), limit=3)
    assert [r["run_id"] for r in after] == ["r-06", "r-05", "r-04"]
    assert await walk(store, 4, tenant_id="acme") == [f"r-{i:02d}" for i in reversed(range(10))]
    assert [r["run_id"] for r in await store.list_runs(tenant_id="globex")] == ["g-1"]
    assert len(await store.list_runs()) == 11  # an administrator: every tenant


async def test_a_limit_of_zero_or_less_lists_nothing(store: Store) -> None:
    # SQLite read LIMIT -1 as no limit at all (every run), PostgreSQL refused it
    await store.save_runs([snap(f"r-{i}", i) for i in range(3)])
    assert await store.list_runs(limit=0) == []
    assert await store.list_runs(limit=-1) == []


async def test_ties_on_created_at_are_broken_by_run_id(store: Store) -> None:
    await store.save_runs([snap(f"r-{c}", 1) for c in "dacbe"])
    assert await walk(store, 2, tenant_id="acme") == ["r-e", "r-d", "r-c", "r-b", "r-a"]


async def test_filters_are_applied_by_the_store(store: Store) -> None:
    await store.save_runs(
        [
            snap("a", 1, status="running"),
            snap("a-1", 2, status="paused", root="a"),
            snap("a-2", 3, status="completed", root="a"),
            snap("b", 4, status="running"),
            snap("x", 5, status="running", tenant="globex"),
        ]
    )
    ids = lambda rows: [r["run_id"] for r in rows]  # noqa: E731
    assert ids(await store.list_runs(tenant_id="acme", statuses=("running",))) == ["b", "a"]
    live = await store.list_runs(tenant_id="acme", statuses=("running", "paused"))
    assert ids(live) == ["b", "a-1", "a"]
    assert ids(await store.list_runs(tenant_id="acme", root_run_id="a")) == ["a-2", "a-1", "a"]
    assert ids(await store.list_runs(tenant_id="globex", root_run_id="a")) == []
    assert ids(await store.list_runs(statuses=("running",))) == ["x", "b", "a"]
    # A status that changed is found under its new status (the upsert moves it).
    await store.save_runs([snap("b", 4, status="completed")])
    assert ids(await store.list_runs(tenant_id="acme", statuses=("running",))) == ["a"]


async def test_a_walk_sees_each_run_once_while_runs_are_added(store: Store) -> None:
    await store.save_runs([snap(f"r-{i:03d}", i) for i in range(50)])
    seen: list[str] = []
    before = None
    added = 0
    while True:
        page = await store.list_runs(tenant_id="acme", before=before, limit=8)
        seen += [r["run_id"] for r in page[:7]]
        # Newer runs arrive (and older ones change status) while the operator pages.
        added += 1
        await store.save_runs([snap(f"new-{added}", 100 + added)])
        await store.save_runs(
            [snap(r["run_id"], int(r["run_id"][2:]), status="failed") for r in page]
        )
        if len(page) <= 7:
            break
        before = run_key(page[6])
    assert seen == [f"r-{i:03d}" for i in reversed(range(50))]
    assert len(set(seen)) == len(seen)


async def test_a_large_sqlite_store_reads_one_page(tmp_path: Path) -> None:
    """100k runs in the file: a page reads ``limit`` rows through the index (the query plan
    sorts nothing), and a walk of another tenant's 5k runs sees each exactly once."""
    path = tmp_path / "runs.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                (
                    s["run_id"],
                    s["root_run_id"],
                    s["tenant_id"],
                    s["status"],
                    json.dumps(s),
                    s["created_at"],
                )
                for s in (
                    snap(f"r-{i:06d}", i % 3600, tenant="acme" if i % 20 else "globex")
                    for i in range(100_000)
                )
            ),
        )
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT data FROM runs WHERE tenant_id = ?"
            " AND (created_at, run_id) < (?, ?) ORDER BY created_at DESC, run_id DESC LIMIT 5",
            ("acme", "2026", "r"),
        ).fetchall()
    assert "USING INDEX" in str(plan) and "TEMP B-TREE" not in str(plan), plan
    await store.open()
    try:
        page = await store.list_runs(tenant_id="acme", limit=50)
        assert len(page) == 50
        assert page[0]["created_at"] == "2026-12-01T00:59:59+00:00"
        globex = await walk(store, 700, tenant_id="globex")
        assert len(globex) == len(set(globex)) == 5000
    finally:
        await store.close()


async def test_runs_saved_before_the_migration_are_listed(tmp_path: Path) -> None:
    """A store file written before runs had a created_at column gets it from the snapshot."""
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE migrations (name TEXT NOT NULL, version INTEGER NOT NULL,"
            " applied_at TEXT NOT NULL, PRIMARY KEY (name, version))"
        )
        for version, script in MIGRATIONS:
            if version < 4:
                db.executescript(script)
                db.execute("INSERT INTO migrations VALUES ('steering', ?, '')", (version,))
        for s in (snap("old-2", 2), snap("old-1", 1)):
            db.execute(
                "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data)"
                " VALUES (?, ?, ?, ?, ?)",
                (s["run_id"], s["root_run_id"], s["tenant_id"], s["status"], json.dumps(s)),
            )
    store = SqliteStore(path)
    await store.open()
    try:
        await store.save_runs([snap("new", 3)])
        rows = await store.list_runs(tenant_id="acme", limit=2)
        assert [r["run_id"] for r in rows] == ["new", "old-2"]
        rows = await store.list_runs(tenant_id="acme", before=run_key(rows[-1]))
        assert [r["run_id"] for r in rows] == ["old-1"]
    finally:
        await store.close()


async def test_a_postgres_schema_from_before_the_migration_gets_created_at(tmp_path: Path) -> None:
    import asyncpg
    from services import pg_schema, postgres_dsn

    from tinyagents.store import PostgresStore
    from tinyagents.store._postgres import migrate, quote_ident
    from tinyagents.store.postgres import MIGRATIONS as PG_MIGRATIONS

    dsn, schema = postgres_dsn(), pg_schema(tmp_path)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"CREATE SCHEMA {quote_ident(schema)}")
        await conn.execute(f"SET search_path = {quote_ident(schema)}")
        await migrate(conn, schema, "store", [m for m in PG_MIGRATIONS if m[0] < 3])
        old = [snap("old-b", 2), snap("old-B", 2), snap("old-1", 1)]
        old[0]["tools"] = ['"created_at": "9999"', "\ud800"]  # neither is its created_at
        await conn.executemany(
            "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data)"
            " VALUES ($1, $2, $3, $4, $5)",
            [
                (s["run_id"], s["root_run_id"], s["tenant_id"], s["status"], json.dumps(s))
                for s in old
            ],
        )
    finally:
        await conn.close()
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        await store.save_runs([snap("new", 3)])
        # Code-point order whatever the database's collation: "old-B" < "old-b".
        assert await walk(store, 2, tenant_id="acme") == ["new", "old-b", "old-B", "old-1"]
    finally:
        await store.close()


async def test_a_run_saved_again_with_a_newer_created_at_ends_the_walk(store: Store) -> None:
    """A run continued by a later process is saved again under a newer ``created_at``: the
    store kept its first one in the column it orders by while the cursor read the new one, and
    a walk repeated a page for ever (or skipped runs)."""
    await store.save_runs([snap("a", 1), snap("b", 2), snap("c", 3)])
    first = await store.list_runs(tenant_id="acme", limit=2)
    assert [r["run_id"] for r in first] == ["c", "b"]
    await store.save_runs([snap("a", 9)])  # continued: newest now
    seen = ["c"]
    before = run_key(first[0])
    for _ in range(5):  # a walk that ends, not one that loops
        page = await store.list_runs(tenant_id="acme", before=before, limit=2)
        seen += [r["run_id"] for r in page[:1]]
        if len(page) <= 1:
            break
        before = run_key(page[0])
    else:
        raise AssertionError(f"the walk did not end: {seen}")
    assert seen == ["c", "b"]  # 'a' moved ahead of the cursor: the next walk shows it first
    assert [r["run_id"] for r in await store.list_runs(tenant_id="acme")] == ["a", "c", "b"]
    assert [run_key(r) for r in await store.list_runs(tenant_id="acme")] == sorted(
        (run_key(r) for r in await store.list_runs(tenant_id="acme")), reverse=True
    )
