"""``SqliteGraphStore``: the long-term store in one SQLite file (aiosqlite, WAL).

- One table, ``graph_store_items``, keyed by ``(prefix, key)``: ``prefix`` is the namespace
  joined by ``.`` (labels cannot hold one), timestamps whole microseconds since 1970 (UTC).
- Each batch is one transaction (``BEGIN IMMEDIATE``: one writer at a time across
  processes, a 10 s busy timeout): its puts land together or not at all, and its reads see
  the puts before them. Expired items are deleted as each batch begins.
- A search reads the rows under its prefix and filters and pages them in Python
  (``base.searched``), as every backend does, so all answer alike.
- A file another program's table of our name holds, or that a newer tinyagents migrated, is
  refused with a ``StoreError``; so is every failing statement, naming the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.store.longterm.base import (
    GetOp,
    GraphStore,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    check_ops,
    encode_value,
    expiry,
    from_micros,
    join,
    listed,
    now,
    searched,
    split,
    to_micros,
)
from tinyagents.store.sqlite import (
    connect,
    refuse_foreign_tables,
    refuse_newer,
    use_wal,
    why_not_opened,
)
from tinyagents.store.urls import check_file_name, is_sqlite_url, sqlite_path

_RECORD = "graph_store_migrations"
_TABLE = "graph_store_items"

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "graph store items",
        f"""
        CREATE TABLE IF NOT EXISTS {_TABLE} (
            prefix TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            ttl_minutes REAL,
            expires_at INTEGER,
            PRIMARY KEY (prefix, key)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS {_TABLE}_expires ON {_TABLE} (expires_at)
            WHERE expires_at IS NOT NULL;
        """,
    ),
]

_COLUMNS = "prefix, key, value, created_at, updated_at"

_I = TypeVar("_I", bound=Item)


def _path(path: str) -> str:
    if is_sqlite_url(path):
        return check_file_name(sqlite_path(path, what="graph store"), what="graph store")
    if not path:
        raise ConfigurationError(
            "graph store path '' names no file: give one, e.g. 'memories.db'; "
            "MemoryGraphStore() keeps items in memory"
        )
    return check_file_name(path, what="graph store")


class SqliteGraphStore(GraphStore):
    """A graph's long-term store in a SQLite file: ``async with SqliteGraphStore("m.db")``
    (or let the first call open it; ``aclose()`` closes it, for good)."""

    def __init__(
        self, path: str | os.PathLike[str], *, index: Any = None, ttl: TTLConfig | None = None
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise StoreError(
                f"SqliteGraphStore takes a file path, got {type(path).__name__} {path!r}"
            )
        super().__init__(index=index, ttl=ttl)
        self.path = _path(os.fspath(path))
        self._conn: Any = None
        self._closed = False
        # one batch at a time on the connection: a batch is a transaction of several statements
        self._lock = asyncio.Lock()

    async def setup(self) -> None:
        """Connect and create the table (idempotent); ``StoreError`` for a file that is not
        a database, or whose tables are another program's or a newer tinyagents'."""
        if self._conn is not None:
            return
        if self._closed:
            raise StoreError(f"graph store {self.path!r} was closed (aclose): open a new one")
        conn = None
        try:
            conn = await connect(self.path, isolation_level=None)
            await conn.execute("PRAGMA busy_timeout=10000")
            await conn.execute_fetchall("SELECT count(*) FROM sqlite_master")
            await refuse_foreign_tables(
                conn,
                (_TABLE,),
                record=_RECORD,
                record_columns=frozenset({"version", "name", "applied_at"}),
                ours=None,
            )
            await refuse_newer(conn, _RECORD, MIGRATIONS[-1][0])
            await use_wal(conn, 10.0)
            await self._migrate(conn)
        except BaseException as exc:
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
            if isinstance(exc, StoreError):
                raise StoreError(f"cannot open graph store {self.path!r}: {exc}") from exc
            if isinstance(exc, Exception):
                raise StoreError(
                    f"cannot open graph store {self.path!r}: {why_not_opened(self.path, exc)}"
                ) from exc
            raise
        self._conn = conn

    async def _migrate(self, conn: Any) -> None:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_RECORD} "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {row[0] for row in await conn.execute_fetchall(f"SELECT version FROM {_RECORD}")}
            for version, name, sql in MIGRATIONS:
                if version in done:
                    continue
                for statement in filter(str.strip, sql.split(";")):
                    await conn.execute(statement)
                await conn.execute(
                    f"INSERT INTO {_RECORD} VALUES (?, ?, ?)", (version, name, time.time())
                )
            await conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(Exception):
                await conn.execute("ROLLBACK")
            raise

    async def aclose(self) -> None:
        """Close the connection, for good: a call after it is a ``StoreError``."""
        self._closed = True
        async with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                await conn.close()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        checked = check_ops(ops)
        async with self._lock:
            await self.setup()
            conn = self._conn
            at = now()
            try:
                await conn.execute("BEGIN IMMEDIATE")
                try:
                    await conn.execute(
                        f"DELETE FROM {_TABLE} WHERE expires_at <= ?", (to_micros(at),)
                    )
                    results = [await self._run(conn, op, at) for op in checked]
                    await conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(Exception):
                        await conn.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError) as exc:
                raise StoreError(f"graph store {self.path!r}: {exc}") from exc
            return results

    async def _run(self, conn: Any, op: Op, at: datetime) -> Result:
        if isinstance(op, GetOp):
            rows = await conn.execute_fetchall(
                f"SELECT {_COLUMNS} FROM {_TABLE} WHERE prefix = ? AND key = ?",
                (join(op.namespace), op.key),
            )
            if not rows:
                return None
            if op.refresh_ttl:
                await _refresh(conn, [(rows[0][0], rows[0][1])], at)
            return _item(Item, rows[0], self.path)
        if isinstance(op, PutOp):
            await _put(conn, op, at)
            return None
        if isinstance(op, SearchOp):
            prefix = join(op.namespace_prefix)
            rows = await conn.execute_fetchall(
                f"SELECT {_COLUMNS} FROM {_TABLE} "
                "WHERE ? = '' OR prefix = ? OR substr(prefix, 1, ?) = ?",
                (prefix, prefix, len(prefix) + 1, prefix + "."),
            )
            page = searched((_item(SearchItem, row, self.path) for row in rows), op)
            if op.refresh_ttl:
                await _refresh(conn, [(join(i.namespace), i.key) for i in page], at)
            return page
        assert isinstance(op, ListNamespacesOp)
        rows = await conn.execute_fetchall(f"SELECT DISTINCT prefix FROM {_TABLE}")
        return listed((split(row[0]) for row in rows), op)


async def _put(conn: Any, op: PutOp, at: datetime) -> None:
    ns = join(op.namespace)
    if op.value is None:
        await conn.execute(f"DELETE FROM {_TABLE} WHERE prefix = ? AND key = ?", (ns, op.key))
        return
    expires = expiry(op.ttl, at)
    stamp = to_micros(at)
    await conn.execute(
        f"INSERT INTO {_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at, ttl_minutes = excluded.ttl_minutes, "
        "expires_at = excluded.expires_at",
        (
            ns,
            op.key,
            encode_value(op.value),
            stamp,
            stamp,
            op.ttl,
            None if expires is None else to_micros(expires),
        ),
    )


async def _refresh(conn: Any, keys: list[tuple[str, str]], at: datetime) -> None:
    """Push back the expiry of the items read that have a TTL (LangGraph's refresh)."""
    stamp = to_micros(at)
    await conn.executemany(
        f"UPDATE {_TABLE} SET expires_at = ? + CAST(ttl_minutes * 60000000 AS INTEGER) "
        "WHERE prefix = ? AND key = ? AND ttl_minutes IS NOT NULL",
        [(stamp, ns, key) for ns, key in keys],
    )


def _item(cls: type[_I], row: Any, path: str) -> _I:
    prefix, key, text, created, updated = row
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the reader
        raise StoreError(
            f"graph store {path!r}: the item {prefix!r} / {key!r} no longer reads: {exc}"
        ) from exc
    return cls(
        value=value,
        key=key,
        namespace=split(prefix),
        created_at=from_micros(created),
        updated_at=from_micros(updated),
    )
