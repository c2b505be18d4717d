"""Agent nodes: an ``Agent`` as a graph node runs as a child agent run of the graph run.

The child run carries the task id and node id in its ``RunInfo``, so harness steering
(instructions, tool constraints, pause) reaches it directly while the node runs.

    graph.add_node("writer", AgentNode(writer, input="topic", output="draft"))
    graph.add_node("critic", critic_agent)  # reads state["input"], writes state["output"]

An ``aborted`` end (a supervisor abort, or a pause past its dwell cap) fails the graph run
unless the node routes it: ``AgentNode(agent, then="publish", on_aborted="review")`` goes to
``review`` when the agent's run ends ``aborted`` and to ``publish`` when it completes.

An agent with ``RunLimits(behavior="stop_with_partial")`` that reaches a limit writes its
partial output, as ``SubAgent.invoke`` hands it back (``output_or_raise``), as a completed
run's output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinyagents._record import FrozenRecord
from tinyagents.errors import ConfigurationError, GraphError, RunFailed
from tinyagents.graph.types import END, Command
from tinyagents.harness.agent import Agent
from tinyagents.harness.loop import cancel_run_task, start_agent_run
from tinyagents.harness.subagent import output_or_raise
from tinyagents.protocol.ids import shown_repr
from tinyagents.protocol.state import RunStatus

if TYPE_CHECKING:
    from tinyagents.graph.tasks import Task
    from tinyagents.runs.handle import RunHandle
    from tinyagents.runs.host import RunHost


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class AgentNode(FrozenRecord):
    """How an agent node reads its input from the state and writes its output back.

    ``input``: a state key holding the prompt, or ``state -> str | list[Message]``.
    ``output``: the state key that receives the run's final output, or
    ``(output, state) -> dict`` for several keys.

    ``on_aborted`` routes the ``aborted`` outcome instead of failing the graph run: the node
    to go to (its writes: ``aborted_key``, if given, receives the run's abort reason), or
    ``(result, state) -> Command`` for anything else (declare its targets with
    ``add_node(..., destinations=...)``). A node that routes its outcomes has no edges of its
    own: ``then`` names where a completed run goes (default ``END``).
    """

    agent: Agent
    input: str | Callable[[Any], Any] = "input"
    output: str | Callable[[Any, Any], dict[str, Any]] = "output"
    on_aborted: str | Callable[[Any, Any], Command[Any]] | None = None
    then: str | Sequence[str] = END
    aborted_key: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.agent, Agent):
            raise ConfigurationError(f"AgentNode takes an Agent, got {type(self.agent).__name__}")
        for name, what in (("input", "state key"), ("output", "state key"), ("on_aborted", "node")):
            value = getattr(self, name)
            if value is None and name == "on_aborted":
                continue
            if not isinstance(value, str) and not callable(value):
                raise ConfigurationError(
                    f"AgentNode({name}=...) is a {what} name or a function, got {shown_repr(value)}"
                )
        if self.on_aborted is None and (self.then != END or self.aborted_key is not None):
            raise ConfigurationError(
                "AgentNode(then=..., aborted_key=...) go with on_aborted=...: without it the "
                "node's edges route a completed run (add_edge) and an abort fails the graph"
            )
        if self.aborted_key is not None and callable(self.on_aborted):
            raise ConfigurationError(
                "AgentNode(aborted_key=...) goes with on_aborted=<node name>; a callable "
                "on_aborted returns its own Command(update=...)"
            )

    @property
    def routes(self) -> bool:
        """Whether this node routes its own outcomes (``on_aborted`` is set)."""
        return self.on_aborted is not None

    def destinations(self) -> tuple[str, ...]:
        """The nodes this node's outcomes may lead to (what ``compile()`` validates)."""
        if self.on_aborted is None:
            return ()
        then = (self.then,) if isinstance(self.then, str) else tuple(self.then)
        aborted = (self.on_aborted,) if isinstance(self.on_aborted, str) else ()
        return tuple(dict.fromkeys((*then, *aborted)))


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
) -> dict[str, Any] | Command[Any]:
    """Start the agent as a child run of ``parent``, wait for it, map its output to state
    writes (a ``Command`` when the node routes its outcomes). ``started`` learns the child's
    handle (so steering can reach it while it runs)."""
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
        # the node was cancelled: so is its agent, saying why
        cancel_run_task(handle, f"graph task {task.id} (node {task.node!r}) was cancelled")
        raise
    if result.status is RunStatus.ABORTED and node.on_aborted is not None:
        if callable(node.on_aborted):
            return node.on_aborted(result, state)
        update = {node.aborted_key: result.error} if node.aborted_key is not None else None
        return Command(update=update, goto=node.on_aborted)
    if result.status not in (RunStatus.COMPLETED, RunStatus.LIMIT_EXCEEDED):
        raise RunFailed(
            f"agent node {task.node!r} (run {handle.run_id}) ended {result.status.value}: "
            f"{result.error or 'no error message'}"
        )
    # as SubAgent.invoke: the child's own limit error, or with stop_with_partial its partial
    # output as its output validators pass it
    output = await output_or_raise(handle, result)
    writes = node.output(output, state) if callable(node.output) else {node.output: output}
    if node.routes:
        return Command(update=writes, goto=node.then)
    return writes
