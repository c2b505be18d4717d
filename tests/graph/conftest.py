"""Fixtures for the graph tests: one checkpointer factory per backend, and a runtime
(``rt``) with an ``EventWaiter`` (``waiter``) and an ``EventRecorder`` (``recorder``) on its bus.

Add a backend by adding a factory to ``BACKENDS``: every test that takes the
``checkpointer`` or ``make_checkpointer`` fixture then runs against it too. The postgres
backend gives each test a schema of its own (the checkpointers one test makes share it, as
they would share a SQLite file), dropped afterwards; it skips when PostgreSQL is unreachable
(and fails when CI=true).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents import Runtime
from tinyagents.store.checkpoint import (
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SqliteCheckpointer,
)
from tinyagents.testkit import EventRecorder, EventWaiter

Factory = Callable[..., Awaitable[Checkpointer]]


async def _memory(tmp_path: Path, **kw: Any) -> Checkpointer:
    return MemoryCheckpointer(**kw)


async def _sqlite(tmp_path: Path, **kw: Any) -> Checkpointer:
    cp = SqliteCheckpointer(tmp_path / "checkpoints.db", **kw)
    await cp.setup()
    return cp


async def _postgres(tmp_path: Path, **kw: Any) -> Checkpointer:
    cp = PostgresCheckpointer(postgres_dsn(), schema=pg_schema(tmp_path), **kw)
    await cp.setup()
    return cp


BACKENDS: dict[str, Callable[..., Awaitable[Checkpointer]]] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
async def make_checkpointer(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Factory]:
    """``await make_checkpointer(snapshot_every=3)``: a fresh backend, closed afterwards."""
    made: list[Checkpointer] = []

    async def make(**kw: Any) -> Checkpointer:
        cp = await BACKENDS[request.param](tmp_path, **kw)
        made.append(cp)
        return cp

    yield make
    for cp in made:
        await cp.aclose()
    await drop_pg_schemas()


@pytest.fixture
async def checkpointer(make_checkpointer: Factory) -> Checkpointer:
    return await make_checkpointer()


@pytest.fixture
async def rt() -> AsyncIterator[Runtime]:
    async with Runtime(testing=True) as runtime:
        yield runtime


@pytest.fixture
def waiter(rt: Runtime) -> EventWaiter:
    w = EventWaiter()
    rt.bus.add_sink(w)
    return w


@pytest.fixture
def recorder(rt: Runtime) -> EventRecorder:
    r = EventRecorder()
    rt.bus.add_sink(r)
    return r
