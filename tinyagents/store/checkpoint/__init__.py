"""Graph checkpointers: the ``Checkpointer`` ABC and its memory, SQLite and PostgreSQL backends.

    from tinyagents.store.checkpoint import SqliteCheckpointer

    graph = builder.compile(checkpointer=SqliteCheckpointer("graphs.db"))

A checkpointer keeps each graph thread's checkpoints (``CheckpointRecord``, written per
superstep as deltas) and the writes of its tasks (``WriteRecord``); every backend passes
``tests/graph/test_checkpointer_conformance.py``.

Each name is imported from its module on first use (PEP 562 ``__getattr__``): ``import
tinyagents`` loads this package for the lease helpers of ``_lease`` alone, and the backends
(about a tenth of the package's bytecode) load with the first checkpointer a program names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ imports, for type checkers and the layering test
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

#: The module of this package each public name is defined in.
_HOMES = {
    "CheckpointRecord": "base",
    "Checkpointer": "base",
    "WriteRecord": "base",
    "MemoryCheckpointer": "memory",
    "PostgresCheckpointer": "postgres",
    "SqliteCheckpointer": "sqlite",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups find it without this call
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
