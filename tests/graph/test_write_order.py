"""A returned pydantic state's writes, and a node input schema's extra channels, come in field
order (as LangGraph's), not in the order of a set of names (which changes with the process's
hash seed)."""

from __future__ import annotations

from typing import Any, TypedDict

from pydantic import BaseModel

from tinyagents.graph import END, START, StateGraph

FIELDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


class Wide(BaseModel):
    alpha: int = 0
    beta: int = 0
    gamma: int = 0
    delta: int = 0
    epsilon: int = 0
    zeta: int = 0
    eta: int = 0
    theta: int = 0


async def test_a_returned_model_writes_in_field_order() -> None:
    def node(state: Wide) -> Wide:
        return Wide(**{name: i + 1 for i, name in enumerate(FIELDS)})

    graph = StateGraph(Wide).add_node("n", node).add_edge(START, "n").add_edge("n", END)
    updates = [item async for item in graph.compile().stream({}, mode="updates")]
    assert [list(update["n"]) for update in updates] == [FIELDS]


class Plain(TypedDict, total=False):
    alpha: int


class Private(TypedDict, total=False):
    theta: int
    eta: int
    zeta: int
    epsilon: int
    delta: int


async def test_a_node_input_schema_adds_its_channels_in_field_order() -> None:
    def first(state: Plain) -> dict[str, Any]:
        return {"theta": 1, "eta": 2, "zeta": 3, "epsilon": 4, "delta": 5}

    def second(state: Private) -> dict[str, Any]:
        return {"alpha": sum(state.values())}

    graph = StateGraph(Plain).add_node("first", first).add_node("second", second)
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    compiled = graph.compile()
    assert list(compiled.schema.channels) == ["alpha", "theta", "eta", "zeta", "epsilon", "delta"]
    assert (await compiled.run({"alpha": 0})).state == {"alpha": 15}
