"""Ports of LangGraph's builder surface (``libs/langgraph/tests/test_pregel_async.py``,
``test_state.py``): nodes named by what they are, routers with path maps and ``Literal``
annotations, several entry and finish points, retry policies' ``retry_on``, ``Send`` to a
node of another schema. The same program on LangGraph and on ``tinyagents.graph``, compared,
as in ``test_langgraph_ports.py``.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from langgraph_kit import OURS, THEIRS, Log, cfg, lg_memory

from tinyagents.store.checkpoint import Checkpointer

# -- a node named by what it is ---------------------------------------------------------------


class Shout:
    """A callable object: no ``__name__``, so LangGraph names its node by its class."""

    def __call__(self, state: Any) -> dict[str, Any]:
        return {"log": ["shout"]}


def _tagged(state: Any, tag: str) -> dict[str, Any]:
    return {"log": [tag]}


def named_by_action(g: Any, action: Any, name: str) -> Any:
    graph = g.StateGraph(Log).add_node(action)
    return graph.add_edge(g.START, name)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (Shout, "Shout"),
        (lambda: functools.partial(_tagged, tag="p"), "partial"),
    ],
    ids=["callable-object", "partial"],
)
async def test_add_node_names_a_callable_object_by_its_class(
    checkpointer: Checkpointer, make: Any, name: str
) -> None:
    theirs = named_by_action(THEIRS, make(), name).compile(checkpointer=lg_memory.InMemorySaver())
    ours = named_by_action(OURS, make(), name).compile(checkpointer=checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected
    assert name in ours.nodes


def subgraph_by_its_name(g: Any) -> Any:
    sub = g.StateGraph(Log).add_node("s", lambda s: {"log": ["s"]})
    sub = sub.add_edge(g.START, "s").compile(name="sub")
    graph = g.StateGraph(Log).add_node(sub).add_node("after", lambda s: {"log": ["after"]})
    return graph.add_edge(g.START, "sub").add_edge("sub", "after")


async def test_add_node_names_a_compiled_graph_by_its_name(checkpointer: Checkpointer) -> None:
    theirs = subgraph_by_its_name(THEIRS).compile(checkpointer=lg_memory.InMemorySaver())
    ours = subgraph_by_its_name(OURS).compile(checkpointer=checkpointer)
    expected = await theirs.ainvoke({"log": []}, cfg())
    assert expected == {"log": ["s", "after"]}
    result = await ours.run({"log": []}, thread_id="1")
    assert result.status == "completed", result.error
    assert result.state == expected


def sequence_of_objects(g: Any) -> Any:
    return g.StateGraph(Log).add_sequence([Shout(), ("b", lambda s: {"log": ["b"]})])


async def test_add_sequence_names_a_callable_object_by_its_class(
    checkpointer: Checkpointer,
) -> None:
    theirs = sequence_of_objects(THEIRS).add_edge(THEIRS.START, "Shout")
    ours = sequence_of_objects(OURS).add_edge(OURS.START, "Shout")
    expected = await theirs.compile(checkpointer=lg_memory.InMemorySaver()).ainvoke(
        {"log": []}, cfg()
    )
    result = await ours.compile(checkpointer=checkpointer).run({"log": []}, thread_id="1")
    assert result.state == expected == {"log": ["shout", "b"]}
