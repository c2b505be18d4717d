"""Agent nodes: an ``Agent`` as a graph node runs as a child agent run of the graph run.

The child run carries the task id and node id in its ``RunInfo``, so harness steering
(instructions, tool constraints, pause) reaches it directly while the node runs.

    graph.add_node("writer", AgentNode(writer, input="topic", output="draft"))
    graph.add_node("critic", critic_agent)  # reads state["input"], writes state["output"]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinyagents.errors import GraphError, RunFailed, RunLimitExceeded
from tinyagents.harness.agent import Agent
from tinyagents.harness.loop import start_agent_run
from tinyagents.runs.info import RunStatus

if TYPE_CHECKING:
    from tinyagents.graph.tasks import Task
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost


@dataclass(frozen=True, slots=True)
class AgentNode:
    """How an agent node reads its input from the state and writes its output back.

    ``input``: a state key holding the prompt, or ``state -> str | list[Message]``.
    ``output``: the state key that receives the run's final output, or
    ``(output, state) -> dict`` for several keys.
    """

    agent: Agent
    input: str | Callable[[Any], Any] = "input"
    output: str | Callable[[Any, Any], dict[str, Any]] = "output"


def _read(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        if key not in state:
            raise GraphError(f"agent node input key {key!r} is not in the state")
        return state[key]
    return getattr(state, key)


async def run_agent_node(
    task: Task,
    state: Any,
    runtime: RunHost | None,
    *,
    parent: str | None,
    started: Callable[[Task, RunHandle], None] | None = None,
) -> dict[str, Any]:
    """Start the agent as a child run of ``parent``, wait for it, map its output to state
    writes. ``started`` learns the child's handle (so steering can reach it while it runs)."""
    node: AgentNode = task.spec.agent
    if runtime is None:
        raise GraphError(
            f"node {task.node!r} is an agent and needs a runtime: "
            "graph.run(..., runtime=rt) or rt.start_graph(graph, ...)"
        )
    prompt = node.input(state) if callable(node.input) else _read(state, node.input)
    handle = await start_agent_run(
        runtime, node.agent, prompt, parent=parent, task_id=task.id, node_id=task.node
    )
    if started is not None:
        started(task, handle)
    try:
        result = await handle.result()
    except BaseException:
        if handle.task is not None and not handle.task.done():
            # the node was cancelled: so is its agent, saying why
            handle.task.cancel(f"graph task {task.id} (node {task.node!r}) was cancelled")
        raise
    if result.status is RunStatus.LIMIT_EXCEEDED:
        raise RunLimitExceeded("agent run", result.error, None, run_id=handle.run_id)
    if result.status is not RunStatus.COMPLETED:
        raise RunFailed(
            f"agent node {task.node!r} (run {handle.run_id}) ended {result.status.value}: "
            f"{result.error or 'no error message'}"
        )
    if callable(node.output):
        return node.output(result.output, state)
    return {node.output: result.output}
