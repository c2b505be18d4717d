"""Graph checkpointers: the ``Checkpointer`` ABC and its memory and SQLite backends.

``SqliteCheckpointer`` is imported lazily (it pulls in aiosqlite only when used).
"""

from typing import TYPE_CHECKING, Any

from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord, WriteRecord
from tinyagents.store.checkpoint.memory import MemoryCheckpointer

if TYPE_CHECKING:
    from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

__all__ = [
    "CheckpointRecord",
    "Checkpointer",
    "MemoryCheckpointer",
    "SqliteCheckpointer",
    "WriteRecord",
]


def __getattr__(name: str) -> Any:
    if name == "SqliteCheckpointer":
        from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

        return SqliteCheckpointer
    raise AttributeError(name)
