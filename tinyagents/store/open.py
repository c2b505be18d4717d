"""``open_store``: a store from its URL (the one module that knows every backend)."""

from __future__ import annotations

from pathlib import Path

from tinyagents.errors import ConfigurationError, StoreError
from tinyagents.store.base import Store
from tinyagents.store.memory import MemoryStore
from tinyagents.store.postgres import PostgresStore
from tinyagents.store.sqlite import SqliteStore
from tinyagents.store.urls import redacted


def open_store(spec: str | Store | None, *, create: bool = True) -> Store:
    """``None``/``"memory://"`` → MemoryStore; ``"sqlite:///path.db"`` → SqliteStore;
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
    if spec.startswith("sqlite://"):
        path = sqlite_path(spec)
        if not create and not Path(path).is_file():
            raise StoreError(f"no store file at {path!r} (nothing was created)")
        return SqliteStore(path, create=create)
    if spec.startswith(("postgresql://", "postgres://")):
        return _postgres(spec, create=create)
    raise ConfigurationError(
        f"unknown store {redacted(spec)!r}: use None (in memory), 'sqlite:///path.db', "
        "'postgresql://user@host/db' or a Store instance"
    )


def sqlite_path(spec: str) -> str:
    """The file a ``sqlite://`` URL names (``sqlite:///rel.db`` → ``rel.db``,
    ``sqlite:////abs.db`` → ``/abs.db``); ``ConfigurationError`` for one that names none or
    has a query."""
    path = spec.removeprefix("sqlite://")
    path = path[1:] if path.startswith("/") else path
    if not path:  # SQLite reads "" as a private temporary database, gone at close
        raise ConfigurationError(
            f"store {spec!r} names no file: 'sqlite:///runs.db' (relative) or "
            "'sqlite:////abs/runs.db'; None keeps everything in memory"
        )
    if "?" in path:  # SQLite's URI options: read as part of the file's name, they made a new file
        name, _, query = spec.partition("?")
        raise ConfigurationError(
            f"store {spec!r}: a SQLite store URL takes no query ('?{query}'); name the file "
            f"alone, e.g. {name!r}"
        )
    return path


def _postgres(url: str, *, create: bool) -> PostgresStore:
    """A PostgresStore for ``url``, its ``schema`` query parameter taken out of the DSN (the
    other parameters are asyncpg's: sslmode, server settings...)."""
    return PostgresStore(url, create=create)
