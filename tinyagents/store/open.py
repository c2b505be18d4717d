"""``open_store``: a store from its URL (the one module that knows every backend)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.store import _backends
from tinyagents.store.base import Store
from tinyagents.store.memory import MemoryStore
from tinyagents.store.urls import is_sqlite_url, redacted, sqlite_path

if TYPE_CHECKING:
    from tinyagents.store.postgres import PostgresStore


def open_store(spec: str | Store | None, *, create: bool = True) -> Store:
    """``None``/``"memory://"`` → MemoryStore; ``"sqlite:///path.db"`` (or SQLAlchemy's
    ``"sqlite+aiosqlite:///path.db"``, as the checkpointers take it) → SqliteStore;
    ``"postgresql://user@host/db"`` (or ``postgres://``; ``?schema=name`` keeps the tables in
    that schema) → PostgresStore.

    ``create=False`` (tools that read or steer a store a runtime made): a SQLite file that
    does not exist is a ``StoreError`` here; a SQLite file that holds no store, and a
    PostgreSQL schema (or its tables) that does not exist, are one when the store is opened;
    nothing is created."""
    if isinstance(spec, Store):
        return spec
    if spec is None or spec in ("memory", "memory://"):
        return MemoryStore()
    if not isinstance(spec, str):  # an AttributeError ("no attribute 'startswith'") otherwise
        hint = f": {f'sqlite:///{spec}'!r}" if isinstance(spec, Path) else ""
        raise ConfigurationError(
            f"a store is a URL or a Store, got {type(spec).__name__}{hint}; e.g. "
            "'sqlite:///runs.db'"
        )
    if is_sqlite_url(spec):
        path = sqlite_path(spec)
        if not create and not Path(path).is_file():
            raise StoreError(f"no store file at {path!r} (nothing was created)")
        return _backends.SqliteStore(path, create=create)
    if spec.startswith(("postgresql://", "postgres://")):
        return _postgres(spec, create=create)
    raise ConfigurationError(
        f"unknown store {redacted(spec)!r}: use None (in memory), 'sqlite:///path.db', "
        "'postgresql://user@host/db' or a Store instance"
    )


def _postgres(url: str, *, create: bool) -> PostgresStore:
    """A PostgresStore for ``url``, its ``schema`` query parameter taken out of the DSN (the
    other parameters are asyncpg's: sslmode, server settings...)."""
    return _backends.PostgresStore(url, create=create)
