"""A supervisor attached to a graph (``compile(supervisor=spec)``): what it covers and what
static validation says about the graph.

An abort of an agent node's run ends that run ``aborted``; unless the node routes that
outcome (``AgentNode(agent, then=..., on_aborted=...)``) it raises and the graph run fails.
Every agent node a spec can abort and that does not route it is a warning, with the way to
route the outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from tinyagents.supervisor.findings import Finding

if TYPE_CHECKING:
    from tinyagents.graph.core import GraphCore


def agent_nodes(graph: GraphCore, prefix: str = "", *, unrouted: bool = False) -> Iterator[str]:
    """The agent nodes of ``graph`` and of its sub-graphs, as ``"node"`` / ``"sub/node"``
    (``unrouted``: only those that do not route their ``aborted`` outcome)."""
    for name, node in graph.nodes.items():
        if node.agent is not None and not (unrouted and node.agent.routes):
            yield f"{prefix}{name}"
        if node.subgraph is not None:
            yield from agent_nodes(node.subgraph, f"{prefix}{name}/", unrouted=unrouted)


def graph_findings(graph: GraphCore, *, can_abort: bool) -> list[Finding]:
    """A warning for each agent node of ``graph`` whose ``aborted`` outcome is not routed,
    under a spec that ``can_abort`` (``SupervisorSpec.can_abort``)."""
    if not can_abort:
        return []
    return [
        Finding(
            "warning",
            f"agent node {path!r} of graph {graph.name!r}: its 'aborted' outcome is not "
            "routed, so a supervisor abort (or a pause past its dwell cap) fails the whole "
            "graph run; to route it, add the node as AgentNode(agent, then=<next node>, "
            "on_aborted=<node for an aborted run>) instead of an edge",
        )
        for path in agent_nodes(graph, unrouted=True)
    ]
