"""Ports of LangGraph's tests of a graph whose state is one value, of a node's ``@task``
calls in a run that saves nothing, and of a tuple saved in a checkpoint: the same program
on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.
Each test's comment names the LangGraph test it follows (``libs/langgraph/tests/``).

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture) where a test has one.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph_kit import OURS, THEIRS, X, func_of, lg_memory

from tinyagents import Runtime
from tinyagents.store.checkpoint import Checkpointer


def both(build: Any, checkpointer: Checkpointer | None, *args: Any) -> tuple[Any, Any]:
    """``build(g, cp, *args)`` of each library: (ours, LangGraph's)."""
    theirs_cp = None if checkpointer is None else lg_memory.InMemorySaver()
    return build(OURS, checkpointer, *args), build(THEIRS, theirs_cp, *args)


# -- a node's @task calls in a run that saves nothing, streamed or not ----------------------


def a_task_left_unawaited(g: Any, cp: Any, ran: list[str]) -> Any:
    """Node ``n`` starts a task it never awaits; node ``after`` notes what had run by then."""
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        for _ in range(20):
            await asyncio.sleep(0)
        ran.append(f"note {v}")
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])  # started, never awaited
        return {"x": state["x"] + 1}

    async def after(state: Any) -> dict[str, Any]:
        ran.append("after")
        return {"x": state["x"] + 1}

    return (
        g.StateGraph(X)
        .add_node("n", node)
        .add_node("after", after)
        .add_edge(g.START, "n")
        .add_edge("n", "after")
        .compile(checkpointer=cp)
    )


async def drive(graph: Any, how: str) -> Any:
    """Run ``graph`` on ``{"x": 1}`` as ``how`` says: a plain run, a stream of values, ours
    step by step (``iter``) or in a ``Runtime`` (``steered``)."""
    if hasattr(graph, "ainvoke"):
        if how == "values":
            return [v async for v in graph.astream({"x": 1}, stream_mode="values")][-1]
        return await graph.ainvoke({"x": 1})
    if how == "values":
        return [v async for v in graph.stream({"x": 1}, mode="values")][-1]
    if how == "iter":
        async with graph.iter({"x": 1}) as run:
            steps = [step async for step in run.supersteps()]
        return steps[-1].result.raise_for_status().state
    if how == "steered":
        async with Runtime(testing=True) as rt:
            handle = await rt.start_graph(graph, {"x": 1})
            result = await handle.result()
            if result.error is not None:
                raise ValueError(result.error)  # (a steered run reports its error as text)
            return result.output
    return (await graph.run({"x": 1})).raise_for_status().state


HOW = ["run", "values", "iter", "steered"]


@pytest.mark.parametrize("how", HOW)
async def test_a_task_left_unawaited_ends_in_its_node_s_step_without_checkpointer(
    how: str,
) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api (a task the
    # node never awaited runs to its end within the node's step), in a plain ainvoke and a
    # values stream without checkpointer: the next node runs after it, as with one
    mine: list[str] = []
    theirs_ran: list[str] = []
    ours, _ = both(a_task_left_unawaited, None, mine)
    _, theirs = both(a_task_left_unawaited, None, theirs_ran)
    assert await drive(theirs, how) == {"x": 3}
    assert theirs_ran == ["note 1", "after"]
    assert await drive(ours, how) == {"x": 3}
    assert mine == theirs_ran


def a_failing_node_with_a_task(g: Any, cp: Any, ran: list[int]) -> Any:
    func = func_of(g)

    @func.task
    async def note(v: int) -> int:
        for _ in range(20):
            await asyncio.sleep(0)
        ran.append(v)
        return v

    async def node(state: Any) -> dict[str, Any]:
        note(state["x"])
        raise ValueError("node failed")

    return g.StateGraph(X).add_node("n", node).add_edge(g.START, "n").compile(checkpointer=cp)


@pytest.mark.parametrize("how", HOW)
async def test_a_failing_node_s_task_ends_before_a_run_without_checkpointer_fails(
    how: str,
) -> None:
    # LangGraph: test_pregel_async.py::test_async_streaming_with_functional_api, the node
    # failing after starting a task, in a plain ainvoke and a values stream without
    # checkpointer: the run fails with the node's error once the task has ended
    mine: list[int] = []
    ours = a_failing_node_with_a_task(OURS, None, mine)
    with pytest.raises(ValueError, match="node failed"):
        await drive(ours, how)
    assert mine == [1]
