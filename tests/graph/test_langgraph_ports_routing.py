"""Ports of LangGraph's routing within a parallel step (``libs/langgraph/tests/
test_pregel_async.py``: the conditional-edge tests whose routers run beside sibling nodes):
the same program on LangGraph and on ``tinyagents.graph``, compared, as in
``test_langgraph_ports.py``.

LangGraph runs a node's router in the node's own task, on the state the step started from
with that node's writes applied (its ``fresh`` read): a router never sees what a sibling of
the same step wrote. Ours routes after the step, and gives each router that same state. A
router whose first parameter is annotated with another schema than the state's sees that
schema's keys only, as LangGraph infers a router's input schema from it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph_kit import OURS, THEIRS, cfg, lg_memory, pair

from tinyagents.store.checkpoint import Checkpointer


class Two(TypedDict, total=False):
    x: int
    y: int
    log: Annotated[list[str], operator.add]


def sibling_graph(g: Any) -> Any:
    """START → a, b in one step; a's router asks for what b writes in that step."""
    graph = g.StateGraph(Two)
    graph.add_node("a", lambda s: {"x": 1, "log": ["a"]})
    graph.add_node("b", lambda s: {"y": 2, "log": ["b"]})
    graph.add_node("saw_b", lambda s: {"log": ["saw_b"]})
    graph.add_node("missed_b", lambda s: {"log": ["missed_b"]})

    def after_a(state: Any) -> str:
        assert state["x"] == 1  # its own node's write it sees
        assert state["log"][-1] == "a", state["log"]  # its own append, not b's
        return "saw_b" if state.get("y") == 2 else "missed_b"

    graph.add_edge(g.START, "a").add_edge(g.START, "b")
    return graph.add_conditional_edges("a", after_a)


async def test_a_router_sees_its_nodes_writes_not_its_siblings(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(sibling_graph, checkpointer)
    expected = await theirs.ainvoke({"log": ["in"]}, cfg())
    assert expected == {"x": 1, "y": 2, "log": ["in", "a", "b", "missed_b"]}
    result = await ours.run({"log": ["in"]}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected
    # the next step, run alone, sees the whole state as ever
    expected = await theirs.ainvoke({"log": []}, cfg())
    assert (await ours.run({"log": []}, thread_id="1")).state == expected


class Tally(TypedDict, total=False):
    count: Annotated[int, operator.add]
    log: Annotated[list[str], operator.add]


def send_graph(g: Any) -> Any:
    """Three ``Send``s to one node, each adding one to a counter; the router after each sees
    the counter with its own task's one only."""
    graph = g.StateGraph(Tally)
    graph.add_node("fan", lambda s: {})
    graph.add_node("work", lambda arg: {"count": 1, "log": [f"work {arg}"]})
    graph.add_node("one", lambda s: {"log": [f"one {s['count']}"]})
    graph.add_node("many", lambda s: {"log": [f"many {s['count']}"]})
    graph.add_edge(g.START, "fan")
    graph.add_conditional_edges("fan", lambda s: [g.Send("work", n) for n in range(3)])
    return graph.add_conditional_edges("work", lambda s: "one" if s["count"] == 1 else "many")


async def test_routers_after_sends_each_see_their_own_tasks_writes(
    checkpointer: Checkpointer,
) -> None:
    ours, theirs = pair(send_graph, checkpointer)
    expected = await theirs.ainvoke({"count": 0}, cfg())
    assert expected["log"][-1] == "one 3"
    result = await ours.run({"count": 0}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected


class Seen(TypedDict, total=False):
    x: int
    y: int
    log: Annotated[list[str], operator.add]


class OnlyX(TypedDict, total=False):
    x: int


@dataclass
class XAndFlag:
    x: int = 0
    flag: str = "unset"  # not a key of the state: the router's annotation adds the channel


def annotated_graph(g: Any, seen: list[Any]) -> Any:
    """Routers whose first parameter is annotated with another schema than the state's:
    LangGraph hands each that schema's keys only (an instance of a dataclass), as it does a
    node so annotated, and adds its keys to the channels."""

    def by_typeddict(state: OnlyX) -> str:
        seen.append(dict(state))
        return "b"

    def by_dataclass(state: XAndFlag) -> Any:
        seen.append(state)
        return g.END

    graph = g.StateGraph(Seen)
    graph.add_node("a", lambda s: {"x": 1, "y": 2, "log": ["a"]})
    graph.add_node("b", lambda s: {"log": ["b"]})
    graph.add_edge(g.START, "a").add_conditional_edges("a", by_typeddict)
    return graph.add_conditional_edges("b", by_dataclass)


async def test_a_router_sees_the_keys_of_its_first_parameters_annotation(
    checkpointer: Checkpointer,
) -> None:
    theirs_seen: list[Any] = []
    ours_seen: list[Any] = []
    theirs = annotated_graph(THEIRS, theirs_seen).compile(checkpointer=lg_memory.InMemorySaver())
    ours = annotated_graph(OURS, ours_seen).compile(checkpointer=checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    assert theirs_seen == [{"x": 1}, XAndFlag(x=1)]
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected
    assert ours_seen == theirs_seen
    # the annotation's key joins the channels, not the input (the state's keys), as a node's
    theirs_seen.clear()
    ours_seen.clear()
    expected = await theirs.ainvoke({"log": [], "flag": "set"}, cfg("2"))
    assert theirs_seen[1] == XAndFlag(x=1)
    assert (await ours.run({"log": [], "flag": "set"}, thread_id="2")).state == expected
    assert ours_seen == theirs_seen
