"""A narrowing of a run reaches the runs already running below it (a child gets no more than
its parent was left with, whenever it was started)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tinyagents import Agent, RunStatus, Runtime, SubAgent, SubAgentTool, tool
from tinyagents.errors import ConfigurationError, ModelsWithheld, ToolsWithheld
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.testkit import EventWaiter, FunctionModel, Gate, ScriptedModel, tool_call

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def _delete_db(ran: list[str]) -> Any:
    @tool
    async def delete_db() -> str:
        """Delete the database."""
        ran.append("delete_db")
        return "deleted"

    return delete_db


@tool
async def lookup() -> str:
    """Look something up."""
    return "found"


def _held_child(name: str, gate: Gate, ran: list[str], offered: list[list[str]]) -> Agent:
    """An agent with ``delete_db`` and ``lookup`` whose first model call waits at ``gate`` and
    then calls ``delete_db``; it answers on its second call. Records the tools offered."""
    calls = 0

    async def child_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        offered.append(sorted(t.name for t in request.tools))
        if calls == 1:
            await gate.wait()
            return tool_call("delete_db")
        return "c"

    return Agent(name, model=FunctionModel(child_fn), tools=[_delete_db(ran), lookup])


async def _narrow(rt: Runtime, run_id: str, **payload: list[str]) -> SteeringCommand:
    kind = SteeringKind.CONSTRAIN_TOOLS if "tools" in payload else SteeringKind.CONSTRAIN_MODEL
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(run_id), actor=OPERATOR, kind=kind, payload=payload
    )
    receipt = await rt.submit(cmd)
    assert receipt.status == "accepted", receipt.reason
    return cmd


async def _applied(waiter: EventWaiter, run_id: str, kind: str) -> Any:
    return await asyncio.wait_for(
        waiter.event("steering.applied", run_id=run_id, kind=SteeringKind(kind)), 60
    )


async def test_a_running_sub_agent_tool_child_loses_the_tool_its_parent_was_narrowed_away_from(
    rt: Runtime, waiter: EventWaiter
):
    """The parent waits inside its ``SubAgentTool`` call (no boundary until the child ends);
    ``constrain_tools`` takes ``delete_db`` from it. The running child is narrowed at its own
    next boundary: its call of ``delete_db`` is refused, its next request offers only
    ``lookup``, and its steering events say whose narrowing it was."""
    ran: list[str] = []
    offered: list[list[str]] = []
    child_gate = Gate("child")
    child = _held_child("child", child_gate, ran, offered)
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("child", input="clean up"), "p"]),
        tools=[_delete_db(ran), SubAgentTool(SubAgent(child))],
    )
    handle = await rt.start(parent, "go")
    await asyncio.wait_for(child_gate.entered.wait(), 60)
    [child_info] = rt.runs.tree.children(handle.run_id)
    cmd = await _narrow(rt, handle.run_id, tools=["child"])
    accepted = await asyncio.wait_for(
        waiter.event("steering.accepted", run_id=child_info.run_id), 60
    )
    child_gate.open()

    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED
    assert ran == []
    assert offered == [["delete_db", "lookup"], ["lookup"]]
    assert child_info.tools == {"lookup"}
    assert child_info.withheld_tools == {"delete_db"}
    applied = await _applied(waiter, child_info.run_id, "constrain_tools")
    assert applied.correlation_id == accepted.correlation_id
    assert applied.actor == SteeringActor.parent_agent(handle.run_id, "parent")
    assert applied.payload_summary["reason"] == (
        f'parent run {handle.run_id} was narrowed by human "alice" (command '
        f"{cmd.correlation_id}): ['delete_db'] taken away"
    )
    # the parent applies its own at its own boundary, after the child's result
    assert handle.info.tools == {"child"}


async def test_a_narrowing_reaches_running_grandchildren_and_spares_a_tool_never_taken(
    rt: Runtime, waiter: EventWaiter
):
    """A child and a grandchild started by hand and running: a narrowing of the root reaches
    both at their next boundary; a child without the tool taken gets no command at all."""
    ran: list[str] = []
    hold = Gate("hold")
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("hold"), "p"]),
        tools=[hold.tool(), _delete_db(ran)],
    )
    handle = await rt.start(parent, "go")
    await asyncio.wait_for(hold.entered.wait(), 60)
    child_gate, grand_gate, plain_gate = Gate("child"), Gate("grand"), Gate("plain")
    child_offered: list[list[str]] = []
    grand_offered: list[list[str]] = []
    child = await rt.start(_held_child("child", child_gate, ran, child_offered), "x", parent=handle)
    grandchild = await rt.start(
        _held_child("grand", grand_gate, ran, grand_offered), "x", parent=child
    )
    plain = await rt.start(
        Agent("plain", model=plain_gate.model(), tools=[lookup]), "x", parent=handle
    )
    await asyncio.wait_for(asyncio.gather(child_gate.entered.wait(), grand_gate.entered.wait()), 60)
    await _narrow(rt, handle.run_id, tools=["hold"])
    for run in (child, grandchild):
        await asyncio.wait_for(waiter.event("steering.accepted", run_id=run.run_id), 60)
    child_gate.open()
    grand_gate.open()
    plain_gate.open()
    for run in (child, grandchild, plain):
        assert (await asyncio.wait_for(run.result(), 60)).status is RunStatus.COMPLETED
    assert ran == []
    assert child_offered == grand_offered == [["delete_db", "lookup"], ["lookup"]]
    assert grandchild.info.withheld_tools == {"delete_db"}
    # one narrowing each, from the run narrowed: the child does not pass on what it was sent
    for run, relation in ((child, "parent"), (grandchild, "ancestor")):
        [applied] = [e for e in rt.steering_history(run.run_id) if e.type == "steering.applied"]
        assert applied.actor == SteeringActor.parent_agent(handle.run_id, "parent")
        assert applied.payload_summary["reason"].startswith(f"{relation} run {handle.run_id} ")
    assert rt.steering_history(plain.run_id) == []
    assert plain.info.tools == {"lookup"}
    hold.open()
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED


async def test_a_running_child_is_moved_off_a_model_its_parent_was_narrowed_away_from(
    rt: Runtime, waiter: EventWaiter
):
    """``constrain_model`` takes ``big`` from the parent: its running child, on ``big`` first,
    makes its next request on ``small``."""
    seen: list[str | None] = []
    child_gate = Gate("child")

    async def child_fn(request: Any) -> Any:
        seen.append(request.model)
        if len(seen) == 1:
            await child_gate.wait()
            return tool_call("lookup")
        return "c"

    hold = Gate("hold")
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("hold"), "p"]),
        models=["big", "small"],
        tools=[hold.tool()],
    )
    handle = await rt.start(parent, "go")
    await asyncio.wait_for(hold.entered.wait(), 60)
    child = await rt.start(
        Agent("child", model=FunctionModel(child_fn), models=["big", "small"], tools=[lookup]),
        "x",
        parent=handle,
    )
    await asyncio.wait_for(child_gate.entered.wait(), 60)
    await _narrow(rt, handle.run_id, models=["small"])
    await asyncio.wait_for(waiter.event("steering.accepted", run_id=child.run_id), 60)
    child_gate.open()
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    assert seen == ["big", "small"]
    assert child.info.withheld_models == {"big"}
    applied = await _applied(waiter, child.run_id, "constrain_model")
    assert applied.actor == SteeringActor.parent_agent(handle.run_id, "parent")
    hold.open()
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED


async def test_a_child_started_after_a_narrowing_was_queued_is_narrowed_when_it_lands(
    rt: Runtime, waiter: EventWaiter
):
    """The narrowing is queued for the parent while its model call is under way; a child
    started in between (not yet running when it was queued, and started before the parent's
    boundary withheld anything) is narrowed when the parent applies it."""
    ran: list[str] = []
    gate = Gate("parent")
    calls = 0

    async def parent_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await gate.wait()
            return "p"
        return "p"

    parent = Agent("parent", model=FunctionModel(parent_fn), tools=[_delete_db(ran), lookup])
    handle = await rt.start(parent, "go")
    await asyncio.wait_for(gate.entered.wait(), 60)
    await _narrow(rt, handle.run_id, tools=["lookup"])
    child_gate = Gate("child")
    offered: list[list[str]] = []
    child = await rt.start(_held_child("child", child_gate, ran, offered), "x", parent=handle)
    assert child.info.withheld_tools == frozenset()  # the parent has not applied it yet
    await asyncio.wait_for(child_gate.entered.wait(), 60)
    gate.open()
    await _applied(waiter, handle.run_id, "constrain_tools")
    await asyncio.wait_for(waiter.event("steering.accepted", run_id=child.run_id), 60)
    child_gate.open()
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    assert ran == []
    assert offered == [["delete_db", "lookup"], ["lookup"]]
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED


# --------------------------------------------------------------------------- asking for one


async def test_naming_a_withheld_tool_at_the_start_of_a_child_is_refused(rt: Runtime):
    """``rt.start(..., tools=[...])`` naming a tool taken away from the parent was dropped in
    silence; it is refused (``ToolsWithheld``, a ``ConfigurationError``) and nothing starts."""
    ran: list[str] = []
    hold = Gate("hold")
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("lookup"), tool_call("hold"), "p"]),
        tools=[hold.tool(), lookup, _delete_db(ran)],
    )
    handle = await rt.start(parent, "go")
    await _narrow(rt, handle.run_id, tools=["hold", "lookup"])
    await asyncio.wait_for(hold.entered.wait(), 60)
    before = len(rt.runs.list())
    child = Agent("child", model=ScriptedModel(["c"]), tools=[_delete_db(ran), lookup])
    with pytest.raises(ToolsWithheld, match="'delete_db'") as refused:
        await rt.start(child, "x", parent=handle, tools=["delete_db", "lookup"])
    assert isinstance(refused.value, ConfigurationError)
    assert len(rt.runs.list()) == before
    fine = await rt.start(child, "x", parent=handle, tools=["lookup"])
    assert fine.info.tools == {"lookup"}
    assert (await asyncio.wait_for(fine.result(), 60)).status is RunStatus.COMPLETED
    hold.open()
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED


async def test_a_running_child_whose_every_model_was_taken_keeps_its_own(
    rt: Runtime, waiter: EventWaiter
):
    """A ``constrain_model`` names at least one model: a running child whose only model its
    parent was narrowed away from is sent nothing and keeps it (documented), while a child
    started afterwards on that model is refused (``ModelsWithheld``)."""
    hold, second = Gate("hold"), Gate("second")
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("hold"), tool_call("second"), "p"]),
        models=["big", "small"],
        tools=[hold.tool(), second.tool()],
    )
    handle = await rt.start(parent, "go")
    await asyncio.wait_for(hold.entered.wait(), 60)
    child_gate = Gate("child")
    child = await rt.start(
        Agent("child", model=child_gate.model(), models=["big"]), "x", parent=handle
    )
    await asyncio.wait_for(child_gate.entered.wait(), 60)
    await _narrow(rt, handle.run_id, models=["small"])
    hold.open()
    await _applied(waiter, handle.run_id, "constrain_model")
    await asyncio.wait_for(second.entered.wait(), 60)
    assert rt.steering_history(child.run_id) == []
    assert child.info.models == ("big",)
    assert child.info.withheld_models == {"big"}  # from the children it starts
    with pytest.raises(ModelsWithheld):
        await rt.start(Agent("late", model=ScriptedModel(["c"], name="big")), "x", parent=handle)
    child_gate.open()
    second.open()
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED


# --------------------------------------------------------------------------- withdrawn


async def test_a_narrowing_the_parent_never_applied_is_withdrawn_from_its_running_child(
    rt: Runtime, waiter: EventWaiter
):
    """A ``constrain_tools`` for the parent's ``before_model_call`` is passed down when it is
    queued; the parent answers and ends without another model call, so its own fails ("target
    finished before delivery"). The child, inside a tool meanwhile, had not taken its
    narrowing yet: it is withdrawn (superseded, saying why) and the child keeps its tools."""
    ran: list[str] = []
    parent_gate, child_hold = Gate("parent"), Gate("child-hold")

    async def parent_fn(request: Any) -> Any:
        await parent_gate.wait()
        return "p"

    handle = await rt.start(Agent("parent", model=FunctionModel(parent_fn), tools=[lookup]), "go")
    await asyncio.wait_for(parent_gate.entered.wait(), 60)
    offered: list[list[str]] = []

    async def child_fn(request: Any) -> Any:
        offered.append(sorted(t.name for t in request.tools))
        return tool_call("child-hold") if len(offered) == 1 else "c"

    child = await rt.start(
        Agent("child", model=FunctionModel(child_fn), tools=[child_hold.tool(), lookup]),
        "x",
        parent=handle,
    )
    await asyncio.wait_for(child_hold.entered.wait(), 60)
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=OPERATOR,
        kind=SteeringKind.CONSTRAIN_TOOLS,
        payload={"tools": []},
        delivery=SteeringDelivery.BEFORE_MODEL_CALL,
    )
    assert (await rt.submit(cmd)).accepted
    passed = await asyncio.wait_for(waiter.event("steering.accepted", run_id=child.run_id), 60)
    parent_gate.open()
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED
    failed = await asyncio.wait_for(
        waiter.event("steering.failed", run_id=handle.run_id, correlation_id=cmd.correlation_id),
        60,
    )
    withdrawn = await asyncio.wait_for(
        waiter.event(
            "steering.superseded", run_id=child.run_id, correlation_id=passed.correlation_id
        ),
        60,
    )
    assert withdrawn.offset > failed.offset
    assert f"run {handle.run_id}" in withdrawn.reason and cmd.correlation_id in withdrawn.reason
    assert "not applied" in withdrawn.reason
    child_hold.open()
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    assert offered == [["child-hold", "lookup"], ["child-hold", "lookup"]]
    assert child.info.withheld_tools == frozenset()
    assert ran == []


async def test_a_narrowing_the_child_applied_is_kept_when_the_parents_fails(
    rt: Runtime, waiter: EventWaiter
):
    """Narrow-only: a ``constrain_model`` the parent fails at its boundary (a narrowing
    applied before it left it none of its models) does not widen the child that already
    applied the narrowing passed down for it."""
    hold = Gate("hold")
    parent = Agent(
        "parent",
        model=ScriptedModel([tool_call("hold"), "p"]),
        models=["big", "small", "tiny"],
        tools=[hold.tool()],
    )
    handle = await rt.start(parent, "go")
    await asyncio.wait_for(hold.entered.wait(), 60)
    child_gate = Gate("child")
    seen: list[str | None] = []

    async def child_fn(request: Any) -> Any:
        seen.append(request.model)
        if len(seen) == 1:
            await child_gate.wait()
            return tool_call("lookup")
        return "c"

    child = await rt.start(
        Agent("child", model=FunctionModel(child_fn), models=["big", "small"], tools=[lookup]),
        "x",
        parent=handle,
    )
    await asyncio.wait_for(child_gate.entered.wait(), 60)
    first = await _narrow(rt, handle.run_id, models=["small"])
    await asyncio.wait_for(waiter.event("steering.accepted", run_id=child.run_id), 60)
    child_gate.open()
    await _applied(waiter, child.run_id, "constrain_model")
    await _narrow(rt, handle.run_id, models=["tiny"])  # accepted: "tiny" is still allowed
    hold.open()
    # at the parent's boundary the two meet: [small] first, then [tiny] leaves no model
    await asyncio.wait_for(waiter.event("steering.failed", run_id=handle.run_id), 60)
    assert (await asyncio.wait_for(handle.result(), 60)).status is RunStatus.COMPLETED
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    assert child.info.models == ("small",)  # kept
    assert first.correlation_id
