"""Persistence: the steering log, the event log and run snapshots, behind one ``Store`` ABC.

    from tinyagents.store import open_store

    store = open_store("sqlite:///runs.db")   # None or "memory://" for a MemoryStore

``MemoryStore`` keeps everything in the process; ``SqliteStore`` keeps it in one file, where
the router writes an accepted command before its receipt is returned; ``PostgresStore``
(``"postgresql://..."``) keeps it in a database several processes and machines share. ``StoreWriter`` is the
bus sink that batches events into a store. Graph checkpoints have their own contract in ``tinyagents.store.checkpoint``.
The SQLite and PostgreSQL stores are imported on first use (``tinyagents.store._backends``).
"""

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names
from tinyagents.store.base import Store, StoredCommand, StoreWriter
from tinyagents.store.memory import MemoryStore
from tinyagents.store.open import open_store

if TYPE_CHECKING:  # imported on first use (tinyagents.store._backends)
    from tinyagents.store.postgres import PostgresStore
    from tinyagents.store.sqlite import SqliteStore

__all__ = [
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "StoreWriter",
    "StoredCommand",
    "open_store",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {"PostgresStore": "tinyagents.store.postgres", "SqliteStore": "tinyagents.store.sqlite"},
)
