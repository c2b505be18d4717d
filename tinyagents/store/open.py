"""``open_store``: a store from its URL (the one module that knows every backend)."""

from __future__ import annotations

from tinyagents.errors import ConfigurationError
from tinyagents.store.base import Store
from tinyagents.store.memory import MemoryStore
from tinyagents.store.sqlite import SqliteStore


def open_store(spec: str | Store | None) -> Store:
    """``None``/``"memory://"`` → MemoryStore; ``"sqlite:///path.db"`` → SqliteStore."""
    if isinstance(spec, Store):
        return spec
    if spec is None or spec in ("memory", "memory://"):
        return MemoryStore()
    if spec.startswith("sqlite://"):
        path = spec.removeprefix("sqlite://")
        path = (
            path[1:] if path.startswith("/") else path
        )  # sqlite:///rel.db → rel.db; sqlite:////abs
        return SqliteStore(path)
    raise ConfigurationError(
        f"unknown store {spec!r}: use None (in memory), 'sqlite:///path.db' or a Store instance"
    )
