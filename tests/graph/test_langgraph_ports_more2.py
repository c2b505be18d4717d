"""Still more ports of LangGraph's own tests and of the behaviour of its code
(``libs/langgraph/tests/test_pregel_async.py``, ``langgraph/graph/_branch.py``,
``langgraph/graph/state.py``): the same program on LangGraph and on ``tinyagents.graph``,
compared, as in ``test_langgraph_ports.py``.

This file covers routers that return no destination (``None``, ``START``) and a router added
twice to one node; ... (see each test's comment for the LangGraph test or code it ports).

LangGraph runs on its ``InMemorySaver``; ours on every checkpointer backend (the
``checkpointer`` fixture). A difference docs/graph.md documents is asserted as ours, with a
comment naming the section.
"""

from __future__ import annotations

from typing import Any

import pytest
from graphkit import logger
from langgraph_kit import OURS, THEIRS, Log, pair

from tinyagents.errors import GraphValidationError, InvalidRouteError

# -- routers that name no destination ------------------------------------------------------


def route_to(g: Any, result: Any) -> Any:
    """START → a, a's router returns ``result``; b → END."""
    graph = g.StateGraph(Log).add_node("a", logger("a")).add_node("b", logger("b"))
    graph.add_edge(g.START, "a").add_edge("b", g.END)

    def router(state: Any) -> Any:
        return result

    return graph.add_conditional_edges("a", router)


@pytest.mark.parametrize("result", [None, "__start__", ["b", None]])
async def test_a_router_returning_no_destination_is_a_value_error(result: Any) -> None:
    # LangGraph's Branch (graph/_branch.py, _finish) raises ValueError("Branch did not return
    # a valid destination") for None and START; ours is an InvalidRouteError, which is a
    # KeyError (a result outside a path_map, as LangGraph's) and a ValueError both
    ours, theirs = pair(lambda g: route_to(g, result), None)
    with pytest.raises(ValueError, match="valid destination"):
        await theirs.ainvoke({"log": []})
    outcome = await ours.run({"log": []})
    assert isinstance(outcome.error, InvalidRouteError)
    assert isinstance(outcome.error, ValueError) and isinstance(outcome.error, KeyError)
    assert "router 'router' after 'a' returned" in str(outcome.error)
    assert outcome.state == {"log": ["a"]}
    with pytest.raises(ValueError):
        outcome.raise_for_status()


def test_the_same_router_added_twice_to_a_node_is_refused() -> None:
    # LangGraph's add_conditional_edges (graph/state.py) refuses a second branch of the same
    # name on a node: "Branch with name `router` already exists for node `a`". Ours refuses
    # the same router added twice (it would route each result twice); two different routers
    # on one node are allowed, lambdas too (LangGraph refuses a second lambda by its name)
    def build(g: Any) -> Any:
        return route_to(g, "b")

    theirs = build(THEIRS)
    with pytest.raises(ValueError, match="already exists for node `a`"):
        theirs.add_conditional_edges("a", theirs.branches["a"]["router"].path.func)
    ours = build(OURS)
    router = ours.branches[0].router
    with pytest.raises(GraphValidationError, match="router 'router' is already a conditional"):
        ours.add_conditional_edges("a", router)
    with pytest.raises(GraphValidationError):
        ours.add_conditional_edges("a", router, {"b": "b"})
    ours.add_conditional_edges("a", lambda s: "b").add_conditional_edges("a", lambda s: "b")
    ours.add_conditional_edges("b", router)  # the same router on another node is fine
