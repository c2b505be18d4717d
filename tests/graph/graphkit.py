"""Small shared pieces of the graph tests (imported as ``from graphkit import ...``)."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from tinyagents.graph import END, START, StateGraph


class LogState(TypedDict, total=False):
    """A counter and an append-only log."""

    x: int
    log: Annotated[list[str], operator.add]


def logger(name: str) -> Callable[[Any], dict[str, Any]]:
    """A node that appends its name to ``log``."""

    def node(state: Any) -> dict[str, Any]:
        return {"log": [name]}

    node.__name__ = name
    return node


def chain(*names: str, state: Any = LogState) -> StateGraph:
    """START → names[0] → ... → END, each node a ``logger``."""
    graph = StateGraph(state)
    for name in names:
        graph.add_node(name, logger(name))
    graph.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        graph.add_edge(a, b)
    return graph.add_edge(names[-1], END)
