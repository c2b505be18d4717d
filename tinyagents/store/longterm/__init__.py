"""Graph long-term stores: LangGraph's ``BaseStore`` as ``GraphStore``, with memory, SQLite
and PostgreSQL backends.

    from tinyagents.store.longterm import SqliteGraphStore

    graph = builder.compile(checkpointer=..., store=SqliteGraphStore("memories.db"))

A node that takes a parameter named ``store`` (or calls ``tinyagents.graph.get_store()``)
gets it, on every thread: what one thread puts there another reads. Not to be mistaken for
``tinyagents.store.Store``, the steering runtime's own command and event store; checkpointers,
which keep one thread's state, are in ``tinyagents.store.checkpoint``. Every backend passes
``tests/graph/test_langgraph_ports_store.py``.

Each name is imported from its module on first use (``tinyagents._lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents._lazy import lazy_names

if TYPE_CHECKING:  # what __getattr__ imports (tinyagents._lazy)
    from tinyagents.store.longterm.base import (
        GetOp,
        GraphStore,
        Item,
        ListNamespacesOp,
        MatchCondition,
        PutOp,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
    from tinyagents.store.longterm.memory import MemoryGraphStore
    from tinyagents.store.longterm.postgres import PostgresGraphStore
    from tinyagents.store.longterm.sqlite import SqliteGraphStore

__all__ = [
    "GetOp",
    "GraphStore",
    "Item",
    "ListNamespacesOp",
    "MatchCondition",
    "MemoryGraphStore",
    "PostgresGraphStore",
    "PutOp",
    "SearchItem",
    "SearchOp",
    "SqliteGraphStore",
    "TTLConfig",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        **dict.fromkeys(
            [
                "GetOp",
                "GraphStore",
                "Item",
                "ListNamespacesOp",
                "MatchCondition",
                "PutOp",
                "SearchItem",
                "SearchOp",
                "TTLConfig",
            ],
            f"{__name__}.base",
        ),
        "MemoryGraphStore": f"{__name__}.memory",
        "PostgresGraphStore": f"{__name__}.postgres",
        "SqliteGraphStore": f"{__name__}.sqlite",
    },
)
