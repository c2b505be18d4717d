"""The store backends the conformance suite runs against.

A backend is a factory for a fresh, unopened ``Store`` under a test's temporary directory;
a durable backend built twice on the same directory must see the same data. The PostgreSQL
backend keeps each test in a schema of its own (named after the directory), dropped after the
test; it skips when PostgreSQL is unreachable (and fails when CI=true).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from services import drop_pg_schemas, pg_schema, postgres_dsn

from tinyagents.store import MemoryStore, PostgresStore, SqliteStore, Store


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[Path], Store]
    durable: bool


BACKENDS = [
    Backend("memory", lambda tmp: MemoryStore(), durable=False),
    Backend("sqlite", lambda tmp: SqliteStore(tmp / "store.db"), durable=True),
    Backend(
        "postgres",
        lambda tmp: PostgresStore(postgres_dsn(), schema=pg_schema(tmp)),
        durable=True,
    ),
]
DURABLE_BACKENDS = [b for b in BACKENDS if b.durable]


@pytest.fixture(autouse=True)
async def _drop_pg_schemas() -> AsyncIterator[None]:
    """After each test (and its stores' teardown), drop the PostgreSQL schemas it used."""
    yield
    await drop_pg_schemas()


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(params=DURABLE_BACKENDS, ids=lambda b: b.name)
def durable_backend(request: pytest.FixtureRequest) -> Backend:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
async def store(backend: Backend, tmp_path: Path) -> AsyncIterator[Store]:
    opened = backend.make(tmp_path)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()
