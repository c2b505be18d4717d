"""What the LangGraph ports share (``test_langgraph_ports*.py``; imported as
``from langgraph_kit import ...``): each program is written once as a function of a namespace
``g``, ``OURS`` or ``THEIRS``, holding either library's ``StateGraph``, ``START``, ``END``,
``Command``, ``Send`` and ``interrupt``. Importing this skips the importing module when
LangGraph is not installed, and fails it under CI=true (the dev extra installs LangGraph)."""

from __future__ import annotations

import operator
import os
from types import SimpleNamespace
from typing import Annotated, Any, TypedDict

import pytest

import tinyagents.graph as ours_graph
from tinyagents.graph import END, START, Command, Send, StateGraph, interrupt
from tinyagents.store.checkpoint import Checkpointer

if os.environ.get("CI") == "true":  # never skipped in CI
    import langgraph.graph  # noqa: F401

lg_graph = pytest.importorskip("langgraph.graph")
lg_types = pytest.importorskip("langgraph.types")
lg_errors = pytest.importorskip("langgraph.errors")
lg_memory = pytest.importorskip("langgraph.checkpoint.memory")
lg_message = pytest.importorskip("langgraph.graph.message")
lg_managed = pytest.importorskip("langgraph.managed")
lg_func = pytest.importorskip("langgraph.func")

OURS = SimpleNamespace(
    StateGraph=StateGraph, START=START, END=END, Command=Command, Send=Send, interrupt=interrupt
)
THEIRS = SimpleNamespace(
    StateGraph=lg_graph.StateGraph,
    START=lg_graph.START,
    END=lg_graph.END,
    Command=lg_types.Command,
    Send=lg_types.Send,
    interrupt=lg_types.interrupt,
)


def func_of(g: Any) -> Any:
    """The module with ``task`` and ``entrypoint`` of ``g``'s library (``OURS`` or ``THEIRS``)."""
    return ours_graph if g is OURS else lg_func


class X(TypedDict, total=False):
    x: int


def two_tasks_in_a_node(g: Any, cp: Any) -> Any:
    """A graph of one node that awaits two ``@task`` calls in a row, on ``g``'s library."""
    func = func_of(g)

    @func.task
    async def slow(v: int) -> int:
        return v + 1

    async def node(state: Any) -> dict[str, Any]:
        first = await slow(state["x"])
        return {"x": await slow(first)}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


def pair(build: Any, checkpointer: Checkpointer | None, **compile_kw: Any) -> tuple[Any, Any]:
    """``build(g)`` compiled on both libraries: (ours, LangGraph's)."""
    ours = build(OURS).compile(checkpointer=checkpointer, **compile_kw)
    saver = lg_memory.InMemorySaver() if checkpointer is not None else None
    theirs = build(THEIRS).compile(checkpointer=saver, **compile_kw)
    return ours, theirs


def cfg(thread_id: str = "1", **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **configurable}}


def values(out: dict[str, Any]) -> dict[str, Any]:
    """LangGraph's ``ainvoke`` output without the ``__interrupt__`` key it adds."""
    return {k: v for k, v in out.items() if not k.startswith("__")}


def shape(ns: tuple[str, ...] | str) -> tuple[str, ...]:
    """A namespace without its task ids (each library has its own): node names only."""
    parts = ns.split("|") if isinstance(ns, str) else ns
    return tuple(part.split(":")[0] for part in parts if part)


class Value(TypedDict):
    value: Annotated[list[str], operator.add]


class Results(TypedDict):
    results: Annotated[list[str], operator.add]


class Sightings:
    """What each library's nodes saw, kept apart."""

    def __init__(self) -> None:
        self.ours: list[Any] = []
        self.theirs: list[Any] = []

    def of(self, g: Any) -> list[Any]:
        return self.ours if g is OURS else self.theirs

    def clear(self) -> None:
        self.ours.clear()
        self.theirs.clear()


async def newest_with_next(
    ours: Any, theirs: Any, nxt: tuple[str, ...], *, oldest: bool = False
) -> tuple[str, Any]:
    """Each library's newest (or oldest) checkpoint whose ``next`` is ``nxt``: our checkpoint
    id, LangGraph's config."""
    theirs_found = [s.config async for s in theirs.aget_state_history(cfg()) if s.next == nxt]
    ours_found = [h.checkpoint_id for h in await ours.history("1") if h.next == nxt]
    assert len(ours_found) == len(theirs_found)
    pick = -1 if oldest else 0
    return ours_found[pick], theirs_found[pick]


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def abc_graph(g: Any, calls: list[str] | None = None) -> Any:
    """START → a → b → c → END, each node logging its name and noting its call in ``calls``
    (when given)."""
    calls = [] if calls is None else calls
    graph = g.StateGraph(Log)
    for name in ("a", "b", "c"):

        def node(state: Any, name: str = name) -> dict[str, Any]:
            calls.append(name)
            return {"log": [name]}

        graph.add_node(name, node)
    graph.add_edge(g.START, "a").add_edge("a", "b").add_edge("b", "c")
    return graph.add_edge("c", g.END)
