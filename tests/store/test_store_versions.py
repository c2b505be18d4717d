"""A database a newer tinyagents wrote (a schema version past the ones this code knows) is
refused at open, untouched, by every durable store and checkpointer: migrating around tables
this code does not know, or writing rows an older reader does not expect, would damage it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest
from services import pg_schema, postgres_dsn

from tinyagents.cli import inspect_store, read_store
from tinyagents.errors import StoreError
from tinyagents.store import PostgresStore, SqliteStore
from tinyagents.store.checkpoint import PostgresCheckpointer, SqliteCheckpointer
from tinyagents.store.checkpoint.postgres import MIGRATIONS as PG_CHECKPOINT_MIGRATIONS
from tinyagents.store.checkpoint.sqlite import MIGRATIONS as SQLITE_CHECKPOINT_MIGRATIONS
from tinyagents.store.postgres import MIGRATIONS as PG_STORE_MIGRATIONS
from tinyagents.store.sqlite import MIGRATIONS as SQLITE_STORE_MIGRATIONS

FUTURE = 99


def _versions(path: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql).fetchall()


async def test_a_sqlite_store_a_newer_version_wrote_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO migrations VALUES ('steering', ?, '')", (FUTURE,))
    before = _versions(path, "SELECT name, version FROM migrations ORDER BY version")
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    known = max(v for v, _ in SQLITE_STORE_MIGRATIONS)
    assert str(path) in message and "newer version of tinyagents" in message
    assert f"version {FUTURE}" in message and f"up to {known}" in message
    assert _versions(path, "SELECT name, version FROM migrations ORDER BY version") == before


async def test_a_sqlite_checkpointer_a_newer_version_wrote_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    async with SqliteCheckpointer(path):
        pass
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO checkpoint_migrations VALUES (?, 'later', 0)", (FUTURE,))
    cp = SqliteCheckpointer(path)
    with pytest.raises(StoreError) as caught:
        await cp.setup()
    message = str(caught.value)
    known = max(v for v, _, _ in SQLITE_CHECKPOINT_MIGRATIONS)
    assert str(path) in message and "newer version of tinyagents" in message
    assert f"version {FUTURE}" in message and f"up to {known}" in message
    assert cp._conn is None  # no connection (and so no thread) left behind


async def _pg_record(schema: str, component: str) -> None:
    conn = await asyncpg.connect(postgres_dsn())
    try:
        await conn.execute(
            f'INSERT INTO "{schema}".tinyagents_migrations (component, version) VALUES ($1, $2)',
            component,
            FUTURE,
        )
    finally:
        await conn.close()


async def test_a_postgres_store_a_newer_version_wrote_is_refused() -> None:
    dsn, schema = postgres_dsn(), pg_schema()
    store = PostgresStore(dsn, schema=schema)
    await store.open()
    await store.close()
    await _pg_record(schema, "store")
    again = PostgresStore(dsn, schema=schema)
    with pytest.raises(StoreError) as caught:
        await again.open()
    message = str(caught.value)
    known = max(v for v, _ in PG_STORE_MIGRATIONS)
    assert again.url in message and repr(schema) in message
    assert "newer version of tinyagents" in message
    assert f"version {FUTURE}" in message and f"up to {known}" in message
    assert again._pool is None


async def test_a_postgres_checkpointer_a_newer_version_wrote_is_refused() -> None:
    dsn, schema = postgres_dsn(), pg_schema()
    async with PostgresCheckpointer(dsn, schema=schema):
        pass
    await _pg_record(schema, "checkpoints")
    again = PostgresCheckpointer(dsn, schema=schema)
    with pytest.raises(StoreError) as caught:
        await again.setup()
    message = str(caught.value)
    known = max(v for v, _ in PG_CHECKPOINT_MIGRATIONS)
    assert again.url in message and repr(schema) in message
    assert "newer version of tinyagents" in message
    assert f"version {FUTURE}" in message and f"up to {known}" in message
    assert again._pool is None


async def test_inspect_refuses_a_store_file_a_newer_version_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # inspect reads the file itself (read-only, never migrating): it drew what it could read
    # of tables a newer version may have changed, where opening the store refused the file
    path = tmp_path / "newer.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO migrations VALUES ('steering', ?, '')", (FUTURE,))
    with pytest.raises(StoreError) as caught:
        read_store(path)
    message = str(caught.value)
    known = max(v for v, _ in SQLITE_STORE_MIGRATIONS)
    assert str(path) in message and "newer version of tinyagents" in message
    assert f"version {FUTURE}" in message and f"up to {known}" in message
    assert await inspect_store(str(path)) == 2
    assert "newer version of tinyagents" in capsys.readouterr().out


def _damage_versions(path: Path, table: str) -> None:
    # (the checkpointer's version is its table's INTEGER PRIMARY KEY: SQLite refuses text there)
    # a version that is no number: SQLite keeps text that does not read as one in an INTEGER
    # column (a hand edit, another program's row); comparing it with the known versions raised
    # TypeError out of every open and out of inspect (a traceback at the command line)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE {table} SET version = 'abc' WHERE version = 1")


async def test_a_sqlite_store_whose_schema_version_is_no_number_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "damaged.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    _damage_versions(path, "migrations")
    before = _versions(path, "SELECT name, version FROM migrations ORDER BY rowid")
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert str(path) in message and "'abc'" in message and "no whole number" in message
    assert _versions(path, "SELECT name, version FROM migrations ORDER BY rowid") == before


async def test_inspect_refuses_a_store_file_whose_schema_version_is_no_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "damaged.db"
    store = SqliteStore(path)
    await store.open()
    await store.close()
    _damage_versions(path, "migrations")
    with pytest.raises(StoreError) as caught:
        read_store(path)
    assert str(path) in str(caught.value) and "'abc'" in str(caught.value)
    assert await inspect_store(str(path)) == 2
    assert "no whole number" in capsys.readouterr().out
