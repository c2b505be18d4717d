"""A supervisor attached to a graph (``compile(supervisor=spec)``): what it covers and what
static validation says about the graph.

An abort of an agent node's run ends that run ``aborted``; unless the node routes that
outcome (``AgentNode(agent, then=..., on_aborted=...)``) it raises and the graph run fails.
Every agent node a spec can abort and that does not route it is a warning, with the way to
route the outcome. So is a ``tool_repeated`` rule counting a tool that none of the agent runs
the spec watches in the graph has (its agent nodes' and their sub-agents'): it could never
fire (a graph whose nodes start other runs may still have one, so it is not an error).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tinyagents.harness.subagent import SubAgentTool
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


def watched_agents(graph: GraphCore) -> Iterator[Any]:
    """The agents whose runs a spec given to ``graph`` watches: its agent nodes' (in
    sub-graphs compiled without a spec of their own) and, at any depth, their sub-agents'
    (an agent with a spec of its own is watched under that one, its sub-agents under the
    graph's)."""
    seen: set[int] = set()
    stack = [node.agent.agent for node in _nodes_under_spec(graph) if node.agent is not None]
    while stack:
        agent = stack.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        if getattr(agent, "supervisor", None) is None:
            yield agent
        stack.extend(
            tool.subagent.agent for tool in agent.tools.values() if isinstance(tool, SubAgentTool)
        )


def _nodes_under_spec(graph: GraphCore) -> Iterator[Any]:
    for node in graph.nodes.values():
        yield node
        if node.subgraph is not None and getattr(node.subgraph, "supervisor", None) is None:
            yield from _nodes_under_spec(node.subgraph)


def tools_missing(rules: Sequence[Any], tools: Collection[str]) -> list[tuple[int, str]]:
    """(index, tool) of each ``tool_repeated`` rule of ``rules`` (a spec's) counting a tool
    that is not in ``tools``: it could never fire."""
    return [
        (index, rule.tool)
        for index, rule in enumerate(rules)
        if rule.when == "tool_repeated" and rule.tool is not None and rule.tool not in tools
    ]


def tool_findings(graph: GraphCore, rules: Sequence[Any]) -> list[Finding]:
    """A warning for each ``tool_repeated`` rule (``rules``: a spec's) counting a tool that no
    agent run the spec watches in ``graph`` has; nothing when it watches no agent there."""
    if not tools_missing(rules, ()):  # no rule names a tool: no agent to look at
        return []
    agents = list(watched_agents(graph))
    if not agents:
        return []
    tools = {name for agent in agents for name in agent.tools}
    has = ", ".join(sorted(tools)) or "no tools"
    return [
        Finding(
            "warning",
            f"rules.{index} (tool_repeated) counts tool {tool!r}, which no agent run the spec "
            f"watches in graph {graph.name!r} has ({has}), so it could never fire; name one "
            "of their tools, or leave 'tool' out to count each of them",
        )
        for index, tool in tools_missing(rules, tools)
    ]
