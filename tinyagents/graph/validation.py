"""``compile()`` checks, on a networkx view of the graph.

Each problem raises ``GraphValidationError`` with ``.nodes`` naming the offenders, checked
in this order: edges to unknown nodes, conditional mappings to missing nodes, no entry
point, nodes unreachable from START, cycles without an exit, nodes with no path to END. A
node no edge leaves finishes the run (LangGraph's rule), so it has a path to END.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyagents.errors import GraphValidationError
from tinyagents.graph.core import DeclaredGraph, dead_ends
from tinyagents.graph.types import END, START

if TYPE_CHECKING:
    import networkx as nx


def _fail(message: str, nodes: list[str]) -> GraphValidationError:
    names = ", ".join(repr(n) for n in nodes)
    return GraphValidationError(f"{message}: {names}", nodes=nodes)


def _check_known(graph: DeclaredGraph) -> None:
    known = set(graph.nodes) | {START, END}
    unknown: list[str] = []
    for source, target in graph.edges:
        unknown += [n for n in (source, target) if n not in known]
    for sources, target in graph.joins:
        unknown += [n for n in (*sources, target) if n not in known]
    for branch in graph.branches:
        if branch.source not in known:
            unknown.append(branch.source)
    for spec in graph.nodes.values():
        unknown += [n for n in (*spec.destinations, *spec.supervises) if n not in known]
    if unknown:
        raise _fail("edges refer to unknown nodes (add them with add_node)", sorted(set(unknown)))
    missing = sorted(
        {
            target
            for branch in graph.branches
            if branch.mapping is not None
            for target in branch.mapping.values()
            if target not in known
        }
    )
    if missing:
        raise _fail("conditional edge mappings lead to missing nodes", missing)


def to_networkx(graph: DeclaredGraph) -> nx.DiGraph:
    """Every edge a run could take: static, joins, conditional (all targets), Command gotos."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from([START, *graph.nodes, END])
    g.add_edges_from(graph.edges)
    for sources, target in graph.joins:
        g.add_edges_from((s, target) for s in sources)
    names = list(graph.nodes)
    for branch in graph.branches:
        g.add_edges_from((branch.source, t) for t in branch.targets(names))
    # a default error handler's ``-> Command[Literal[...]]`` may lead on from every node
    defaults = getattr(graph, "node_defaults", None) or {}
    handler = defaults.get("error_handler")
    for spec in graph.nodes.values():
        g.add_edges_from((spec.name, t) for t in spec.destinations)
        if handler is not None and spec.error_handler is None:
            g.add_edges_from((spec.name, t) for t in handler.destinations)
    return g


def validate(graph: DeclaredGraph) -> None:
    import networkx as nx

    _check_known(graph)
    g = to_networkx(graph)
    if g.out_degree(START) == 0:
        raise _fail("the graph has no entry point; add an edge from START", [START])
    reachable = nx.descendants(g, START)
    unreachable = [n for n in graph.nodes if n not in reachable]
    if unreachable:
        # LangGraph compiles such a graph (its Command(goto=...) reaches the node at run
        # time): say how to declare that, the usual cause in a program ported from it
        raise _fail(
            "nodes are unreachable from START (a node that only a Command(goto=...) or a "
            "steering redirect leads to must be declared: destinations=[...] on the node "
            'that sends it there, or its function annotated -> Command[Literal["..."]])',
            unreachable,
        )
    # A node no edge leaves ends the run there (as LangGraph's): it finishes as if it had an
    # edge to END. Only a node whose every way out loops back is a dead end.
    g.add_edges_from((n, END) for n in dead_ends(graph))
    finishing = nx.ancestors(g, END)
    dead = {n for n in graph.nodes if n not in finishing}
    if not dead:
        return
    for component in nx.strongly_connected_components(g.subgraph(dead)):
        nodes = sorted(component)
        if len(nodes) > 1 or g.has_edge(nodes[0], nodes[0]):
            raise _fail("a cycle has no exit to END", nodes)
    raise _fail("nodes have no path to END (add an edge or destinations=...)", sorted(dead))
