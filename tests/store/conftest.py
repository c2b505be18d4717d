"""The store backends the conformance suite runs against.

A backend is a factory for a fresh, unopened ``Store`` under a test's temporary directory;
a durable backend built twice on the same directory must see the same data. A PostgreSQL
backend joins the suite by appending one more ``Backend`` to ``BACKENDS`` (durable=True).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tinyagents.store import MemoryStore, SqliteStore, Store


@dataclass(frozen=True)
class Backend:
    name: str
    make: Callable[[Path], Store]
    durable: bool


BACKENDS = [
    Backend("memory", lambda tmp: MemoryStore(), durable=False),
    Backend("sqlite", lambda tmp: SqliteStore(tmp / "store.db"), durable=True),
]
DURABLE_BACKENDS = [b for b in BACKENDS if b.durable]


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
