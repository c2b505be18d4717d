"""A pause of a run reaches the runs already running below it, and its resume lets go of
those it paused (and only of those).

A parent inside a ``SubAgentTool`` call reaches its next boundary only when its child has done
all its work: a pause applied there paused nothing that was working. The pause is passed down
when it is queued, as a cancel is: each live agent run below gets a pause of its own, from the
actor ``parent_agent(<paused run>, <its agent>)``, at its own next safe boundary.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tinyagents import Agent, RunStatus, Runtime, SubAgent, SubAgentTool, tool
from tinyagents.events import SteeringEvent
from tinyagents.protocol import SteeringActor, SteeringDelivery, SteeringKind, SteeringPriority
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    tool_call,
)

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])
CHILD_OPERATOR = SteeringActor.human("bob", scopes=["agent:control"])


def _writer(calls: list[str]) -> Any:
    @tool
    async def write(note: str) -> str:
        """Write a note somewhere that matters."""
        calls.append(note)
        return "written"

    return write


async def _event(waiter: EventWaiter, type_: str, run_id: str, **fields: Any) -> Any:
    return await asyncio.wait_for(waiter.event(type_, run_id=run_id, **fields), 60)


def _of(
    recorder: EventRecorder, run_id: str, type_: str, kind: SteeringKind
) -> list[SteeringEvent]:
    return [
        e for e in recorder.steering() if e.type == type_ and e.run_id == run_id and e.kind is kind
    ]


async def test_a_pause_of_a_parent_inside_a_subagent_tool_pauses_the_child_and_resume_resumes_it(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    gate, writes = Gate(), []
    child_model = ScriptedModel(
        [tool_call("hold"), tool_call("write", note="after the hold"), "child done"]
    )
    child = Agent("child", child_model, tools=[gate.tool(), _writer(writes)])
    parent = await rt.start(
        Agent(
            "parent",
            ScriptedModel([tool_call("child", input="go"), "parent done"]),
            tools=[SubAgentTool(SubAgent(child))],
        ),
        "go",
    )
    await asyncio.wait_for(gate.entered.wait(), 60)
    (child_info,) = rt.runs.tree.children(parent.run_id)
    pause = await parent.pause("hold on", actor=OPERATOR)
    assert pause.accepted
    await _event(waiter, "steering.accepted", child_info.run_id)
    gate.open()  # the child's tool finishes, and it stops at its next boundary
    await _event(waiter, "run.paused", child_info.run_id)
    assert child_info.status is RunStatus.PAUSED
    assert len(child_model.requests) == 1 and writes == []  # nothing after the pause
    (applied,) = _of(recorder, child_info.run_id, "steering.applied", SteeringKind.PAUSE)
    assert applied.actor == SteeringActor.parent_agent(parent.run_id, "parent")
    assert applied.payload_summary["reason"].startswith(
        f'parent run {parent.run_id} was paused by human "alice" (command '
    )
    assert applied.payload_summary["reason"].endswith(": hold on")

    await parent.resume(actor=OPERATOR)
    result = await asyncio.wait_for(parent.result(), 60)
    assert result.status is RunStatus.COMPLETED
    assert writes == ["after the hold"]
    (resumed,) = _of(recorder, child_info.run_id, "steering.applied", SteeringKind.RESUME)
    assert resumed.actor == SteeringActor.parent_agent(parent.run_id, "parent")
    assert resumed.affected.get("resumed") is True
    recorder.assert_every_command_terminal()


async def test_a_parents_resume_leaves_a_child_its_own_operator_paused_paused(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    hold = Gate("hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    child_gate = Gate("child")
    child = await rt.start(Agent("child", model=child_gate.model()), "x", parent=parent)
    await asyncio.wait_for(child_gate.entered.wait(), 60)

    await child.pause("mine", actor=CHILD_OPERATOR)
    await parent.pause("ours", actor=OPERATOR)
    await _event(
        waiter,
        "steering.accepted",
        child.run_id,
        kind=SteeringKind.PAUSE,
        actor=SteeringActor.parent_agent(parent.run_id, "parent"),
    )
    child_gate.open()
    await _event(waiter, "run.paused", child.run_id)
    await parent.resume(actor=OPERATOR)
    await _event(
        waiter,
        "steering.applied",
        child.run_id,
        kind=SteeringKind.RESUME,
        actor=SteeringActor.parent_agent(parent.run_id, "parent"),
    )
    assert child.info.status is RunStatus.PAUSED  # its own operator's pause still holds it
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    assert child.info.status is RunStatus.PAUSED
    await child.resume(actor=CHILD_OPERATOR)
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_pause_reaches_running_grandchildren_once_each_from_the_run_paused(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    hold = Gate("hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    child_gate, grand_gate = Gate("child"), Gate("grand")
    child = await rt.start(Agent("child", model=child_gate.model()), "x", parent=parent)
    grand = await rt.start(Agent("grand", model=grand_gate.model()), "x", parent=child)
    await asyncio.wait_for(asyncio.gather(child_gate.entered.wait(), grand_gate.entered.wait()), 60)
    await parent.pause(actor=OPERATOR)
    child_gate.open()
    grand_gate.open()
    for run in (child, grand):
        await _event(waiter, "run.paused", run.run_id)
    for run, relation in ((child, "parent"), (grand, "ancestor")):
        (applied,) = _of(recorder, run.run_id, "steering.applied", SteeringKind.PAUSE)
        assert applied.actor == SteeringActor.parent_agent(parent.run_id, "parent")
        assert applied.payload_summary["reason"].startswith(f"{relation} run {parent.run_id} ")
    await parent.resume(actor=OPERATOR)
    hold.open()
    for run in (grand, child, parent):
        assert (await asyncio.wait_for(run.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_pause_resumed_before_the_child_took_it_is_withdrawn(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """The child is inside a tool when its parent is paused and resumed: the pause passed
    down never reaches a boundary of it; it is superseded, with a reason, and nothing else is
    sent (no resume for a pause never applied)."""
    hold, child_hold = Gate("hold"), Gate("child-hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    child = await rt.start(
        Agent("child", ScriptedModel([tool_call("child-hold"), "c"]), tools=[child_hold.tool()]),
        "x",
        parent=parent,
    )
    await asyncio.wait_for(child_hold.entered.wait(), 60)
    await parent.pause(actor=OPERATOR)
    await _event(waiter, "steering.accepted", child.run_id, kind=SteeringKind.PAUSE)
    resume = await parent.resume(actor=OPERATOR)
    (withdrawn,) = _of(recorder, child.run_id, "steering.superseded", SteeringKind.PAUSE)
    assert f"parent run {parent.run_id} was resumed" in (withdrawn.reason or "")
    assert withdrawn.superseded_by == resume.correlation_id
    child_hold.open()
    hold.open()
    for run in (child, parent):
        assert (await asyncio.wait_for(run.result(), 60)).status is RunStatus.COMPLETED
    assert _of(recorder, child.run_id, "steering.requested", SteeringKind.RESUME) == []
    assert not [e for e in recorder.events if e.type == "run.paused" and e.run_id == child.run_id]
    recorder.assert_every_command_terminal()


async def test_a_child_started_under_a_paused_parent_starts_paused(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    hold = Gate("hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    await parent.pause(actor=OPERATOR)
    asked: list[int] = []

    async def child_fn(request: Any) -> str:
        asked.append(1)
        return "c"

    child = await rt.start(Agent("child", model=FunctionModel(child_fn)), "x", parent=parent)
    await _event(waiter, "run.paused", child.run_id)
    assert asked == []  # paused at its first boundary, before any model call
    await parent.resume(actor=OPERATOR)
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_child_reopened_for_another_turn_under_a_paused_parent_is_held(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """A completed child that an ``END_OF_TURN`` message reopens for another turn while its
    parent is held by its operator's pause is held too before any model call, as a child
    started (or started again under its id) below the paused parent is: it took its turn
    at once, working below a run its operator had paused."""
    hold = Gate("hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    asked: list[int] = []

    async def child_fn(request: Any) -> str:
        asked.append(1)
        return f"c{len(asked)}"

    child = await rt.start(Agent("child", model=FunctionModel(child_fn)), "x", parent=parent)
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    await parent.pause(actor=OPERATOR)
    hold.open()
    await _event(waiter, "run.paused", parent.run_id)
    await child.steer("one more thing", actor=OPERATOR, delivery=SteeringDelivery.END_OF_TURN)
    resumed = await _event(waiter, "run.resumed", child.run_id)  # the turn it was given
    after = await asyncio.wait_for(
        waiter.until(
            lambda e: (
                e.run_id == child.run_id
                and e.type in ("run.paused", "run.completed")
                and e.offset > resumed.offset
            )
        ),
        60,
    )
    assert after.type == "run.paused"
    assert asked == [1]  # held at its new turn's first boundary, before any model call
    assert child.status is RunStatus.PAUSED
    await parent.resume(actor=OPERATOR)  # lets go of the child's hold too
    result = await asyncio.wait_for(child.result(), 60)
    assert (result.status, result.output, asked) == (RunStatus.COMPLETED, "c2", [1, 1])
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def _held_child(rt: Runtime) -> tuple[Any, Any, Gate, Gate]:
    """A parent waiting inside its tool ``hold`` and a child waiting inside ``child-hold``:
    each reaches its next boundary only when the test lets go of its gate."""
    hold, child_hold = Gate("hold"), Gate("child-hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]), "go"
    )
    await asyncio.wait_for(hold.entered.wait(), 60)
    child = await rt.start(
        Agent("child", ScriptedModel([tool_call("child-hold"), "c"]), tools=[child_hold.tool()]),
        "x",
        parent=parent,
    )
    await asyncio.wait_for(child_hold.entered.wait(), 60)
    return parent, child, hold, child_hold


async def test_a_childs_own_resume_said_before_a_pause_passed_down_does_not_end_that_hold(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """A resume said before a pause never ends that pause, whoever sent it: the child's own
    resume, delivered behind a (critical) pause its parent passed down, is superseded by it."""
    parent, child, hold, child_hold = await _held_child(rt)
    early = await child.resume(actor=CHILD_OPERATOR)
    await parent.pause(actor=OPERATOR, priority=SteeringPriority.CRITICAL)
    await _event(waiter, "steering.accepted", child.run_id, kind=SteeringKind.PAUSE)
    child_hold.open()
    superseded = await _event(
        waiter, "steering.superseded", child.run_id, correlation_id=early.correlation_id
    )
    (held,) = _of(recorder, child.run_id, "steering.applied", SteeringKind.PAUSE)
    assert held.affected["from_above"] == parent.run_id
    assert superseded.superseded_by == held.correlation_id
    assert child.info.status is RunStatus.PAUSED
    await parent.resume(actor=OPERATOR)
    hold.open()
    for run in (child, parent):
        assert (await asyncio.wait_for(run.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_childs_own_resume_ends_its_own_earlier_pause_but_not_a_later_hold(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """The child's operator pauses and resumes it; its parent is paused (critical) in
    between; all three land at one boundary, the parent's first. The resume ends the pause
    it was said after, not the hold said after it (it is not lost either): the child stays
    paused by the hold only, and goes on when the parent's resume lets go of it."""
    parent, child, hold, child_hold = await _held_child(rt)
    await child.pause("mine", actor=CHILD_OPERATOR)
    mine = await child.resume(actor=CHILD_OPERATOR)
    await parent.pause(actor=OPERATOR, priority=SteeringPriority.CRITICAL)
    await _event(waiter, "steering.accepted", child.run_id, kind=SteeringKind.PAUSE)
    child_hold.open()
    resumed = await _event(
        waiter, "steering.applied", child.run_id, correlation_id=mine.correlation_id
    )
    assert resumed.affected.get("resumed") is False
    assert resumed.affected.get("paused_by") == "above"
    assert child.info.status is RunStatus.PAUSED
    await parent.resume(actor=OPERATOR)
    let_go = await _event(
        waiter,
        "steering.applied",
        child.run_id,
        kind=SteeringKind.RESUME,
        actor=SteeringActor.parent_agent(parent.run_id, "parent"),
    )
    assert let_go.affected.get("resumed") is True
    hold.open()
    for run in (child, parent):
        assert (await asyncio.wait_for(run.result(), 60)).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()
