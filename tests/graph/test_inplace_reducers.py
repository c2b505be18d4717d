"""A reducer function that changes the current value in place (``a.extend(b); return a``)
in a step whose writes then fail: the step's writes apply all or nothing, so neither the
run's result nor the thread shows the part written before the failure."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from tinyagents.graph import END, START, Command, StateGraph
from tinyagents.store.checkpoint import MemoryCheckpointer


def extend(a: list[str], b: list[str]) -> list[str]:
    """Refuses before it changes anything, then extends in place."""
    if "bad" in b:
        raise ValueError("bad write")
    a.extend(b)
    return a


class State(TypedDict, total=False):
    log: Annotated[list[str], extend]
    items: Annotated[list[Any], operator.add]


@pytest.mark.parametrize("saved", [False, True])
async def test_a_refused_write_to_another_channel_leaves_the_extended_list_as_it_was(
    saved: bool,
) -> None:
    """The node writes both channels; ``operator.add`` refuses a string after ``extend``
    has extended ``log`` in place: the failed run showed ``log`` with the write."""

    def node(state: State) -> dict[str, Any]:
        return {"log": ["a"], "items": "not a list"}

    graph = StateGraph(State).add_node("a", node).add_edge(START, "a").add_edge("a", END)
    app = graph.compile(checkpointer=MemoryCheckpointer() if saved else None)
    result = await app.run({"log": ["start"], "items": []}, thread_id="t" if saved else None)
    assert result.status == "failed" and isinstance(result.error, TypeError)
    assert result.state["log"] == ["start"]


@pytest.mark.parametrize("saved", [False, True])
async def test_a_fold_that_refuses_its_second_write_leaves_the_list_as_it_was(
    saved: bool,
) -> None:
    """Two parallel nodes write ``log``: the fold extends with the first and refuses the
    second; the failed run showed the first write."""

    def a(state: State) -> State:
        return {"log": ["a"]}

    def b(state: State) -> State:
        return {"log": ["bad"]}

    graph = StateGraph(State).add_node("a", a).add_node("b", b)
    graph.add_edge(START, "a").add_edge(START, "b").add_edge(["a", "b"], END)
    app = graph.compile(checkpointer=MemoryCheckpointer() if saved else None)
    result = await app.run({"log": ["start"]}, thread_id="t" if saved else None)
    assert result.status == "failed" and str(result.error) == "bad write"
    assert result.state["log"] == ["start"]


class Loose(TypedDict, total=False):
    log: Annotated[list[str] | None, extend]  # a union: no empty value to start from


async def test_a_fold_from_no_value_leaves_the_nodes_first_write_as_it_returned_it() -> None:
    """The channel has no value and no empty one: the first write starts it, and the fold
    extended that write in place, so the saved result of its task showed both writes."""

    def a(state: Loose) -> list[Command[Any]]:
        return [Command(update={"log": ["a"]}), Command(update={"log": ["b"]})]

    graph = StateGraph(Loose).add_node("a", a).add_edge(START, "a").add_edge("a", END)
    app = graph.compile(checkpointer=MemoryCheckpointer())
    result = await app.run({}, thread_id="t")
    assert result.state["log"] == ["a", "b"]
    history = await app.history("t")
    step = await app.get_state("t", history[1].checkpoint_id)
    assert [t.result for t in step.tasks] == [{"log": {"$writes": [["a"], ["b"]]}}]
