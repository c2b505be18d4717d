"""``PostgresGraphStore``: the long-term store in PostgreSQL (asyncpg, loaded lazily).

The same contract and table as ``SqliteGraphStore`` (``graph_store_items``, in a schema of
its own when ``schema=`` or ``?schema=`` names one, migrated through
``tinyagents_migrations`` under the component ``graph_store``). Each batch is one
transaction; a put is an upsert, so writers on many machines never conflict. Timestamps are
the process clock's, in whole microseconds, so every backend orders and expires alike. A
database failure is a ``StoreError`` naming what could not be done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

from tinyagents.errors import StoreError
from tinyagents.store._postgres import (
    check_settings,
    close_pool,
    mapped_errors,
    migrate,
    open_pool,
    split_schema,
    transaction,
)
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
from tinyagents.store.urls import redacted

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE graph_store_items (
            prefix TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            ttl_minutes DOUBLE PRECISION,
            expires_at BIGINT,
            PRIMARY KEY (prefix, key)
        );
        CREATE INDEX graph_store_items_expires ON graph_store_items (expires_at)
            WHERE expires_at IS NOT NULL;
        """,
    ),
]

_COLUMNS = "prefix, key, value, created_at, updated_at"

_I = TypeVar("_I", bound=Item)


class PostgresGraphStore(GraphStore):
    """A graph's long-term store in PostgreSQL, shared by many processes:
    ``async with PostgresGraphStore("postgresql://user@db/app") as store``."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        index: Any = None,
        ttl: TTLConfig | None = None,
        min_size: int = 1,
        max_size: int = 10,
        command_timeout: float | None = 60.0,
    ) -> None:
        check_settings(min_size=min_size, max_size=max_size, command_timeout=command_timeout)
        super().__init__(index=index, ttl=ttl)
        self.url = redacted(dsn)
        self.dsn, self.schema = split_schema(dsn, schema)
        self.min_size = min_size
        self.max_size = max_size
        self.command_timeout = command_timeout
        self._pool: Any = None
        self._closed = False
        self._setup_lock = asyncio.Lock()

    async def setup(self) -> None:
        """Connect and create or migrate the table (idempotent); ``StoreError`` when the
        database cannot be reached (no connection is left open then)."""
        if self._pool is not None:
            return
        async with self._setup_lock:
            if self._pool is not None:
                return
            if self._closed:
                raise StoreError(f"graph store {self.url} was closed (aclose): open a new one")
            pool = None
            try:
                async with mapped_errors(f"open the graph store at {self.url}"):
                    pool, schema = await open_pool(
                        self.dsn,
                        schema=self.schema,
                        min_size=self.min_size,
                        max_size=self.max_size,
                        command_timeout=self.command_timeout,
                    )
                    async with pool.acquire() as conn:
                        await migrate(conn, schema, "graph_store", MIGRATIONS, url=self.url)
            except BaseException:
                if pool is not None:
                    with contextlib.suppress(Exception):
                        await pool.close()
                raise
            self._pool = pool

    async def aclose(self) -> None:
        """Close the connections, for good: a call after it is a ``StoreError``."""
        self._closed = True
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await close_pool(pool, self.command_timeout)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        checked = check_ops(ops)
        await self.setup()
        if self._pool is None:  # closed meanwhile
            raise StoreError(f"graph store {self.url} was closed (aclose): open a new one")
        at = now()
        async with (
            mapped_errors("run a graph store batch", command_timeout=self.command_timeout),
            transaction(self._pool, self.command_timeout) as conn,
        ):
            await conn.execute(
                "DELETE FROM graph_store_items WHERE expires_at <= $1", to_micros(at)
            )
            return [await self._run(conn, op, at) for op in checked]

    async def _run(self, conn: Any, op: Op, at: datetime) -> Result:
        if isinstance(op, GetOp):
            row = await conn.fetchrow(
                f"SELECT {_COLUMNS} FROM graph_store_items WHERE prefix = $1 AND key = $2",
                join(op.namespace),
                op.key,
            )
            if row is None:
                return None
            if op.refresh_ttl:
                await _refresh(conn, [(row[0], row[1])], at)
            return _item(Item, row, self.url)
        if isinstance(op, PutOp):
            await _put(conn, op, at)
            return None
        if isinstance(op, SearchOp):
            prefix = join(op.namespace_prefix)
            rows = await conn.fetch(
                f"SELECT {_COLUMNS} FROM graph_store_items WHERE $1 = '' OR prefix = $1 "
                "OR left(prefix, length($1) + 1) = $1 || '.'",
                prefix,
            )
            page = searched((_item(SearchItem, row, self.url) for row in rows), op)
            if op.refresh_ttl:
                await _refresh(conn, [(join(i.namespace), i.key) for i in page], at)
            return page
        assert isinstance(op, ListNamespacesOp)
        rows = await conn.fetch("SELECT DISTINCT prefix FROM graph_store_items")
        return listed((split(row[0]) for row in rows), op)


async def _put(conn: Any, op: PutOp, at: datetime) -> None:
    ns = join(op.namespace)
    if op.value is None:
        await conn.execute(
            "DELETE FROM graph_store_items WHERE prefix = $1 AND key = $2", ns, op.key
        )
        return
    expires = expiry(op.ttl, at)
    stamp = to_micros(at)
    await conn.execute(
        "INSERT INTO graph_store_items VALUES ($1, $2, $3, $4, $4, $5, $6) "
        "ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at, ttl_minutes = excluded.ttl_minutes, "
        "expires_at = excluded.expires_at",
        ns,
        op.key,
        encode_value(op.value),
        stamp,
        None if op.ttl is None else float(op.ttl),
        None if expires is None else to_micros(expires),
    )


async def _refresh(conn: Any, keys: list[tuple[str, str]], at: datetime) -> None:
    """Push back the expiry of the items read that have a TTL (LangGraph's refresh)."""
    if not keys:
        return
    await conn.executemany(
        "UPDATE graph_store_items SET expires_at = $1 + (ttl_minutes * 60000000)::BIGINT "
        "WHERE prefix = $2 AND key = $3 AND ttl_minutes IS NOT NULL",
        [(to_micros(at), ns, key) for ns, key in keys],
    )


def _item(cls: type[_I], row: Any, url: str) -> _I:
    prefix, key, text, created, updated = row
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the reader
        raise StoreError(
            f"graph store {url}: the item {prefix!r} / {key!r} no longer reads: {exc}"
        ) from exc
    return cls(
        value=value,
        key=key,
        namespace=split(prefix),
        created_at=from_micros(created),
        updated_at=from_micros(updated),
    )
