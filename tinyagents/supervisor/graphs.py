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


def abortable_nodes(graph: GraphCore, *, can_abort: bool, prefix: str = "") -> Iterator[str]:
    """The agent nodes of ``graph`` (and of its sub-graphs) that do not route their
    ``aborted`` outcome and that the nearest spec above them can abort: a sub-graph's own
    ``compile(supervisor=...)`` spec replaces ``can_abort`` (``SupervisorSpec.can_abort``)
    of the graph's for its nodes."""
    for name, node in graph.nodes.items():
        if can_abort and node.agent is not None and not node.agent.routes:
            yield f"{prefix}{name}"
        if node.subgraph is not None:
            spec = getattr(node.subgraph, "supervisor", None)  # a SupervisorSpec, or None
            inner = can_abort if spec is None else bool(spec.can_abort())
            yield from abortable_nodes(node.subgraph, can_abort=inner, prefix=f"{prefix}{name}/")


def graph_findings(graph: GraphCore, *, can_abort: bool) -> list[Finding]:
    """A warning for each agent node of ``graph`` whose ``aborted`` outcome is not routed,
    under the nearest spec: ``graph``'s (which ``can_abort`` says of) or a sub-graph's."""
    return [
        Finding(
            "warning",
            f"agent node {path!r} of graph {graph.name!r}: its 'aborted' outcome is not "
            "routed, so a supervisor abort (or a pause past its dwell cap) fails the whole "
            "graph run; to route it, add the node as AgentNode(agent, then=<next node>, "
            "on_aborted=<node for an aborted run>) instead of an edge",
        )
        for path in abortable_nodes(graph, can_abort=can_abort)
    ]
