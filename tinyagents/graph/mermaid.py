"""Mermaid flowchart text for a graph: solid arrows for edges (and from a node no edge leaves
to END, where its run ends), dotted for conditional ones."""

from __future__ import annotations

import re

from tinyagents.graph.core import DeclaredGraph, dead_ends
from tinyagents.graph.types import END, START


def _id(name: str) -> str:
    if name == START:
        return "__start__"
    if name == END:
        return "__end__"
    return "n_" + re.sub(r"\W", "_", name)


def _label(name: str) -> str:
    return name.replace('"', "#quot;")


def to_mermaid(graph: DeclaredGraph) -> str:
    lines = ["flowchart TD", f"    {_id(START)}([START])"]
    for name, spec in graph.nodes.items():
        shape = f'[["{_label(name)}"]]' if spec.subgraph is not None else f'["{_label(name)}"]'
        lines.append(f"    {_id(name)}{shape}")
    lines.append(f"    {_id(END)}([END])")
    for source, target in graph.edges:
        lines.append(f"    {_id(source)} --> {_id(target)}")
    for sources, target in graph.joins:
        for source in sources:
            lines.append(f"    {_id(source)} -- join --> {_id(target)}")
    for branch in graph.branches:
        if branch.mapping is None:
            # without a mapping the router may lead anywhere; draw every possibility
            for target in branch.targets(list(graph.nodes)):
                lines.append(f"    {_id(branch.source)} -.-> {_id(target)}")
            continue
        for key, target in branch.mapping.items():
            label = str(key).replace("|", "/")
            lines.append(f"    {_id(branch.source)} -. {label} .-> {_id(target)}")
    for spec in graph.nodes.values():
        for target in spec.destinations:
            lines.append(f"    {_id(spec.name)} -. goto .-> {_id(target)}")
    for name in dead_ends(graph):  # the run ends after it: drawn with its edge to END
        lines.append(f"    {_id(name)} --> {_id(END)}")
    return "\n".join(lines) + "\n"
