"""A graph's drawing: its nodes and edges (``get_graph()``, LangGraph's), and the Mermaid
flowchart text of them (``to_mermaid()``, ``get_graph().draw_mermaid()``): solid arrows for
edges (and from a node no edge leaves to END, where its run ends), dotted for conditional
ones."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tinyagents._record import FrozenRecord
from tinyagents.graph.core import DeclaredGraph, dead_ends
from tinyagents.graph.types import END, START


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DrawnNode(FrozenRecord):
    """A node of ``get_graph()``: START and END included; ``subgraph`` when it runs one."""

    id: str
    name: str
    subgraph: bool = False
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DrawnEdge(FrozenRecord):
    """An edge of ``get_graph()``, as LangGraph's: ``conditional`` for a router's, a goto's
    (``Command(goto=...)`` a node declares with ``destinations``); ``data`` its label (a
    router's mapping key, ``"join"``, ``"goto"``), or None."""

    source: str
    target: str
    data: str | None = None
    conditional: bool = False


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class DrawnGraph(FrozenRecord):
    """What ``get_graph()`` returns: the nodes by id and the edges, in drawing order."""

    nodes: dict[str, DrawnNode]
    edges: tuple[DrawnEdge, ...]

    def draw_mermaid(self) -> str:
        """The Mermaid flowchart text of the graph (``to_mermaid()``'s)."""
        lines = ["flowchart TD"]
        ids = _ids([*self.nodes, *(end for e in self.edges for end in (e.source, e.target))])
        for node in self.nodes.values():
            lines.append(f"    {ids[node.id]}{_shape(node)}")
        for edge in self.edges:
            source, target, label = ids[edge.source], ids[edge.target], edge.data
            if edge.conditional:
                arrow = "-.->" if label is None else f"-. {label} .->"
            else:
                arrow = "-->" if label is None else f"-- {label} -->"
            lines.append(f"    {source} {arrow} {target}")
        return "\n".join(lines) + "\n"


def _ids(names: list[str]) -> dict[str, str]:
    """Each node's Mermaid id: ``n_`` and its name, each character that is no letter, digit
    or ``_`` as ``_``; a name that comes out as an id already given (``a b`` after ``a;b``)
    gets a number after it (one id for both drew the two as one box)."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        if name in ids:
            continue
        if name in (START, END):
            found = "__start__" if name == START else "__end__"
        else:
            found = base = "n_" + re.sub(r"\W", "_", name)
            number = 1
            while found in taken:
                number += 1
                found = f"{base}_{number}"
        ids[name] = found
        taken.add(found)
    return ids


def _label(name: str) -> str:
    return name.replace('"', "#quot;")


def _shape(node: DrawnNode) -> str:
    if node.id == START:
        return "([START])"
    if node.id == END:
        return "([END])"
    if node.subgraph:
        return f'[["{_label(node.name)}"]]'
    return f'["{_label(node.name)}"]'


def drawn(graph: DeclaredGraph) -> DrawnGraph:
    """``graph``'s nodes and edges: what ``to_mermaid`` draws."""
    nodes = {START: DrawnNode(id=START, name=START)}
    for name, spec in graph.nodes.items():
        metadata = dict(spec.metadata) if spec.metadata else None
        subgraph = spec.subgraph is not None
        nodes[name] = DrawnNode(id=name, name=name, subgraph=subgraph, metadata=metadata)
    nodes[END] = DrawnNode(id=END, name=END)
    edges = [DrawnEdge(source=source, target=target) for source, target in graph.edges]
    for sources, target in graph.joins:
        edges.extend(DrawnEdge(source=s, target=target, data="join") for s in sources)
    for branch in graph.branches:
        if branch.mapping is None:
            # without a mapping the router may lead anywhere; draw every possibility
            for target in branch.targets(list(graph.nodes)):
                edges.append(DrawnEdge(source=branch.source, target=target, conditional=True))
            continue
        for key, target in branch.mapping.items():
            label = str(key).replace("|", "/")
            edges.append(
                DrawnEdge(source=branch.source, target=target, data=label, conditional=True)
            )
    for spec in graph.nodes.values():
        for target in spec.destinations:
            edges.append(DrawnEdge(source=spec.name, target=target, data="goto", conditional=True))
    for name in dead_ends(graph):  # the run ends after it: drawn with its edge to END
        edges.append(DrawnEdge(source=name, target=END))
    return DrawnGraph(nodes=nodes, edges=tuple(edges))


def to_mermaid(graph: DeclaredGraph) -> str:
    return drawn(graph).draw_mermaid()


__all__ = ["DrawnEdge", "DrawnGraph", "DrawnNode", "drawn", "to_mermaid"]
