"""Graph checkpointers: the ``Checkpointer`` ABC and its memory, SQLite and PostgreSQL backends.

    from tinyagents.store.checkpoint import SqliteCheckpointer

    graph = builder.compile(checkpointer=SqliteCheckpointer("graphs.db"))

A checkpointer keeps each graph thread's checkpoints (``CheckpointRecord``, written per
superstep as deltas) and the writes of its tasks (``WriteRecord``); every backend passes
``tests/graph/test_checkpointer_conformance.py``. ``ExitBuffer`` holds a
``durability="exit"`` run's saves over one of them until the run ends.

Each name is imported from its module on first use (``tinyagents._lazy``): ``import
tinyagents`` loads this package for the lease helpers of ``_lease`` alone, and the checkpointer
modules load with the first one a program names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names

if TYPE_CHECKING:  # what __getattr__ imports (tinyagents._lazy)
    from tinyagents.store.checkpoint.base import Checkpointer, CheckpointRecord, WriteRecord
    from tinyagents.store.checkpoint.exit_buffer import ExitBuffer
    from tinyagents.store.checkpoint.memory import MemoryCheckpointer
    from tinyagents.store.checkpoint.postgres import PostgresCheckpointer
    from tinyagents.store.checkpoint.sqlite import SqliteCheckpointer

__all__ = [
    "CheckpointRecord",
    "Checkpointer",
    "ExitBuffer",
    "MemoryCheckpointer",
    "PostgresCheckpointer",
    "SqliteCheckpointer",
    "WriteRecord",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "CheckpointRecord": f"{__name__}.base",
        "Checkpointer": f"{__name__}.base",
        "WriteRecord": f"{__name__}.base",
        "ExitBuffer": f"{__name__}.exit_buffer",
        "MemoryCheckpointer": f"{__name__}.memory",
        "PostgresCheckpointer": f"{__name__}.postgres",
        "SqliteCheckpointer": f"{__name__}.sqlite",
    },
)
