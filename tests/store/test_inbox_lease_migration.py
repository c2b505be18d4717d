"""A store written before the inbox had a lease (taken items were never handed out again)
opens, gets the lease columns, and its stranded taken items go to their run's new owner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringKind,
    SteeringReceipt,
    SteeringTarget,
)
from tinyagents.store import SqliteStore, Store
from tinyagents.store.base import INBOX_LEASE_S
from tinyagents.store.sqlite import MIGRATIONS
from tinyagents.testkit import EPOCH, FakeClock, use_clock

OPS = SteeringActor.human("alice", tenant_id="acme", scopes=["agent:control"])


def command(cid: str) -> SteeringCommand:
    return SteeringCommand(
        target=SteeringTarget.subagent_run("r-0", "r-1"),  # a parent_run_id before the run_id
        actor=OPS,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": f"say {cid}"},
        correlation_id=cid,
        created_at=EPOCH,
    )


def accepted(cid: str) -> SteeringReceipt:
    return SteeringReceipt(status="accepted", correlation_id=cid, run_id="r-1", policy_id="p")


SNAPSHOT: dict[str, Any] = {
    "run_id": "r-1",
    "root_run_id": "r-0",
    "tenant_id": "acme",
    "status": "running",
    "owner": "rt-new",  # restarted after its owner died
    "created_at": EPOCH.isoformat(),
}
#: The inbox as a version without the lease left it: (request id, state, command, receipt).
OLD_ROWS = [
    ("q-taken", "taken", command("c-1"), None),  # its owner died before answering
    ("q-answered", "answered", command("c-2"), accepted("c-2")),
]


async def test_an_old_sqlite_store_migrates_and_its_stranded_items_are_taken(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE migrations (name TEXT NOT NULL, version INTEGER NOT NULL,"
            " applied_at TEXT NOT NULL, PRIMARY KEY (name, version))"
        )
        for version, script in MIGRATIONS:
            if version < 5:
                db.executescript(script)
                db.execute("INSERT INTO migrations VALUES ('steering', ?, '')", (version,))
        db.execute(
            "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data, created_at)"
            " VALUES ('r-1', 'r-0', 'acme', 'running', ?, ?)",
            (json.dumps(SNAPSHOT), EPOCH.isoformat()),
        )
        db.executemany(
            "INSERT INTO inbox (request_id, owner, state, command, receipt, submitted_at,"
            " answered_at) VALUES (?, 'rt-dead', ?, ?, ?, ?, ?)",
            [
                (
                    rid,
                    state,
                    cmd.model_dump_json(),
                    receipt and receipt.model_dump_json(),
                    EPOCH.isoformat(),
                    receipt and EPOCH.isoformat(),
                )
                for rid, state, cmd, receipt in OLD_ROWS
            ],
        )
    store = SqliteStore(path)
    await store.open()
    try:
        await stranded_items_go_to_the_new_owner(store)
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        columns = [r[1] for r in db.execute("PRAGMA table_info(inbox)")]
        assert columns.count("taken_at") == columns.count("run_id") == 1
        newest = MIGRATIONS[-1][0]
        assert [r[0] for r in db.execute("SELECT MAX(version) FROM migrations")] == [newest]


async def test_an_old_postgres_schema_migrates_and_its_stranded_items_are_taken(
    tmp_path: Path,
) -> None:
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
        await migrate(conn, schema, "store", [m for m in PG_MIGRATIONS if m[0] < 5])
        await conn.execute(
            "INSERT INTO runs (run_id, root_run_id, tenant_id, status, data, created_at)"
            " VALUES ('r-1', 'r-0', 'acme', 'running', $1, $2)",
            json.dumps(SNAPSHOT),
            EPOCH.isoformat(),
        )
        await conn.executemany(
            "INSERT INTO inbox (request_id, owner, state, command, receipt, submitted_at,"
            " answered_at) VALUES ($1, 'rt-dead', $2, $3, $4, $5, $6)",
            [
                (
                    rid,
                    state,
                    cmd.model_dump_json(),
                    receipt and receipt.model_dump_json(),
                    EPOCH,
                    receipt and EPOCH,
                )
                for rid, state, cmd, receipt in OLD_ROWS
            ],
        )
    finally:
        await conn.close()
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        await stranded_items_go_to_the_new_owner(store)
    finally:
        await store.close()


async def stranded_items_go_to_the_new_owner(store: Store) -> None:
    clock = FakeClock()
    with use_clock(clock):
        clock.advance(INBOX_LEASE_S + 1)
        assert await store.inbox_take("rt-stranger") == []
        taken = await store.inbox_take("rt-new")  # its run id was read out of the command
        assert [(i.request_id, i.owner, i.command) for i in taken] == [
            ("q-taken", "rt-new", command("c-1"))
        ]
        assert await store.inbox_receipt("q-answered") == accepted("c-2")
        await store.inbox_answer("q-taken", accepted("c-1"))
        assert await store.inbox_receipt("q-taken") == accepted("c-1")
        # and the inbox works as before for what comes next
        await store.inbox_put(owner="rt-new", request_id="q-new", command=command("c-3"))
        assert [i.request_id for i in await store.inbox_take("rt-new")] == ["q-new"]
        clock.advance(1)
        assert await store.inbox_take("rt-new") == []
