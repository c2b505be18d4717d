"""The long-term store as a graph's nodes see it (``compile(store=...)``).

A node, router, ``@task`` or ``@entrypoint`` function with a parameter named ``store`` gets
the store (None when the graph has none), as LangGraph injects it; ``get_store()`` returns
it from anywhere inside one. The store is found through a ``ContextVar`` set around each
superstep of a graph compiled with one (``executor.advance``), so the tasks of the step, the
``@task`` calls they make and the sub-graphs they run all see it. A sub-graph runs with the
store of the graph it runs in; its own ``store=`` counts only where that graph has none.

The stores themselves are in ``tinyagents.store.longterm`` (``GraphStore`` and its memory,
SQLite and PostgreSQL backends).
"""

from __future__ import annotations

from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from tinyagents.errors import GraphError, GraphValidationError
from tinyagents.graph._context import enclosing_scope
from tinyagents.store import longterm

if TYPE_CHECKING:
    from tinyagents.store.longterm.base import GraphStore

T = TypeVar("T")

_store: ContextVar[GraphStore | None] = ContextVar("tinyagents_graph_store", default=None)

#: the store of the running step, None outside one or in a graph without a store
current_store = _store.get


def get_store() -> GraphStore | None:
    """The long-term store of the graph whose node (or task) is running: what
    ``compile(store=...)`` or ``@entrypoint(store=...)`` was given, None when it was given
    none (LangGraph's ``get_store()``). Outside a running node it raises ``GraphError``."""
    store = _store.get()
    if store is None and enclosing_scope() is None:
        raise GraphError(
            "get_store() can only be called inside a running graph node, @task or "
            "@entrypoint function"
        )
    return store


async def with_store(store: GraphStore, step: Awaitable[T]) -> T:
    """Await ``step`` (a superstep) with ``store`` as the nodes' store."""
    token = _store.set(store)
    try:
        return await step
    finally:
        _store.reset(token)


def node_store(run: Any, graph_store: GraphStore | None = None) -> GraphStore | None:
    """The store a node, task or router of ``run`` (a ``GraphRun``, None for a router on
    ``START``) gets, as its ``store`` parameter and its ``GraphRuntime.store``: the running
    step's, else (a router, which runs between steps) its run's (``store_of``), else
    ``graph_store`` (the router's graph's)."""
    store = _store.get()
    if store is None and run is not None:
        store = store_of(run)
    return graph_store if store is None else store


def store_of(run: Any) -> GraphStore | None:
    """The store of a graph run (an ``executor.GraphRun``): its outermost graph's that has
    one, up its parent runs."""
    found = None
    while run is not None:
        found = run.graph.store or found
        run = run.parent
    return found


def check_store(store: object, where: str) -> GraphStore | None:
    """``store`` if it is a ``GraphStore`` or None, else a ``GraphValidationError``."""
    # (``longterm.GraphStore`` loads the stores' module with the first graph given a store)
    if store is None or isinstance(store, longterm.GraphStore):
        return store
    hint = ""
    if type(store).__module__.startswith("langgraph"):
        hint = " (LangGraph's stores are not taken: use MemoryGraphStore or SqliteGraphStore)"
    raise GraphValidationError(
        f"{where}(store=...) takes a tinyagents.store.longterm.GraphStore, got "
        f"{type(store).__name__}{hint}"
    )
