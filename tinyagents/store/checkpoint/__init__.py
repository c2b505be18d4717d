"""Graph checkpointers: the ``Checkpointer`` ABC and its memory, SQLite and PostgreSQL backends.

    from tinyagents.store.checkpoint import SqliteCheckpointer

    graph = builder.compile(checkpointer=SqliteCheckpointer("graphs.db"))

A checkpointer keeps each graph thread's checkpoints (``CheckpointRecord``, written per
superstep as deltas) and the writes of its tasks (``WriteRecord``); every backend passes
``tests/graph/test_checkpointer_conformance.py``.
"""

from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord, WriteRecord
from tinyagents.store.checkpoint.memory import MemoryCheckpointer
from tinyagents.store.checkpoint.postgres import PostgresCheckpointer
from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

__all__ = [
    "CheckpointRecord",
    "Checkpointer",
    "MemoryCheckpointer",
    "PostgresCheckpointer",
    "SqliteCheckpointer",
    "WriteRecord",
]
