"""Ports of LangGraph's deferred nodes (``add_node(..., defer=True)``;
``libs/langgraph/tests/test_pregel_async.py``: test_defer_node and friends): the same program
on LangGraph and on ``tinyagents.graph``, compared, as in ``test_langgraph_ports.py``.

A deferred node that is triggered waits until a step triggers no other node, then runs once.
The waiting trigger is part of the thread's checkpoint: it survives an interrupt, a failed
step, a breakpoint and a new process. LangGraph runs on its ``InMemorySaver``; ours on every
checkpointer backend.
"""

from __future__ import annotations

from typing import Any

import pytest
from graphkit import logger
from langgraph_kit import OURS, THEIRS, Log, cfg, lg_memory, pair, shape, values

from tinyagents.store.checkpoint import Checkpointer


def aggregate(state: Any) -> dict[str, Any]:
    return {"log": [f"aggregate {len(state['log'])}"]}


def uneven(g: Any, *, ask: bool = False, fail: list[str] | None = None) -> Any:
    """START → short → aggregate (deferred), START → long1 → long2 → aggregate; ``long2``
    asks a question (``ask``) or fails while ``fail`` holds an item."""

    def long2(state: Any) -> dict[str, Any]:
        if fail:
            fail.pop()
            raise RuntimeError("long2 failed")
        if ask:
            return {"log": [f"long2 {g.interrupt('go on?')}"]}
        return {"log": ["long2"]}

    graph = g.StateGraph(Log)
    graph.add_node("short", logger("short")).add_node("long1", logger("long1"))
    graph.add_node("long2", long2).add_node("aggregate", aggregate, defer=True)
    graph.add_edge(g.START, "short").add_edge(g.START, "long1").add_edge("long1", "long2")
    graph.add_edge("short", "aggregate").add_edge("long2", "aggregate")
    return graph.add_edge("aggregate", g.END)


async def test_a_deferred_node_waits_across_an_interrupt(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(lambda g: uneven(g, ask=True), checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "interrupted"
    assert result.state == values(out) == {"log": ["long1", "short"]}
    # the held aggregate is not next, nor a task, on either
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("long2",)
    assert [t.name for t in ours_state.tasks] == [t.name for t in theirs_state.tasks]
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(OURS.Command(resume="yes"), thread_id="1")
    assert result.state == out == {"log": ["long1", "short", "long2 yes", "aggregate 3"]}


async def test_the_held_trigger_is_in_the_checkpoint(make_checkpointer: Any) -> None:
    # a new process (a second compile on the same store) resumes the thread: the trigger the
    # first one held is read back from the checkpoint, not from memory
    cp = await make_checkpointer()
    first = uneven(OURS, ask=True).compile(checkpointer=cp)
    assert (await first.run({"log": []}, thread_id="1")).status == "interrupted"
    theirs = uneven(THEIRS, ask=True).compile(checkpointer=lg_memory.InMemorySaver())
    await theirs.ainvoke({"log": []}, cfg())
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    second = uneven(OURS, ask=True).compile(checkpointer=cp)
    result = await second.run(OURS.Command(resume="yes"), thread_id="1")
    assert result.state == out


async def test_a_deferred_node_waits_across_a_failed_step(checkpointer: Checkpointer) -> None:
    ours_fail, theirs_fail = ["once"], ["once"]
    ours = uneven(OURS, fail=ours_fail).compile(checkpointer=checkpointer)
    theirs = uneven(THEIRS, fail=theirs_fail).compile(checkpointer=lg_memory.InMemorySaver())
    with pytest.raises(RuntimeError):
        await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "failed"
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["long1", "short", "long2", "aggregate 3"]}


async def test_a_deferred_node_waits_across_a_breakpoint(checkpointer: Checkpointer) -> None:
    ours, theirs = pair(uneven, checkpointer, interrupt_before=["long2"])
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["long1", "short"]}
    assert (await ours.get_state("1")).next == (await theirs.aget_state(cfg())).next
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out == {"log": ["long1", "short", "long2", "aggregate 3"]}


@pytest.mark.parametrize("mode", ["updates", "values"])
async def test_deferred_node_streams(checkpointer: Checkpointer, mode: str) -> None:
    ours, theirs = pair(uneven, checkpointer)
    theirs_items = [i async for i in theirs.astream({"log": []}, cfg(), stream_mode=mode)]
    ours_items = [i async for i in ours.stream({"log": []}, thread_id="1", mode=mode)]
    assert ours_items == theirs_items
    assert len(theirs_items) == 4  # input (values only) or short and long1, long2, aggregate


async def test_a_send_does_not_hold_a_deferred_node_back(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("s", logger("s"))
        graph.add_node("b", logger("b")).add_node("aggregate", aggregate, defer=True)
        graph.add_edge(g.START, "a")
        graph.add_conditional_edges("a", lambda s: [g.Send("s", {}), "aggregate"])
        graph.add_edge("s", "b").add_edge("b", g.END)
        return graph.add_edge("aggregate", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    # as LangGraph's: only nodes an edge triggers hold it; it runs beside the Send's task
    assert result.state == out == {"log": ["a", "aggregate 1", "s", "b"]}


async def test_a_join_into_a_deferred_node(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log)
        for name in ("a", "b", "b2", "c"):
            graph.add_node(name, logger(name))
        graph.add_node("aggregate", aggregate, defer=True)
        graph.add_edge(g.START, "a").add_edge(g.START, "b").add_edge("b", "b2")
        graph.add_edge("a", "c").add_edge("b2", "c").add_edge(["a", "b"], "aggregate")
        return graph.add_edge("aggregate", g.END).add_edge("c", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["a", "b", "b2", "c", "c", "aggregate 5"]}


async def test_a_deferred_node_triggered_twice_runs_once(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log)
        for name in ("a", "b", "c"):
            graph.add_node(name, logger(name))
        graph.add_node("aggregate", aggregate, defer=True)
        graph.add_edge(g.START, "a").add_edge("a", "aggregate").add_edge("a", "b")
        graph.add_edge("b", "aggregate").add_edge("b", "c").add_edge("c", g.END)
        return graph.add_edge("aggregate", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["a", "b", "c", "aggregate 3"]}


async def test_a_deferred_node_in_a_subgraph(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        sub = uneven(g, ask=True).compile()
        graph = g.StateGraph(Log).add_node("sub", sub).add_node("after", logger("after"))
        graph.add_edge(g.START, "sub").add_edge("sub", "after")
        return graph.add_edge("after", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "interrupted"
    assert [shape(i.ns) for i in result.interrupts] == [("sub",)]
    assert result.state == values(out) == {"log": []}
    out = await theirs.ainvoke(THEIRS.Command(resume="yes"), cfg())
    result = await ours.run(OURS.Command(resume="yes"), thread_id="1")
    # LangGraph's sub-graph node returns its whole log, which the parent's reducer appends
    # to its own (docs/graph.md, "Sub-graphs": ours appends what the sub-graph changed)
    assert out["log"] == ["long1", "short", "long2 yes", "aggregate 3", "after"]
    assert result.state == out


async def test_update_state_as_a_node_that_triggers_a_deferred_one(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(uneven, checkpointer)
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    # as "short": its edge triggers aggregate, and nothing else would run, so it is next
    await theirs.aupdate_state(cfg(), {"log": ["again"]}, as_node="short")
    await ours.update_state("1", {"log": ["again"]}, as_node="short")
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("aggregate",)
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == out
    assert out["log"][-2:] == ["again", "aggregate 5"]


async def test_update_state_as_another_node_keeps_a_released_deferred_node(
    checkpointer: Checkpointer,
) -> None:
    # aggregate was released (no other node ran) and waits at its breakpoint; an update as
    # long1 routes to long2, and aggregate stays next beside it, as LangGraph's finished
    # deferred channel keeps it triggered until it runs
    ours, theirs = pair(uneven, checkpointer, interrupt_before=["aggregate"])
    await theirs.ainvoke({"log": []}, cfg())
    await ours.run({"log": []}, thread_id="1")
    assert (await ours.get_state("1")).next == ("aggregate",)
    await theirs.aupdate_state(cfg(), {"log": ["edit"]}, as_node="long1")
    await ours.update_state("1", {"log": ["edit"]}, as_node="long1")
    theirs_state, ours_state = await theirs.aget_state(cfg()), await ours.get_state("1")
    assert ours_state.next == theirs_state.next == ("long2", "aggregate")
    out = await theirs.ainvoke(None, cfg())
    result = await ours.run(None, thread_id="1")
    assert result.state == values(out)
    assert "aggregate 4" in result.state["log"]


async def test_a_goto_to_a_deferred_node_waits_too(checkpointer: Checkpointer) -> None:
    def build(g: Any) -> Any:
        graph = g.StateGraph(Log)
        graph.add_node("jump", lambda s: g.Command(goto="aggregate"), destinations=("aggregate",))
        graph.add_node("long1", logger("long1")).add_node("long2", logger("long2"))
        graph.add_node("aggregate", aggregate, defer=True)
        graph.add_edge(g.START, "jump").add_edge(g.START, "long1").add_edge("long1", "long2")
        return graph.add_edge("long2", g.END).add_edge("aggregate", g.END)

    ours, theirs = pair(build, checkpointer)
    out = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.state == out == {"log": ["long1", "long2", "aggregate 2"]}
