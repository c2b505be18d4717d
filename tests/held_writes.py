"""Hold a store's run-snapshot writes with a real lock another connection takes, so a run
another runtime has just started stays out of the store as long as a test needs.

    async with snapshot_writes_held(owner.store):
        handle = await owner.start(agent, "work")   # answered; its snapshot not written yet
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator

from services import postgres_dsn

from tinyagents.store import SqliteStore, Store


@contextlib.asynccontextmanager
async def snapshot_writes_held(store: Store) -> AsyncIterator[None]:
    """Until the block ends, every write of a run snapshot waits for a lock another
    connection holds (readers go on), as it would behind a long write of another process."""
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")  # the file's write lock; WAL readers go on
            yield
        finally:
            conn.close()  # rolls the empty transaction back, and the lock goes
        return
    import asyncpg

    pg = await asyncpg.connect(postgres_dsn())
    try:
        async with pg.transaction():
            schema = store.schema_name  # type: ignore[attr-defined]
            await pg.execute(f'LOCK TABLE "{schema}".runs IN SHARE ROW EXCLUSIVE MODE')
            yield
    finally:
        await pg.close()
