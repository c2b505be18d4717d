"""Holds for tests of races: work kept waiting as long as a test needs.

- ``snapshot_writes_held(store)``: a store's run-snapshot writes wait for a real lock another
  connection takes, so a run another runtime has just started stays out of the store:

      async with snapshot_writes_held(owner.store):
          handle = await owner.start(agent, "work")   # answered; its snapshot not written yet

- ``HoldNamed()``: a steering policy that holds the evaluation of one command (correlation id
  ``slow``) until released, so a submit stays under way (``close`` waits for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator

from services import postgres_dsn

from tinyagents.protocol import SteeringCommand
from tinyagents.steering import CallNext, Decision, PolicyContext
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


class HoldNamed:
    """Holds the evaluation of the command with correlation id ``slow`` until ``release``;
    ``entered`` is set once it is held."""

    policy_id = "hold-named"

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(
        self, cmd: SteeringCommand, ctx: PolicyContext, call_next: CallNext
    ) -> Decision:
        if cmd.correlation_id == "slow":
            self.entered.set()
            await self.release.wait()
        return await call_next(cmd)
