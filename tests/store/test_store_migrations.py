"""A store left at every older schema version, with a row in each of its tables, migrates on
open to the current one and reads back what it held (SQLite and PostgreSQL): each migration
runs over the rows the versions before it wrote, not only over empty tables. (The
checkpointers have one version yet: nothing to migrate from.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tinyagents.events import RunEvent
from tinyagents.protocol import SteeringActor, SteeringCommand, SteeringTarget
from tinyagents.store import SqliteStore, Store
from tinyagents.store.postgres import MIGRATIONS as PG_MIGRATIONS
from tinyagents.store.sqlite import MIGRATIONS as SQLITE_MIGRATIONS
from tinyagents.testkit import EPOCH

COMMAND = SteeringCommand(
    target=SteeringTarget.agent_run("r-1"),
    actor=SteeringActor.test(),
    kind="pause",
    correlation_id="c-1",
    created_at=EPOCH,
)
#: A thread command (its thread id holds a quote, which JSON escapes), logged as well.
THREADED = COMMAND.model_copy(
    update={"target": SteeringTarget.thread('t "1"'), "correlation_id": "c-t"}
)
EVENT = RunEvent(type="run.status", run_id="r-1", root_run_id="r-1", tenant_id="acme")
SNAPSHOT = {
    "run_id": "r-1",
    "root_run_id": "r-1",
    "tenant_id": "acme",
    "status": "running",
    "owner": "rt-1",
    "created_at": EPOCH.isoformat(),
}

#: A value for each column a table has had in any version (a column an older version lacks
#: is left out; generated ones are never given).
ROWS: dict[str, dict[str, Any]] = {
    "steering_log": {
        "scope": "",
        "correlation_id": "c-1",
        "run_id": "r-1",
        "state": "accepted",
        "command": COMMAND.model_dump_json(),
        "created_at": EPOCH.isoformat(),
        "thread_id": None,  # (a version that has the column wrote a thread target's thread)
    },
    "events": {
        "type": EVENT.type,
        "run_id": "r-1",
        "root_run_id": "r-1",
        "tenant_id": "acme",
        "data": EVENT.to_json(),
    },
    "runs": {
        "run_id": "r-1",
        "root_run_id": "r-1",
        "tenant_id": "acme",
        "status": "running",
        "data": json.dumps(SNAPSHOT),
        "created_at": EPOCH.isoformat(),
    },
    "inbox": {
        "request_id": "q-1",
        "owner": "rt-1",
        "state": "pending",
        "command": COMMAND.model_copy(update={"correlation_id": "c-2"}).model_dump_json(),
        "submitted_at": EPOCH,
    },
}


def threaded_row(row: dict[str, Any]) -> dict[str, Any]:
    """``ROWS``' steering-log row made ``THREADED``'s (its ``seq``, where given, the next; its
    thread, where the version has the column)."""
    return {
        **row,
        "correlation_id": "c-t",
        "command": THREADED.model_dump_json(),
        **({"seq": 2} if "seq" in row else {}),
        **({"thread_id": 't "1"'} if "thread_id" in row else {}),
    }


async def _reads_back(store: Store, *, inbox: bool = True) -> None:
    stored = await store.get_command("c-1")
    assert stored is not None and stored.state == "accepted" and stored.run_id == "r-1"
    assert [s.command.correlation_id for s in await store.open_commands()] == ["c-1", "c-t"]
    # rows logged before the log kept owners and threads: none, and a thread target's thread
    # read out of the command, by which the thread's open commands are found
    assert (stored.owner, stored.thread_id) == (None, None)
    (threaded,) = await store.open_commands(thread_id='t "1"')
    assert (threaded.command, threaded.owner, threaded.thread_id) == (THREADED, None, 't "1"')
    assert [e.type for e in await store.load_events(run_id="r-1")] == ["run.status"]
    # an event logged before events had a tenant column is found by its tenant
    assert [e.run_id for _, e in await store.read_events(tenant_id="acme")] == ["r-1"]
    assert [r["run_id"] for r in await store.list_runs(tenant_id="acme")] == ["r-1"]
    assert [i.request_id for i in await store.inbox_take("rt-1")] == (["q-1"] if inbox else [])
    # and it takes new rows, in every table
    assert await store.append_command(
        COMMAND.model_copy(update={"correlation_id": "c-3"}), state="accepted", run_id="r-1"
    )
    await store.append_events([EVENT])
    await store.save_runs([{**SNAPSHOT, "status": "completed"}])
    assert (await store.load_run("r-1") or {})["status"] == "completed"


@pytest.mark.parametrize("version", [v for v, _ in SQLITE_MIGRATIONS[:-1]])
async def test_a_sqlite_store_of_each_older_version_migrates_with_its_rows(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / f"v{version}.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE migrations (name TEXT NOT NULL, version INTEGER NOT NULL,"
            " applied_at TEXT NOT NULL, PRIMARY KEY (name, version))"
        )
        for number, script in SQLITE_MIGRATIONS[:version]:
            db.executescript(script)
            db.execute("INSERT INTO migrations VALUES ('steering', ?, '')", (number,))
        present = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, row in ROWS.items():
            if table not in present:
                continue
            columns = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            given = {k: v for k, v in row.items() if k in columns}
            if table == "steering_log":
                given["seq"] = 1
            if table == "inbox":
                given["submitted_at"] = EPOCH.isoformat()
            marks = ",".join("?" for _ in given)
            for values in [given, threaded_row(given)] if table == "steering_log" else [given]:
                db.execute(
                    f"INSERT INTO {table} ({','.join(values)}) VALUES ({marks})",
                    list(values.values()),
                )
    store = SqliteStore(path)
    await store.open()
    try:
        await _reads_back(store, inbox="inbox" in present)  # the inbox came with version 3
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        versions = [r[0] for r in db.execute("SELECT version FROM migrations ORDER BY version")]
    assert versions == [v for v, _ in SQLITE_MIGRATIONS]


@pytest.mark.parametrize("version", [v for v, _ in PG_MIGRATIONS[:-1]])
async def test_a_postgres_store_of_each_older_version_migrates_with_its_rows(
    tmp_path: Path, version: int
) -> None:
    import asyncpg
    from services import pg_schema, postgres_dsn

    from tinyagents.store import PostgresStore
    from tinyagents.store._postgres import migrate, quote_ident

    dsn, schema = postgres_dsn(), pg_schema(tmp_path)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"CREATE SCHEMA {quote_ident(schema)}")
        await conn.execute(f"SET search_path = {quote_ident(schema)}")
        await migrate(conn, schema, "store", PG_MIGRATIONS[:version])
        for table, row in ROWS.items():
            columns = {
                r[0]
                for r in await conn.fetch(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = $1 AND table_name = $2",
                    schema,
                    table,
                )
            }
            given = {k: v for k, v in row.items() if k in columns}
            marks = ",".join(f"${i}" for i in range(1, len(given) + 1))
            for values in [given, threaded_row(given)] if table == "steering_log" else [given]:
                await conn.execute(
                    f"INSERT INTO {table} ({','.join(values)}) VALUES ({marks})",
                    *values.values(),
                )
    finally:
        await conn.close()
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    try:
        await _reads_back(store)
    finally:
        await store.close()
