"""``get_runtime()`` / ``get_stream_writer()`` called in a router (a conditional edge's
function): the run's writer, as LangGraph's, where a router runs in its node's task. The same
program on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Then what ours adds: a router on ``START``, a router in a sub-graph, the context and store
a router's runtime holds, and a node of a graph run from a router (its own runtime).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS

from tinyagents.graph import get_runtime, get_stream_writer
from tinyagents.store.checkpoint import MemoryCheckpointer

lg_config = pytest.importorskip("langgraph.config")
lg_runtime = pytest.importorskip("langgraph.runtime")


class Seen(TypedDict, total=False):
    seen: Annotated[list[str], operator.add]


def build(g: Any, how: str) -> Any:
    getter = (
        (get_runtime if how == "runtime" else get_stream_writer)
        if g is OURS
        else (lg_runtime.get_runtime if how == "runtime" else lg_config.get_stream_writer)
    )

    def write(value: str) -> None:
        (getter().stream_writer if how == "runtime" else getter())(value)

    def a(state: Seen) -> dict[str, Any]:
        write("in a")
        return {"seen": ["a"]}

    def route(state: Seen) -> str:
        write(f"routing after {state['seen']}")
        return "b" if len(state["seen"]) < 2 else g.END

    def b(state: Seen) -> dict[str, Any]:
        return {"seen": ["b"]}

    sg = g.StateGraph(Seen).add_node("a", a).add_node("b", b).add_edge(g.START, "a")
    return sg.add_conditional_edges("a", route, ["b", g.END]).add_edge("b", "a")


@pytest.mark.parametrize("how", ["runtime", "writer"])
@pytest.mark.parametrize("saved", [False, True], ids=["unsaved", "checkpointed"])
async def test_a_router_writes_to_the_run_stream(how: str, saved: bool) -> None:
    # LangGraph: a branch's path function runs in its node's task, so get_stream_writer()
    # there is the run's (test_pregel.py::test_get_stream_writer's writer, in a router)
    kw: dict[str, Any] = {"checkpointer": MemoryCheckpointer()} if saved else {}
    ours = build(OURS, how).compile(**kw)
    theirs = build(THEIRS, how).compile()
    thread = {"thread_id": "t"} if saved else {}
    got = [i async for i in ours.stream({"seen": []}, mode=["custom", "updates"], **thread)]
    want = [i async for i in theirs.astream({"seen": []}, stream_mode=["custom", "updates"])]
    # the same items, each mode's in the same order; LangGraph streams a router's items
    # before its node's update (the router runs in the node's task), ours after it (routers
    # run once the step's writes are applied), before the next step's items
    for mode in ("custom", "updates"):
        assert [i for i in got if i[0] == mode] == [i for i in want if i[0] == mode]
    assert got[:4] == [
        ("custom", "in a"),
        ("updates", {"a": {"seen": ["a"]}}),
        ("custom", "routing after ['a']"),
        ("updates", {"b": {"seen": ["b"]}}),
    ]


async def test_a_router_of_a_run_not_streamed_writes_nowhere() -> None:
    ours = build(OURS, "writer").compile()
    assert (await ours.run({"seen": []})).state == {"seen": ["a", "b", "a"]}


async def test_a_router_runtime_has_the_run_context_and_store() -> None:
    from dataclasses import dataclass

    from tinyagents.graph import StateGraph
    from tinyagents.store.longterm import MemoryGraphStore

    @dataclass
    class Ctx:
        user: str

    seen: list[Any] = []
    store = MemoryGraphStore()

    def route(state: Seen) -> str:
        runtime = get_runtime(Ctx)
        seen.append((runtime.context.user, runtime.store is store))
        runtime.stream_writer(f"route {runtime.context.user}")
        return "__end__"

    graph = (
        StateGraph(Seen, context_schema=Ctx)
        .add_node("a", lambda s: {"seen": ["a"]})
        .add_conditional_edges("__start__", route, ["a", "__end__"])
        .add_conditional_edges("a", route, ["__end__"])
        .compile(store=store, checkpointer=MemoryCheckpointer())
    )
    items = [
        i
        async for i in graph.stream({"seen": []}, thread_id="t", context=Ctx("ada"), mode="custom")
    ]
    assert seen == [("ada", True)]  # (the START router's: a router outside a step)
    assert items == []  # a router on START runs before the run streams: its writer is a no-op
    seen.clear()
    to_a = (
        StateGraph(Seen, context_schema=Ctx)
        .add_node("a", lambda s: {"seen": ["a"]})
        .add_edge("__start__", "a")
        .add_conditional_edges("a", route, ["__end__"])
        .compile(store=store)
    )
    items = [i async for i in to_a.stream({"seen": []}, context=Ctx("bo"), mode="custom")]
    assert seen == [("bo", True)] and items == ["route bo"]


async def test_a_router_in_a_sub_graph_writes_to_the_parent_stream() -> None:
    def build_both(g: Any) -> Any:
        inner = build(g, "writer").compile()
        return g.StateGraph(Seen).add_node("inner", inner).add_edge(g.START, "inner").compile()

    got = [i async for i in build_both(OURS).stream({"seen": []}, mode="custom")]
    want = [i async for i in build_both(THEIRS).astream({"seen": []}, stream_mode="custom")]
    assert got == want


async def test_a_node_of_a_graph_a_router_runs_has_its_own_runtime() -> None:
    # the router's runtime is read only in the router's own scope
    inner_items: list[Any] = []

    def inner_node(state: Seen) -> dict[str, Any]:
        get_stream_writer()("from the inner node")
        return {"seen": ["inner"]}

    inner = OURS.StateGraph(Seen).add_node("n", inner_node).add_edge(OURS.START, "n").compile()

    async def route(state: Seen) -> str:
        async for item in inner.stream({"seen": []}, thread_id=None, mode="custom"):
            inner_items.append(item)
        return OURS.END

    outer = (
        OURS.StateGraph(Seen)
        .add_node("a", lambda s: {"seen": ["a"]})
        .add_edge(OURS.START, "a")
        .add_conditional_edges("a", route, [OURS.END])
        .compile()
    )
    items = [i async for i in outer.stream({"seen": []}, mode="custom")]
    assert items == []
    assert inner_items == ["from the inner node"]
