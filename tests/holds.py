"""Holds for tests of races: work kept waiting as long as a test needs.

- ``snapshot_writes_held(store)``: a store's run-snapshot writes wait for a real lock another
  connection takes, so a run another runtime has just started stays out of the store:

      async with snapshot_writes_held(owner.store):
          handle = await owner.start(agent, "work")   # answered; its snapshot not written yet

- ``started_with_snapshot_writes_held(store, start)``: the same around a graph run's start
  (``start()``), which writes its thread's hold in the store: on SQLite, whose lock is the
  whole file's, the run starts first and the lock is taken with nothing awaited in between
  (its first snapshot is due at a later tick); on PostgreSQL (the lock is on ``runs``
  alone) it starts inside the lock. Yields what ``start()`` returned.

- ``HoldNamed()``: a steering policy that holds the evaluation of one command (correlation id
  ``slow``) until released, so a submit stays under way (``close`` waits for it).

- ``until_resend_waits(router, cmd, resend)``: returns once the resend of ``cmd`` (a submit
  task) waits for the first submit of its id, which is still under way.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from services import postgres_dsn

from tinyagents.protocol import SteeringCommand, SteeringReceipt
from tinyagents.protocol.commands import dedupe_scope
from tinyagents.steering import CallNext, Decision, PolicyContext
from tinyagents.steering.router import SteeringRouter
from tinyagents.store import SqliteStore, Store

T = TypeVar("T")


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


@contextlib.asynccontextmanager
async def started_with_snapshot_writes_held(
    store: Store, start: Callable[[], Awaitable[T]]
) -> AsyncIterator[T]:
    """``start()`` with ``store``'s snapshot writes held (module docstring)."""
    first = await start() if isinstance(store, SqliteStore) else None
    async with snapshot_writes_held(store):
        yield first if first is not None else await start()


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


async def until_resend_waits(
    router: SteeringRouter, cmd: SteeringCommand, resend: asyncio.Task[SteeringReceipt]
) -> None:
    """Returns once ``resend`` (a task submitting ``cmd`` again) waits for the submit of the
    same id that is still under way: the router made the event it waits on. A fixed sleep
    instead let a loaded machine release the first before the resend got there, and the test
    then checked a plain duplicate (or a plain new submit) instead of the race. Returns too if
    the resend ended first, so its own error shows."""
    key = (dedupe_scope(cmd.actor), cmd.correlation_id)
    async with asyncio.timeout(60):  # a hang guard, not a timing assertion
        while True:
            if router._under_way.get(key) is not None or resend.done():
                return
            await asyncio.sleep(0)
