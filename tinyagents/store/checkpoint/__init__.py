"""Graph checkpointers: the ``Checkpointer`` ABC and its memory and SQLite backends."""

from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord, WriteRecord
from tinyagents.store.checkpoint.memory import MemoryCheckpointer
from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

__all__ = [
    "CheckpointRecord",
    "Checkpointer",
    "MemoryCheckpointer",
    "SqliteCheckpointer",
    "WriteRecord",
]
