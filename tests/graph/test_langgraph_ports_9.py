"""Ports of LangGraph's tests, ninth round (``libs/langgraph/tests/test_pregel_async.py``,
``test_pregel.py``, ``test_interruption.py``, ``test_subgraph_persistence_async.py``): the
same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``. Each test's comment names the LangGraph test it follows.

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture) where a test has one. A difference docs/graph.md documents is
asserted as ours, with a comment naming the section.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langgraph_kit import OURS, THEIRS, cfg, lg_memory

import tinyagents.graph as ours_graph
from tinyagents.store.checkpoint import Checkpointer

lg_func = pytest.importorskip("langgraph.func")

FUNC = {id(OURS): ours_graph, id(THEIRS): lg_func}


def func_of(g: Any) -> Any:
    """The module with ``task`` and ``entrypoint`` of ``g``'s library."""
    return FUNC[id(g)]


class X(TypedDict, total=False):
    x: int


async def streamed(graph: Any, value: Any, mode: Any, thread: str | None = None) -> list[Any]:
    """``graph``'s stream of ``value`` in ``mode`` (on ``thread``, if given)."""
    if hasattr(graph, "astream"):
        config = cfg(thread) if thread is not None else None
        return [i async for i in graph.astream(value, config, stream_mode=mode)]
    return [i async for i in graph.stream(value, thread_id=thread, mode=mode)]


def both(build: Any, checkpointer: Checkpointer | None) -> tuple[Any, Any]:
    """``build(g, cp)`` of each library: (ours, LangGraph's)."""
    theirs_cp = None if checkpointer is None else lg_memory.InMemorySaver()
    return build(OURS, checkpointer), build(THEIRS, theirs_cp)


# -- a run that saves nothing streams its nodes' task calls (round 8's documented gap) -----


def two_tasks_in_a_node(g: Any, cp: Any) -> Any:
    func = func_of(g)

    @func.task
    async def slow(v: int) -> int:
        return v + 1

    async def node(state: Any) -> dict[str, Any]:
        first = await slow(state["x"])
        return {"x": await slow(first)}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


@pytest.mark.parametrize("mode", ["updates", "values", ["updates", "values"]])
async def test_a_stream_of_a_run_that_saves_nothing_shows_its_nodes_task_calls(mode: Any) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, with the
    # tasks called by a StateGraph's node, in a run without checkpointer: its updates stream
    # shows each task's update (its values stream, the graph's values only), as with one
    ours, theirs = both(two_tasks_in_a_node, None)
    expected = await streamed(theirs, {"x": 1}, mode)
    assert await streamed(ours, {"x": 1}, mode) == expected
    if mode == "updates":
        assert expected == [{"slow": 2}, {"slow": 3}, {"n": {"x": 3}}]


def sync_node_with_a_task(g: Any, cp: Any) -> Any:
    func = func_of(g)

    @func.task
    async def double(v: int) -> int:
        return v * 2

    async def first(state: Any) -> dict[str, Any]:
        return {"x": state["x"] + 1}

    async def second(state: Any) -> dict[str, Any]:
        return {"x": await double(state["x"])}

    return (
        g.StateGraph(X)
        .add_node("first", first)
        .add_node("second", second)
        .add_edge(g.START, "first")
        .add_edge("first", "second")
        .compile(checkpointer=cp)
    )


async def test_a_chain_streamed_without_checkpointer_shows_the_task_between_its_nodes() -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api (a chain of
    # two nodes, the second calling a task): the task's update comes between the nodes'
    ours, theirs = both(sync_node_with_a_task, None)
    expected = await streamed(theirs, {"x": 1}, "updates")
    assert expected == [{"first": {"x": 2}}, {"double": 4}, {"second": {"x": 4}}]
    assert await streamed(ours, {"x": 1}, "updates") == expected
    assert (await ours.run({"x": 1})).state == {"x": 4}


def a_task_left_unawaited(g: Any, cp: Any, ran: list[int]) -> Any:
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        ran.append(v)
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])  # started, never awaited
        return {"x": state["x"] + 1}

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


async def test_a_task_left_unawaited_in_a_streamed_run_that_saves_nothing_ends_in_its_step() -> (
    None
):
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, a task the
    # node never awaited: it runs to its end within the node's step, its update in the
    # stream (ours before the node's: docs/graph.md, "The functional API")
    ran: list[int] = []
    ours = a_task_left_unawaited(OURS, None, ran)
    items = await streamed(ours, {"x": 1}, "updates")
    assert ran == [1]
    assert sorted(map(str, items)) == sorted(map(str, [{"note": 1}, {"n": {"x": 2}}]))


def a_sub_graph_s_node_with_tasks(g: Any, cp: Any) -> Any:
    inner = two_tasks_in_a_node(g, None)
    return g.StateGraph(X).add_node("sub", inner).add_edge(g.START, "sub").compile(checkpointer=cp)


@pytest.mark.parametrize("subgraphs", [False, True])
async def test_a_sub_graph_s_node_streams_its_task_calls_in_a_run_that_saves_nothing(
    subgraphs: bool,
) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, the node
    # calling the tasks inside a sub-graph node, in a run without checkpointer: the task
    # calls stream in the sub-graph's stream (seen with subgraphs=True), as with one
    ours, theirs = both(a_sub_graph_s_node_with_tasks, None)
    lg_items = [
        i async for i in theirs.astream({"x": 1}, stream_mode="updates", subgraphs=subgraphs)
    ]
    our_items = [i async for i in ours.stream({"x": 1}, mode="updates", subgraphs=subgraphs)]

    def plain(item: Any) -> Any:
        return (len(item[0]), item[1]) if subgraphs else item

    assert [plain(i) for i in our_items] == [plain(i) for i in lg_items]
    if subgraphs:
        assert [plain(i) for i in our_items] == [
            (1, {"slow": 2}),
            (1, {"slow": 3}),
            (1, {"n": {"x": 3}}),
            (0, {"sub": {"x": 3}}),
        ]


def a_failing_node_with_a_task(g: Any, cp: Any, ran: list[int]) -> Any:
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        await asyncio.sleep(0)
        ran.append(v)
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])
        raise ValueError("node failed")

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


async def test_a_failing_node_s_task_ends_before_a_streamed_run_that_saves_nothing_fails() -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, the node
    # failing after starting a task, in a run without checkpointer: the run fails with the
    # node's error once the task has ended (docs/graph.md, "The functional API")
    ran: list[int] = []
    ours = a_failing_node_with_a_task(OURS, None, ran)
    with pytest.raises(ValueError, match="node failed"):
        await streamed(ours, {"x": 1}, "updates")
    assert ran == [1]
