"""``SqliteCache``: node results in one SQLite file (aiosqlite, WAL), which several graphs
and processes share (LangGraph's ``SqliteCache``).

One table, ``node_cache (ns, key, expiry, value)``: the namespace as JSON text of its
tuple, the value as JSON text, the expiry as a POSIX timestamp (``NULL``: never). Each write
is one statement in autocommit mode; the connection is opened on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tinyagents.errors import StoreError
from tinyagents.store.cache.base import (
    BaseCache,
    FullKey,
    Namespace,
    check_keys,
    check_namespaces,
    check_ttl,
    dumps,
    expired,
    expiry,
)
from tinyagents.store.sqlite import connect, refuse_read_only, use_wal, why_not_opened
from tinyagents.store.urls import check_file_name

_SCHEMA = """
CREATE TABLE IF NOT EXISTS node_cache (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    expiry REAL,
    value TEXT NOT NULL,
    PRIMARY KEY (ns, key)
)
"""

#: keys looked up per statement (SQLite's default limit is 32766 variables)
_CHUNK = 400


class SqliteCache(BaseCache):
    """``compile(cache=SqliteCache("cache.db"))``; ``aclose()`` (or ``async with``) closes
    the file, for good (a ``StoreError`` after). A second ``SqliteCache`` on the same file,
    in this process or another, reads what the first stored."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise StoreError(f"SqliteCache takes a file path, got {type(path).__name__} {path!r}")
        self.path = check_file_name(os.fspath(path), what="cache")
        self._conn: Any = None
        self._closed = False
        self._lock = asyncio.Lock()

    async def _db(self) -> Any:
        if self._conn is not None:
            return self._conn
        async with self._lock:
            if self._conn is not None:
                return self._conn
            if self._closed:  # (a new connection here would be one nothing closes)
                raise StoreError(
                    f"SQLite cache {self.path!r} was closed (aclose), for good: open a new "
                    "SqliteCache on the file"
                )
            conn = None
            try:
                conn = await connect(self.path, isolation_level=None)
                await conn.execute("PRAGMA busy_timeout=10000")
                # read before anything writes: a file that is no database fails untouched
                await conn.execute_fetchall("SELECT count(*) FROM sqlite_master")
                await refuse_read_only(conn)
                await use_wal(conn, 10.0)
                await conn.execute(_SCHEMA)
            except BaseException as exc:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
                if isinstance(exc, Exception):
                    raise StoreError(
                        f"cannot open SQLite cache {self.path!r}: {why_not_opened(self.path, exc)}"
                    ) from exc
                raise
            self._conn = conn
            return conn

    async def get(self, keys: Sequence[FullKey]) -> dict[FullKey, Any]:
        check_keys(keys)
        if not keys:
            return {}
        db = await self._db()
        found: dict[FullKey, Any] = {}
        stale: list[tuple[str, str]] = []
        wanted = {(_ns_text(ns), key): (ns, key) for ns, key in keys}
        pairs = list(wanted)
        for start in range(0, len(pairs), _CHUNK):
            chunk = pairs[start : start + _CHUNK]
            where = " OR ".join("(ns = ? AND key = ?)" for _ in chunk)
            params = [part for pair in chunk for part in pair]
            rows = await db.execute_fetchall(
                f"SELECT ns, key, expiry, value FROM node_cache WHERE {where}", params
            )
            for ns_text, key, at, value in rows:
                if expired(at):
                    stale.append((ns_text, key))
                    continue
                try:
                    found[wanted[(ns_text, key)]] = json.loads(value)
                except (ValueError, RecursionError):  # damaged: read as no entry, dropped
                    stale.append((ns_text, key))
        if stale:
            await db.executemany("DELETE FROM node_cache WHERE ns = ? AND key = ?", stale)
        return found

    async def set(self, pairs: Mapping[FullKey, tuple[Any, float | None]]) -> None:
        check_keys(list(pairs))
        rows = [
            (_ns_text(ns), key, expiry(check_ttl(ttl)), dumps(value))
            for (ns, key), (value, ttl) in pairs.items()
        ]
        if not rows:
            return
        db = await self._db()
        await db.executemany(
            "INSERT OR REPLACE INTO node_cache (ns, key, expiry, value) VALUES (?, ?, ?, ?)", rows
        )

    async def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        check_namespaces(namespaces)
        db = await self._db()
        if namespaces is None:
            await db.execute("DELETE FROM node_cache")
            return
        await db.executemany(
            "DELETE FROM node_cache WHERE ns = ?", [(_ns_text(ns),) for ns in namespaces]
        )

    async def aclose(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def __repr__(self) -> str:
        return f"SqliteCache({self.path!r})"


def _ns_text(ns: Namespace) -> str:
    return json.dumps(list(ns), separators=(",", ":"))


__all__ = ["SqliteCache"]
