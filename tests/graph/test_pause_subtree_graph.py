"""A pause passed down a run tree crosses between agent runs and graph runs.

A pause of an agent run reaches the graph runs running below it (started with ``parent=``),
and a pause of a graph run reaches the agent runs of its running agent nodes, by the same
hold as between agent runs (``tinyagents.harness.pausing``): each run below gets a pause of
its own from ``parent_agent(<paused run>, <its name>)`` at its own next safe boundary (for a
graph run, between supersteps), and the paused run's resume lets go of only what it held.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from graphkit import LogState, logger

from tinyagents import Agent, RunHandle, RunStatus, Runtime, tool
from tinyagents.events import SteeringEvent
from tinyagents.graph import END, START, AgentNode, Command, StateGraph, interrupt
from tinyagents.harness.pausing import PAUSE_SUBTREE, passed_down_by
from tinyagents.protocol import SteeringActor, SteeringKind, SteeringPolicyRef, SteeringPriority
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import EventRecorder, EventWaiter, Gate, ScriptedModel, tool_call

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])
CHILD_OPERATOR = SteeringActor.human("bob", scopes=["agent:control"])


def gated_chain(gate: asyncio.Event) -> Any:
    """a (waits at ``gate``) → b → c."""

    async def a(state: Any) -> dict[str, Any]:
        await gate.wait()
        return {"log": ["a"]}

    graph = StateGraph(LogState).add_node("a", a).add_node("b", logger("b"))
    graph.add_node("c", logger("c")).add_edge(START, "a").add_edge("a", "b")
    return graph.add_edge("b", "c").add_edge("c", END).compile(name="chain")


async def _event(waiter: EventWaiter, type_: str, run_id: str, **fields: Any) -> Any:
    return await asyncio.wait_for(waiter.event(type_, run_id=run_id, **fields), 60)


def _of(
    recorder: EventRecorder, run_id: str, type_: str, kind: SteeringKind
) -> list[SteeringEvent]:
    return [
        e for e in recorder.steering() if e.type == type_ and e.run_id == run_id and e.kind is kind
    ]


def _started(waiter: EventWaiter, run_id: str, node: str) -> bool:
    return any(
        e.type == "graph.task_started" and e.run_id == run_id and e.node == node
        for e in waiter.events
    )


async def _held_parent(rt: Runtime) -> tuple[RunHandle, Gate]:
    """An agent run waiting inside a tool (its next boundary comes only when the test lets
    go of ``hold``)."""
    hold = Gate("hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    return parent, hold


async def test_a_pause_of_an_agent_run_pauses_a_graph_run_below_and_its_resume_resumes_it(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    parent, hold = await _held_parent(rt)
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {}, parent=parent)
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    await parent.pause("hold on", actor=OPERATOR)
    by_parent = SteeringActor.parent_agent(parent.run_id, "parent")
    await _event(waiter, "steering.accepted", graph.run_id, kind=SteeringKind.PAUSE)
    gate.set()  # node a ends: the graph stops at the boundary before b
    await _event(waiter, "steering.applied", graph.run_id, kind=SteeringKind.PAUSE)
    assert graph.status is RunStatus.PAUSED
    assert not _started(waiter, graph.run_id, "b")
    (applied,) = _of(recorder, graph.run_id, "steering.applied", SteeringKind.PAUSE)
    assert applied.actor == by_parent
    assert applied.payload_summary["reason"].startswith(
        f'parent run {parent.run_id} was paused by human "alice" (command '
    )

    await parent.resume(actor=OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]
    (resumed,) = _of(recorder, graph.run_id, "steering.applied", SteeringKind.RESUME)
    assert resumed.actor == by_parent
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_parents_resume_leaves_a_graph_its_own_operator_paused_paused(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    parent, hold = await _held_parent(rt)
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {}, parent=parent)
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    await graph.pause("mine", actor=CHILD_OPERATOR)
    await parent.pause("ours", actor=OPERATOR)
    by_parent = SteeringActor.parent_agent(parent.run_id, "parent")
    await _event(
        waiter, "steering.accepted", graph.run_id, kind=SteeringKind.PAUSE, actor=by_parent
    )
    gate.set()
    await _event(waiter, "steering.applied", graph.run_id, kind=SteeringKind.PAUSE, actor=by_parent)
    await parent.resume(actor=OPERATOR)
    await _event(
        waiter, "steering.applied", graph.run_id, kind=SteeringKind.RESUME, actor=by_parent
    )
    assert graph.status is RunStatus.PAUSED  # its own operator's pause still holds it
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    assert graph.status is RunStatus.PAUSED
    assert not _started(waiter, graph.run_id, "b")
    await graph.resume(actor=CHILD_OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]
    recorder.assert_every_command_terminal()


async def test_a_pause_resumed_before_the_graph_took_it_is_withdrawn(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    parent, hold = await _held_parent(rt)
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {}, parent=parent)
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    await parent.pause(actor=OPERATOR)
    await _event(waiter, "steering.accepted", graph.run_id, kind=SteeringKind.PAUSE)
    resume = await parent.resume(actor=OPERATOR)
    (withdrawn,) = _of(recorder, graph.run_id, "steering.superseded", SteeringKind.PAUSE)
    assert f"parent run {parent.run_id} was resumed" in (withdrawn.reason or "")
    assert withdrawn.superseded_by == resume.correlation_id
    gate.set()
    hold.open()
    for run in (graph, parent):
        assert (await asyncio.wait_for(run.result(), 60)).status is RunStatus.COMPLETED
    assert _of(recorder, graph.run_id, "steering.requested", SteeringKind.RESUME) == []
    recorder.assert_every_command_terminal()


async def test_a_graph_run_started_under_a_paused_agent_run_starts_paused(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    parent, hold = await _held_parent(rt)
    await parent.pause(actor=OPERATOR)
    gate = asyncio.Event()
    gate.set()
    graph = await rt.start_graph(gated_chain(gate), {}, parent=parent)
    await _event(waiter, "steering.applied", graph.run_id, kind=SteeringKind.PAUSE)
    assert graph.status is RunStatus.PAUSED
    assert not _started(waiter, graph.run_id, "a")  # held before its first superstep
    await parent.resume(actor=OPERATOR)
    assert (await asyncio.wait_for(graph.result(), 60)).status is RunStatus.COMPLETED
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


class FlowState(TypedDict, total=False):
    x: str
    out: str
    log: Annotated[list[str], operator.add]


def _agent_graph(gate: Gate, writes: list[str]) -> Any:
    """``work`` (an agent node: waits inside its tool ``hold``, then writes) → b."""

    @tool
    async def write(note: str) -> str:
        """Write a note somewhere that matters."""
        writes.append(note)
        return "written"

    worker = Agent(
        "worker",
        ScriptedModel([tool_call("hold"), tool_call("write", note="after"), "worked"]),
        tools=[gate.tool(), write],
    )
    graph = StateGraph(FlowState).add_node("work", AgentNode(worker, input="x", output="out"))
    graph.add_node("b", logger("b")).add_edge(START, "work").add_edge("work", "b")
    return graph.add_edge("b", END).compile(name="flow")


async def test_a_pause_of_a_graph_run_pauses_its_agent_nodes_run_and_its_resume_resumes_it(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    gate, writes = Gate(), []
    graph = await rt.start_graph(_agent_graph(gate, writes), {"x": "go"})
    await asyncio.wait_for(gate.entered.wait(), 60)
    (worker,) = [r for r in rt.runs.tree.descendants(graph.run_id) if r.kind == "agent"]
    await graph.pause("hold on", actor=OPERATOR)
    by_graph = SteeringActor.parent_agent(graph.run_id, "flow")
    await _event(waiter, "steering.accepted", worker.run_id, kind=SteeringKind.PAUSE)
    gate.open()  # the worker's tool ends: it stops at its next boundary
    await _event(waiter, "run.paused", worker.run_id)
    assert writes == []
    (applied,) = _of(recorder, worker.run_id, "steering.applied", SteeringKind.PAUSE)
    assert applied.actor == by_graph
    assert applied.payload_summary["reason"].startswith(f"ancestor run {graph.run_id} was paused")
    # marked passed down by the graph run as an agent run's hold is, by the actor and the
    # policy it names (what a restarted run reads in its log), not by that reason
    held = rt.runs.get(worker.run_id)
    assert held is not None
    pause = held.driver.pauses.last
    assert pause is not None and pause.correlation_id == applied.correlation_id
    assert pause.policy_ref == SteeringPolicyRef(policy_id=PAUSE_SUBTREE)
    assert passed_down_by(pause) == graph.run_id

    await graph.resume(actor=OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["b"]
    assert writes == ["after"]
    (resumed,) = _of(recorder, worker.run_id, "steering.applied", SteeringKind.RESUME)
    assert resumed.actor == by_graph and resumed.affected.get("resumed") is True
    recorder.assert_every_command_terminal()


async def test_a_graphs_resume_leaves_an_agent_node_its_own_operator_paused_paused(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    gate, writes = Gate(), []
    graph = await rt.start_graph(_agent_graph(gate, writes), {"x": "go"})
    await asyncio.wait_for(gate.entered.wait(), 60)
    (info,) = [r for r in rt.runs.tree.descendants(graph.run_id) if r.kind == "agent"]
    worker = rt.runs.get(info.run_id)
    assert worker is not None
    await worker.pause("mine", actor=CHILD_OPERATOR)
    await graph.pause("ours", actor=OPERATOR)
    by_graph = SteeringActor.parent_agent(graph.run_id, "flow")
    await _event(
        waiter, "steering.accepted", worker.run_id, kind=SteeringKind.PAUSE, actor=by_graph
    )
    gate.open()
    await _event(waiter, "run.paused", worker.run_id)
    await graph.resume(actor=OPERATOR)
    await _event(
        waiter, "steering.applied", worker.run_id, kind=SteeringKind.RESUME, actor=by_graph
    )
    assert worker.status is RunStatus.PAUSED and writes == []  # its own operator's pause
    await worker.resume(actor=CHILD_OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and writes == ["after"]
    recorder.assert_every_command_terminal()


async def test_a_pause_reaches_an_agent_node_below_a_graph_below_the_run_paused_once(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """Agent run → graph run → its agent node's run: each run below is sent one pause, by the
    run paused; the graph run does not pass on the one it was sent."""
    parent, hold = await _held_parent(rt)
    gate, writes = Gate(), []
    graph = await rt.start_graph(_agent_graph(gate, writes), {"x": "go"}, parent=parent)
    await asyncio.wait_for(gate.entered.wait(), 60)
    (worker,) = [r for r in rt.runs.tree.descendants(graph.run_id) if r.kind == "agent"]
    await parent.pause(actor=OPERATOR)
    by_parent = SteeringActor.parent_agent(parent.run_id, "parent")
    for run_id in (graph.run_id, worker.run_id):
        await _event(waiter, "steering.accepted", run_id, kind=SteeringKind.PAUSE, actor=by_parent)
    gate.open()
    await _event(waiter, "run.paused", worker.run_id)
    assert writes == []
    (applied,) = _of(recorder, worker.run_id, "steering.applied", SteeringKind.PAUSE)
    assert applied.actor == by_parent
    assert applied.payload_summary["reason"].startswith(f"ancestor run {parent.run_id} ")
    assert len(_of(recorder, worker.run_id, "steering.requested", SteeringKind.PAUSE)) == 1

    await parent.resume(actor=OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and writes == ["after"]
    # the graph never reached a boundary while held: its pause was withdrawn
    (withdrawn,) = _of(recorder, graph.run_id, "steering.superseded", SteeringKind.PAUSE)
    assert f"parent run {parent.run_id} was resumed" in (withdrawn.reason or "")
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_graph_runs_pause_and_resume_delivered_together_let_it_go_on(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """Both queued while a node runs, both delivered at the boundary after it: the resume
    delivered behind the pause ends the pause."""
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {})
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    await graph.pause(actor=OPERATOR)
    await graph.resume(actor=OPERATOR)
    gate.set()
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]
    (resumed,) = _of(recorder, graph.run_id, "steering.applied", SteeringKind.RESUME)
    assert resumed.affected == {"paused": False}
    recorder.assert_every_command_terminal()


async def test_a_resume_sent_before_a_pause_delivered_behind_it_does_not_end_it(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """A resume sent before a (critical) pause but delivered behind it never saw that pause:
    it does not undo it (superseded by it, as at an agent run's boundary); a resume sent
    afterwards does."""
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {})
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    early = await graph.resume(actor=OPERATOR)
    pause = await graph.pause(actor=OPERATOR, priority=SteeringPriority.CRITICAL)
    gate.set()
    await _event(waiter, "steering.applied", graph.run_id, correlation_id=pause.correlation_id)
    await _event(waiter, "steering.superseded", graph.run_id, correlation_id=early.correlation_id)
    assert graph.status is RunStatus.PAUSED
    assert not _started(waiter, graph.run_id, "b")
    await graph.resume(actor=OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]
    recorder.assert_every_command_terminal()


async def test_a_graph_run_continued_after_an_interrupt_keeps_the_hold_it_was_sent(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """A pause passed down to a graph run resting on an interrupt (ended ``interrupted``)
    waits in its queue; the run continued under the same id applies it as the parent's hold,
    and the parent's resume lets it go."""
    parent, hold = await _held_parent(rt)

    def ask(state: Any) -> dict[str, Any]:
        return {"log": [f"ask:{interrupt('ok?')['approved']}"]}

    built = StateGraph(LogState).add_node("ask", ask).add_node("b", logger("b"))
    built.add_edge(START, "ask").add_edge("ask", "b").add_edge("b", END)
    graph = built.compile(checkpointer=MemoryCheckpointer(), name="asks")
    first = await rt.start_graph(graph, {}, thread_id="t", parent=parent, wait_on_interrupt=False)
    assert (await asyncio.wait_for(first.result(), 60)).status is RunStatus.INTERRUPTED
    by_parent = SteeringActor.parent_agent(parent.run_id, "parent")
    await parent.pause(actor=OPERATOR)
    await _event(waiter, "steering.accepted", first.run_id, kind=SteeringKind.PAUSE)
    (question,) = [e for e in waiter.events if e.type == "graph.interrupt"]
    answer = Command(resume={question.data["interrupt_id"]: {"approved": True}})
    again = await rt.start_graph(graph, answer, thread_id="t", wait_on_interrupt=False)
    assert again.run_id == first.run_id
    await _event(waiter, "steering.applied", again.run_id, kind=SteeringKind.PAUSE, actor=by_parent)
    await parent.resume(actor=OPERATOR)
    result = await asyncio.wait_for(again.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["ask:True", "b"]
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_graph_run_its_operator_paused_at_rest_is_held_when_continued(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """An operator's pause of a graph run resting on an interrupt (ended ``interrupted``)
    waits in its queue; the run continued in the same runtime under the same id
    (``handle.reopen()``) applies it before any step, as a run continued after a restart
    does with a pause the log holds open: held ``paused``, the answer it was started with not
    taken, until the operator's resume."""
    asked: list[int] = []
    graph = _asking(asked)
    first = await rt.start_graph(graph, {}, thread_id="t", wait_on_interrupt=False)
    assert (await asyncio.wait_for(first.result(), 60)).status is RunStatus.INTERRUPTED
    pause = await first.pause(actor=OPERATOR)
    (question,) = [e for e in waiter.events if e.type == "graph.interrupt"]
    answer = Command(resume={question.data["interrupt_id"]: {"approved": True}})
    again = await rt.start_graph(graph, answer, thread_id="t", wait_on_interrupt=False)
    assert again.run_id == first.run_id
    await _event(waiter, "steering.applied", again.run_id, correlation_id=pause.correlation_id)
    assert again.status is RunStatus.PAUSED
    assert asked == [1] and not _started(waiter, again.run_id, "b")
    await again.resume(actor=OPERATOR)
    result = await asyncio.wait_for(again.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["ask:True", "b"]
    recorder.assert_every_command_terminal()


async def _until(check: Any) -> None:
    """Wait until ``check()`` (a run's status, which no event announces)."""
    while not check():  # noqa: ASYNC110 (a run status, no event to wait on)
        await asyncio.sleep(0.01)


def _asking(asked: list[int]) -> Any:
    """ask (asks ``ok?``, counting each time its node runs) → b."""

    def ask(state: Any) -> dict[str, Any]:
        asked.append(1)
        return {"log": [f"ask:{interrupt('ok?')['approved']}"]}

    built = StateGraph(LogState).add_node("ask", ask).add_node("b", logger("b"))
    built.add_edge(START, "ask").add_edge("ask", "b").add_edge("b", END)
    return built.compile(checkpointer=MemoryCheckpointer(), name="asks")


async def test_a_pause_landing_on_a_graph_resting_on_an_interrupt_does_not_say_it_resumed(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """A graph run waiting for an answer is paused from above and let go of: it never went on
    from its interrupt (no ``graph.resumed``, its question is not asked again, it still waits
    for the answer); the answer then lets it go on, once."""
    parent, hold = await _held_parent(rt)
    asked: list[int] = []
    graph = await rt.start_graph(_asking(asked), {}, thread_id="t", parent=parent)
    question = await _event(waiter, "graph.interrupt", graph.run_id)
    await parent.pause(actor=OPERATOR)
    await _event(waiter, "steering.applied", graph.run_id, kind=SteeringKind.PAUSE)
    assert graph.status is RunStatus.PAUSED
    await parent.resume(actor=OPERATOR)
    await _event(waiter, "steering.applied", graph.run_id, kind=SteeringKind.RESUME)
    await asyncio.wait_for(_until(lambda: graph.status is RunStatus.INTERRUPTED), 60)
    assert [e for e in recorder.events if e.type == "graph.resumed"] == []
    assert asked == [1]
    assert len([e for e in recorder.events if e.type == "graph.interrupt"]) == 1

    await graph.submit(
        SteeringKind.APPROVE, {"interrupt_id": question.data["interrupt_id"]}, actor=OPERATOR
    )
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["ask:True", "b"]
    assert len([e for e in recorder.events if e.type == "graph.resumed"]) == 1
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_graphs_own_resume_said_before_a_pause_passed_down_does_not_end_that_hold(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """A resume said before a pause never ends that pause, whoever sent it: the graph's own
    resume, delivered behind a (critical) pause its parent passed down, is superseded by it,
    as an agent run's is; the parent's resume lets the graph go on."""
    parent, hold = await _held_parent(rt)
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {}, parent=parent)
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    early = await graph.resume(actor=CHILD_OPERATOR)
    await parent.pause(actor=OPERATOR, priority=SteeringPriority.CRITICAL)
    by_parent = SteeringActor.parent_agent(parent.run_id, "parent")
    await _event(waiter, "steering.accepted", graph.run_id, kind=SteeringKind.PAUSE)
    gate.set()
    held = await _event(
        waiter, "steering.applied", graph.run_id, kind=SteeringKind.PAUSE, actor=by_parent
    )
    assert held.affected["from_above"] == parent.run_id
    superseded = await _event(
        waiter, "steering.superseded", graph.run_id, correlation_id=early.correlation_id
    )
    assert superseded.superseded_by == held.correlation_id
    assert graph.status is RunStatus.PAUSED
    assert not _started(waiter, graph.run_id, "b")
    await parent.resume(actor=OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_graphs_own_resume_ends_its_own_earlier_pause_but_not_a_later_hold(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
) -> None:
    """The graph's operator pauses it and resumes it; its parent is paused (critical) in
    between; all three land at one boundary, the parent's first. The resume ends the pause
    it was said after, not the hold said after it: the graph stays paused, by the hold
    (``paused_by: above``), and goes on when the parent is resumed."""
    parent, hold = await _held_parent(rt)
    gate = asyncio.Event()
    graph = await rt.start_graph(gated_chain(gate), {}, parent=parent)
    await _event(waiter, "graph.task_started", graph.run_id, node="a")
    await graph.pause("mine", actor=CHILD_OPERATOR)
    mine = await graph.resume(actor=CHILD_OPERATOR)
    await parent.pause(actor=OPERATOR, priority=SteeringPriority.CRITICAL)
    await _event(waiter, "steering.accepted", graph.run_id, kind=SteeringKind.PAUSE)
    gate.set()
    resumed = await _event(
        waiter, "steering.applied", graph.run_id, correlation_id=mine.correlation_id
    )
    assert resumed.affected == {"paused": True, "paused_by": "above"}
    assert graph.status is RunStatus.PAUSED
    assert not _started(waiter, graph.run_id, "b")
    await parent.resume(actor=OPERATOR)
    result = await asyncio.wait_for(graph.result(), 60)
    assert result.status is RunStatus.COMPLETED and result.output["log"] == ["a", "b", "c"]
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()
