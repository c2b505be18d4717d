"""A plain (next-boundary) cancel of a run that waits on its children reaches them at once.

A parent inside a ``SubAgentTool`` call (or an orchestrator inside ``wait_subagents``) reaches
its next boundary only when the tool returns, i.e. after its children have done all their
work. The cancel is passed down when it is queued: each descendant stops at *its own* next
safe boundary (its in-flight model request and tool finish; nothing after them runs), ends
``cancelled`` with its terminal event, and the parent ends after them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tinyagents import (
    Agent,
    Decision,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    orchestrator_tools,
    tool,
)
from tinyagents.errors import RunCancelled
from tinyagents.events import SteeringEvent
from tinyagents.harness import Middleware, ModelRequest, ModelResponse, ToolCall
from tinyagents.protocol import SteeringActor, SteeringDelivery, SteeringKind
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    reply,
    tool_call,
)

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])
ENDINGS = {f"run.{s.value}" for s in RunStatus if s.finished}


class SideEffects:
    """A tool whose every call is a side effect the test can count."""

    def __init__(self) -> None:
        self.calls: list[str] = []

        @tool
        def write(note: str) -> str:
            """Write a note somewhere that matters."""
            self.calls.append(note)
            return "written"

        self.tool = write


def endings(recorder: EventRecorder) -> list[tuple[str, str | None]]:
    return [(e.type, e.run_id) for e in recorder.events if e.type in ENDINGS]


def cancels_to(
    recorder: EventRecorder, run_id: str, type_: str = "steering.applied"
) -> list[SteeringEvent]:
    return [
        e
        for e in recorder.steering()
        if e.type == type_ and e.run_id == run_id and e.kind is SteeringKind.CANCEL
    ]


async def test_a_plain_cancel_of_a_parent_inside_a_subagent_tool_stops_the_child(
    rt: Runtime, recorder: EventRecorder
):
    gate, effects = Gate(), SideEffects()
    child_model = ScriptedModel(
        [tool_call("hold"), tool_call("write", note="after the hold"), reply("child done")]
    )
    child = Agent("child", child_model, tools=[gate.tool(), effects.tool])
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(SubAgent(child))]), "go"
    )
    await gate.entered.wait()  # the child is in its tool, the parent in the SubAgentTool call
    (child_info,) = rt.runs.tree.children(parent.run_id)

    await parent.cancel("enough", actor=OPERATOR)  # plain: next boundary
    gate.open()  # the child's running tool finishes (tools are never interrupted) …
    result = await parent.result()

    # … and then the child stops at its next boundary: no more model calls, no side effect.
    assert result.status is RunStatus.CANCELLED
    assert child_info.status is RunStatus.CANCELLED
    assert len(child_model.requests) == 1 and effects.calls == []
    assert child_info.usage.tool_calls == 1
    assert len(parent_model.requests) == 1  # the parent did not read the tool result either
    # Each ends with its own terminal event, the child first.
    assert endings(recorder) == [
        ("run.cancelled", child_info.run_id),
        ("run.cancelled", parent.run_id),
    ]
    (delivered,) = cancels_to(recorder, child_info.run_id, "steering.delivered")
    assert delivered.boundary == "after_tool_result"  # its own next boundary
    child_result = await rt.runs.get(child_info.run_id).result()
    assert child_result.error == f"parent run {parent.run_id} was cancelled: enough"
    recorder.assert_every_command_terminal()


async def test_a_plain_cancel_lets_a_childs_model_request_finish_then_stops_it(
    rt: Runtime, recorder: EventRecorder
):
    """Next-boundary, not immediate: the child's in-flight request is answered, and the tool
    call that answer asks for is never made."""
    gate, effects = Gate("child-model"), SideEffects()

    async def child_fn(request: ModelRequest) -> ModelResponse:
        if len(child_model.requests) > 1:
            return reply("child done")
        await gate.wait()
        return tool_call("write", note="after the answer")

    child_model = FunctionModel(child_fn)
    child = Agent("child", child_model, tools=[effects.tool])
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(SubAgent(child))]), "go"
    )
    await gate.entered.wait()
    (child_info,) = rt.runs.tree.children(parent.run_id)

    await parent.cancel("enough", actor=OPERATOR)
    gate.open()

    assert (await parent.result()).status is RunStatus.CANCELLED
    assert child_info.status is RunStatus.CANCELLED
    assert gate.finished.is_set() and not gate.cancelled
    assert effects.calls == [] and child_info.usage.tool_calls == 0
    (delivered,) = cancels_to(recorder, child_info.run_id, "steering.delivered")
    assert delivered.boundary == "after_model_response"
    assert endings(recorder) == [
        ("run.cancelled", child_info.run_id),
        ("run.cancelled", parent.run_id),
    ]
    recorder.assert_every_command_terminal()


async def test_a_plain_cancel_reaches_every_level_of_a_subagent_chain(
    rt: Runtime, recorder: EventRecorder
):
    gate, effects = Gate(), SideEffects()
    leaf_model = ScriptedModel([tool_call("hold"), tool_call("write", note="leaf"), reply("x")])
    leaf = Agent("leaf", leaf_model, tools=[gate.tool(), effects.tool])
    mid_model = ScriptedModel(
        [tool_call("leaf", input="go"), tool_call("write", note="mid"), reply("y")]
    )
    mid = Agent("mid", mid_model, tools=[SubAgentTool(SubAgent(leaf)), effects.tool])
    root_model = ScriptedModel([tool_call("mid", input="go"), reply("z")])
    root = await rt.start(Agent("root", root_model, tools=[SubAgentTool(SubAgent(mid))]), "go")
    await gate.entered.wait()
    (mid_info,) = rt.runs.tree.children(root.run_id)
    (leaf_info,) = rt.runs.tree.children(mid_info.run_id)

    await root.cancel("stop the tree", actor=OPERATOR)
    gate.open()

    assert (await root.result()).status is RunStatus.CANCELLED
    assert [len(m.requests) for m in (root_model, mid_model, leaf_model)] == [1, 1, 1]
    assert effects.calls == []
    # Deepest first: each run ends only after the runs below it have.
    assert endings(recorder) == [
        ("run.cancelled", leaf_info.run_id),
        ("run.cancelled", mid_info.run_id),
        ("run.cancelled", root.run_id),
    ]
    leaf_result = await rt.runs.get(leaf_info.run_id).result()
    assert leaf_result.error == f"ancestor run {root.run_id} was cancelled: stop the tree"
    # One cancel per run: mid did not send the leaf a second one.
    assert len(cancels_to(recorder, leaf_info.run_id)) == 1
    recorder.assert_every_command_terminal()


async def test_a_plain_cancel_of_an_orchestrator_waiting_on_spawned_children(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    gates = {"a": Gate("hold-a"), "b": Gate("hold-b")}
    effects = SideEffects()
    children = [
        SubAgent(
            Agent(
                name,
                ScriptedModel([tool_call(gate.name), tool_call("write", note=name), reply(name)]),
                tools=[gate.tool(), effects.tool],
            )
        )
        for name, gate in gates.items()
    ]
    spawned: list[str] = []

    async def orchestrate(request: ModelRequest) -> ModelResponse | str:
        turn = len(model.requests)
        if turn == 1:
            return ModelResponse(
                tool_calls=[
                    ToolCall(id="s1", name="spawn_subagent", args={"name": "a", "input": "1"}),
                    ToolCall(id="s2", name="spawn_subagent", args={"name": "b", "input": "2"}),
                ]
            )
        if turn == 2:
            outputs = [m.content for m in request.messages if m.role == "tool"]
            spawned.extend(json.loads(o)["run_id"] for o in outputs)
            return tool_call("wait_subagents", run_ids=spawned)
        return reply("orchestrator done")

    model = FunctionModel(orchestrate)
    agent = Agent("orchestrator", model, tools=orchestrator_tools(children))
    handle = await rt.start(agent, "go")
    await waiter.event("tool.call", handle.run_id, name="wait_subagents")
    await gates["a"].entered.wait()
    await gates["b"].entered.wait()

    await handle.cancel("enough", actor=OPERATOR)
    for gate in gates.values():
        gate.open()

    assert (await handle.result()).status is RunStatus.CANCELLED
    assert len(model.requests) == 2 and effects.calls == []
    for run_id in spawned:
        assert rt.runs.get(run_id).status is RunStatus.CANCELLED
    assert [e for e in endings(recorder)][-1] == ("run.cancelled", handle.run_id)
    assert {run_id for _, run_id in endings(recorder)[:2]} == set(spawned)
    recorder.assert_every_command_terminal()


async def test_an_immediate_cancel_still_interrupts_a_childs_model_request(
    rt: Runtime, recorder: EventRecorder
):
    gate = Gate("child-model")
    child = Agent("child", gate.model())
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(SubAgent(child))]), "go"
    )
    await gate.entered.wait()
    (child_info,) = rt.runs.tree.children(parent.run_id)

    await parent.cancel("now", immediate=True, actor=OPERATOR)

    assert (await parent.result()).status is RunStatus.CANCELLED
    assert child_info.status is RunStatus.CANCELLED and gate.cancelled
    (delivered,) = cancels_to(recorder, child_info.run_id, "steering.delivered")
    assert delivered.boundary == "after_model_response"  # where the interrupted request ends
    recorder.assert_every_command_terminal()


async def test_a_cancel_for_after_the_tool_result_is_passed_down_too(
    rt: Runtime, recorder: EventRecorder
):
    """Any cancel queued while the run waits on its children is passed down (the run is
    going to end; its children would only run to completion for nothing)."""
    gate, effects = Gate(), SideEffects()
    child_model = ScriptedModel([tool_call("hold"), tool_call("write", note="x"), reply("x")])
    child = Agent("child", child_model, tools=[gate.tool(), effects.tool])
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(SubAgent(child))]), "go"
    )
    await gate.entered.wait()

    await parent.cancel("enough", actor=OPERATOR, delivery=SteeringDelivery.AFTER_TOOL_RESULT)
    gate.open()

    assert (await parent.result()).status is RunStatus.CANCELLED
    assert effects.calls == [] and len(child_model.requests) == 1


async def test_a_child_started_after_the_cancel_arrived_is_cancelled_before_it_works(
    rt: Runtime, recorder: EventRecorder
):
    """A tool that starts another child after its run's cancel was passed down: that child
    is frozen and cancelled from its start, so it makes no model call either."""
    gate, effects = Gate(), SideEffects()
    first = SubAgent(
        Agent("first", ScriptedModel([tool_call("hold"), reply("x")]), tools=[gate.tool()])
    )
    late_model = ScriptedModel([tool_call("write", note="late"), reply("late")])
    late = SubAgent(Agent("late", late_model, tools=[effects.tool]))

    @tool
    async def delegate(ctx: RunContext) -> str:
        """Ask one child, then another."""
        try:
            await first.invoke_in_parent("go", ctx)
        except RunCancelled:
            pass
        try:
            return str(await late.invoke_in_parent("go", ctx))
        except RunCancelled as exc:
            return f"late child cancelled: {exc.reason}"

    parent_model = ScriptedModel([tool_call("delegate"), reply("done")])
    parent = await rt.start(Agent("parent", parent_model, tools=[delegate]), "go")
    await gate.entered.wait()

    await parent.cancel("enough", actor=OPERATOR)
    gate.open()

    assert (await parent.result()).status is RunStatus.CANCELLED
    late_info = rt.runs.tree.children(parent.run_id)[1]
    assert late_info.agent_id == "late" and late_info.status is RunStatus.CANCELLED
    assert late_model.requests == [] and effects.calls == []
    assert endings(recorder)[-1] == ("run.cancelled", parent.run_id)
    recorder.assert_every_command_terminal()


class RefusesCancel(Middleware):
    """A run's policy that refuses every cancel, after ``ticks`` turns of the event loop (a
    policy that asks a service before it decides)."""

    name = "refuses-cancel"

    def __init__(self, ticks: int = 0) -> None:
        self.ticks = ticks

    async def steering(self, cmd: Any, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is SteeringKind.CANCEL:
            for _ in range(self.ticks):
                await asyncio.sleep(0)
            return Decision.reject(cmd, "this run is not cancelled", "middleware:refuses-cancel")
        return await call_next(cmd)


def spawns_then_answers(gate: Gate) -> FunctionModel:
    """A parent's model: starts ``child`` in the background, then answers (no tool call)
    once ``gate`` opens."""
    calls = 0

    async def plan(request: ModelRequest) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return tool_call("spawn_subagent", name="child", input="go")
        await gate.wait()
        return reply("parent done")

    return FunctionModel(plan)


async def test_a_cancel_for_a_boundary_that_never_comes_changes_nothing_below(
    rt: Runtime, recorder: EventRecorder
):
    """A cancel for after the next tool result, queued while the parent is in a model call
    that answers without a tool call: it never reaches its boundary and fails, so the child
    running in the background must not have been cancelled by it (it was)."""
    child_gate, parent_gate = Gate("child"), Gate("parent")
    child = SubAgent(Agent("child", child_gate.model("child answer")), description="works")
    parent = await rt.start(
        Agent("parent", spawns_then_answers(parent_gate), tools=orchestrator_tools([child])),
        "go",
    )
    await child_gate.entered.wait()
    await parent_gate.entered.wait()
    (kid,) = rt.runs.tree.children(parent.run_id)
    receipt = await parent.cancel(
        "stop", actor=OPERATOR, delivery=SteeringDelivery.AFTER_TOOL_RESULT
    )
    parent_gate.open()
    assert (await parent.result()).status is RunStatus.COMPLETED
    recorder.assert_lifecycle(receipt.correlation_id, ["requested", "accepted", "failed"])
    child_gate.open()
    child_handle = rt.runs.get(kid.run_id)
    if child_handle is not None:
        await child_handle.result()
    assert kid.status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_child_policy_that_raises_on_its_cancel_does_not_hang_the_parent(
    rt: Runtime, recorder: EventRecorder
):
    """The child's steering middleware raises on the cancel passed down to it: that cancel
    is rejected (the child carries on, as with any refused cancel) and the parent ends
    cancelled. The error escaped the parent's cancel, which never ended."""

    class Buggy(Middleware):
        name = "buggy"

        async def steering(self, cmd: Any, ctx: Any, call_next: Any) -> Any:
            raise RuntimeError("policy bug")

    child_gate, parent_gate = Gate("child"), Gate("parent")
    child = SubAgent(
        Agent("child", child_gate.model("child answer"), middleware=[Buggy()]), description="c"
    )
    parent = await rt.start(
        Agent("parent", spawns_then_answers(parent_gate), tools=orchestrator_tools([child])),
        "go",
    )
    await child_gate.entered.wait()
    await parent_gate.entered.wait()
    (kid,) = rt.runs.tree.children(parent.run_id)
    await parent.cancel("stop", actor=OPERATOR)
    parent_gate.open()
    child_gate.open()
    result = await parent.result()
    assert result.status is RunStatus.CANCELLED
    kid_handle = rt.runs.get(kid.run_id)
    assert kid_handle is not None  # its cancel was refused: it finishes its work
    assert (await kid_handle.result()).status is RunStatus.COMPLETED
    refused = [
        e
        for e in recorder.events
        if isinstance(e, SteeringEvent) and e.type == "steering.rejected" and e.run_id == kid.run_id
    ]
    # refused when passed down, and again when the parent applied its own cancel
    assert refused and all("policy bug" in (e.reason or "") for e in refused)
    recorder.assert_every_command_terminal()


async def test_a_child_whose_subagent_tool_call_timed_out_is_cancelled(
    rt: Runtime, recorder: EventRecorder
):
    """The parent's tool call gives up on the child (``timeout_s``) and the parent goes on
    and ends: the child was left running (and spending) under a finished parent."""
    gate = Gate("child")
    child = SubAgent(Agent("child", gate.model("child answer")), description="slow")
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(child, timeout_s=0.05)]), "go"
    )
    result = await parent.result()
    assert result.status is RunStatus.COMPLETED
    (kid,) = rt.runs.tree.children(parent.run_id)
    waiter = EventWaiter()
    rt.bus.add_sink(waiter)
    if not kid.status.finished:
        await waiter.event("run.cancelled", kid.run_id)
    assert kid.status is RunStatus.CANCELLED
    cancels = [
        e
        for e in recorder.events
        if isinstance(e, SteeringEvent) and e.type == "steering.applied" and e.run_id == kid.run_id
    ]
    assert len(cancels) == 1 and cancels[0].kind is SteeringKind.CANCEL
    gate.open()
    recorder.assert_every_command_terminal()


async def test_a_run_that_fails_or_hits_a_limit_cancels_its_background_children(
    rt: Runtime, recorder: EventRecorder
):
    """A child spawned in the background outlived its parent's limit_exceeded ending."""
    gate = Gate("child")
    child = SubAgent(Agent("child", gate.model("child answer")), description="slow")
    parent_model = ScriptedModel(
        [tool_call("spawn_subagent", name="child", input="go"), tool_call("wait_subagents")]
    )
    parent = await rt.start(
        Agent(
            "parent",
            parent_model,
            tools=orchestrator_tools([child]),
            limits=RunLimits(max_tool_calls=1),
        ),
        "go",
    )
    await gate.entered.wait()
    assert (await parent.result()).status is RunStatus.LIMIT_EXCEEDED
    (kid,) = rt.runs.tree.children(parent.run_id)
    handle = rt.runs.get(kid.run_id)
    assert handle is not None
    gate.open()
    assert (await handle.result()).status is RunStatus.CANCELLED
    assert "ended limit_exceeded" in ((await handle.result()).error or "")
    recorder.assert_every_command_terminal()


async def test_a_parent_does_not_wait_for_a_child_whose_cancel_was_refused(
    rt: Runtime, recorder: EventRecorder
):
    """A child's policy refuses the cancel its parent passes down: the child is let go and
    carries on, and the parent ends ``cancelled`` without it. The parent applied its cancel
    and then waited for the child to end of itself, however long that took (for ever, for a
    child held by a human's pause): still ``running``, its result never came."""

    child_gate, parent_gate = Gate("child"), Gate("parent")
    child = SubAgent(
        Agent("child", child_gate.model("child answer"), middleware=[RefusesCancel()]),
        description="c",
    )
    parent = await rt.start(
        Agent("parent", spawns_then_answers(parent_gate), tools=orchestrator_tools([child])),
        "go",
    )
    await child_gate.entered.wait()
    await parent_gate.entered.wait()
    (kid,) = rt.runs.tree.children(parent.run_id)
    await parent.cancel("stop", actor=OPERATOR)
    parent_gate.open()
    result = await parent.result()  # the child is still inside its model call
    assert result.status is RunStatus.CANCELLED
    assert not kid.status.finished
    child_gate.open()
    kid_handle = rt.runs.get(kid.run_id)
    assert kid_handle is not None
    assert (await kid_handle.result()).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_run_does_not_wait_for_a_child_an_ancestors_cancel_was_refused_for(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """The root's cancel is passed down to ``mid`` (paused at a boundary, so it applies its
    cancel at once) and to ``leaf``, whose policy takes a while to refuse it: ``mid`` has
    applied its cancel by then, and waited for the leaf it took for cancelled, for ever."""

    leaf_gate, mid_gate = Gate("leaf"), Gate("mid")
    leaf = SubAgent(
        Agent("child", leaf_gate.model("leaf answer"), middleware=[RefusesCancel(ticks=10)]),
        description="c",
    )
    mid = Agent("mid", spawns_then_answers(mid_gate), tools=orchestrator_tools([leaf]))
    root_model = ScriptedModel([tool_call("mid", input="go"), reply("root done")])
    root = await rt.start(Agent("root", root_model, tools=[SubAgentTool(SubAgent(mid))]), "go")
    await leaf_gate.entered.wait()
    (mid_info,) = rt.runs.tree.children(root.run_id)
    (leaf_info,) = rt.runs.tree.children(mid_info.run_id)
    mid_handle, leaf_handle = rt.runs.get(mid_info.run_id), rt.runs.get(leaf_info.run_id)
    assert mid_handle is not None and leaf_handle is not None
    await mid_gate.entered.wait()
    await mid_handle.pause(actor=OPERATOR)
    mid_gate.open()  # mid's answer comes, and mid is held at the boundary after it
    await waiter.event("run.paused", mid_info.run_id)

    await root.cancel("stop", actor=OPERATOR)
    assert (await root.result()).status is RunStatus.CANCELLED
    assert (await mid_handle.result()).status is RunStatus.CANCELLED
    assert not leaf_info.status.finished  # let go: still inside its model call
    leaf_gate.open()
    assert (await leaf_handle.result()).status is RunStatus.COMPLETED
    recorder.assert_every_command_terminal()


async def test_a_plain_cancel_queued_behind_another_cancel_is_passed_down_too(
    rt: Runtime, recorder: EventRecorder
):
    """A cancel for the parent's next model call is queued (not passed down: the parent may
    end before it), then a plain one: that one is passed down at once, as it would be
    alone. Queued second, it was not, and the child did all its work first."""
    gate, effects = Gate(), SideEffects()
    child_model = ScriptedModel(
        [tool_call("hold"), tool_call("write", note="after the hold"), reply("child done")]
    )
    child = Agent("child", child_model, tools=[gate.tool(), effects.tool])
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(SubAgent(child))]), "go"
    )
    await gate.entered.wait()
    (child_info,) = rt.runs.tree.children(parent.run_id)

    await parent.cancel("later", actor=OPERATOR, delivery=SteeringDelivery.BEFORE_MODEL_CALL)
    await parent.cancel("now", actor=OPERATOR)
    gate.open()
    result = await parent.result()

    assert result.status is RunStatus.CANCELLED
    assert child_info.status is RunStatus.CANCELLED
    assert effects.calls == [] and len(child_model.requests) == 1
    recorder.assert_every_command_terminal()


async def test_an_immediate_cancel_after_a_plain_one_interrupts_a_childs_model_request(
    rt: Runtime, recorder: EventRecorder
):
    """A plain cancel lets the child's model request finish; the operator, tired of waiting
    for it, sends an immediate one: that one interrupts the request, as it would alone. The
    plain cancel had marked the child, so the immediate one was sent to nobody below."""
    gate = Gate("child-model")
    child = Agent("child", gate.model())
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("parent done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(SubAgent(child))]), "go"
    )
    await gate.entered.wait()
    (child_info,) = rt.runs.tree.children(parent.run_id)

    await parent.cancel("when you can", actor=OPERATOR)
    await parent.cancel("now", immediate=True, actor=OPERATOR)

    assert (await parent.result()).status is RunStatus.CANCELLED  # the gate never opened
    assert child_info.status is RunStatus.CANCELLED and gate.cancelled
    sent = cancels_to(recorder, child_info.run_id, "steering.accepted")
    reasons = [c.payload_summary.get("reason") for c in sent]
    assert reasons == [  # one of each: the child's own immediate cancel sent it no other
        f"parent run {parent.run_id} was cancelled: when you can",
        f"parent run {parent.run_id} was cancelled: now",
    ]
    recorder.assert_every_command_terminal()


class HoldsCancels(Middleware):
    """A run's policy that decides on a cancel only once the test lets it (a policy that asks
    a service first); every other command goes through at once."""

    name = "holds-cancels"

    def __init__(self) -> None:
        self.entered, self.release = asyncio.Event(), asyncio.Event()

    async def steering(self, cmd: Any, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is SteeringKind.CANCEL:
            self.entered.set()
            await self.release.wait()
        return await call_next(cmd)


class SeesCancels(Middleware):
    """A run's policy that notes how each cancel sent to its run is to be delivered."""

    name = "sees-cancels"

    def __init__(self) -> None:
        self.deliveries: list[SteeringDelivery] = []
        self.seen = asyncio.Event()

    async def steering(self, cmd: Any, ctx: Any, call_next: Any) -> Any:
        if cmd.kind is SteeringKind.CANCEL:
            self.deliveries.append(cmd.delivery)
            self.seen.set()
        return await call_next(cmd)


async def test_a_child_started_while_an_immediate_cancel_comes_down_gets_an_immediate_one(
    rt: Runtime, recorder: EventRecorder
):
    """An immediate cancel of the root marks the whole subtree at once, then sends each run
    its own immediate cancel, one after the other. A child that a run of the subtree starts
    before its own cancel has reached it joins the cancel as its elder siblings do: it was
    sent a plain cancel instead (the mode of a run an ancestor cancels was not looked at)."""
    holds, sees = HoldsCancels(), SeesCancels()
    late = SubAgent(Agent("late", ScriptedModel([reply("late")]), middleware=[sees]))
    entered, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def delegate(ctx: RunContext) -> str:
        """Ask a child, once told to."""
        entered.set()
        await go_on.wait()
        try:
            return str(await late.invoke_in_parent("go", ctx))
        except RunCancelled as exc:
            return f"late child cancelled: {exc.reason}"

    middle_model = ScriptedModel([tool_call("delegate"), reply("middle done")])
    middle = Agent("middle", middle_model, tools=[delegate], middleware=[holds])
    root_model = ScriptedModel([tool_call("middle", input="go"), reply("root done")])
    root = await rt.start(Agent("root", root_model, tools=[SubAgentTool(SubAgent(middle))]), "go")
    await entered.wait()

    await root.cancel("now", immediate=True, actor=OPERATOR)
    await holds.entered.wait()  # the middle run's own cancel is still on its way
    go_on.set()  # and its tool starts one more child
    await sees.seen.wait()
    holds.release.set()

    assert (await root.result()).status is RunStatus.CANCELLED
    middle_info = rt.runs.tree.children(root.run_id)[0]
    (late_info,) = rt.runs.tree.children(middle_info.run_id)
    assert late_info.status is RunStatus.CANCELLED
    assert sees.deliveries == [SteeringDelivery.IMMEDIATE]
    recorder.assert_every_command_terminal()


async def test_an_immediate_cancel_does_not_wait_for_a_model_calls_cleanup(
    rt: Runtime, recorder: EventRecorder
):
    """An immediate cancel cancels the in-flight request and "is applied right after": the
    run waited for the request's task to end, for ever for a model whose cleanup (in
    ``finally``) does not finish; that cleanup now goes on alone."""
    entered, release = asyncio.Event(), asyncio.Event()

    async def sticky(request: ModelRequest) -> ModelResponse:
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()
        return reply("unreachable")

    handle = await rt.start(Agent("a", FunctionModel(sticky)), "go")
    await entered.wait()
    try:
        await handle.cancel("now", immediate=True, actor=OPERATOR)
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        release.set()
    assert (result.status, result.error) == (RunStatus.CANCELLED, "now")
    (delivered,) = cancels_to(recorder, handle.run_id, "steering.delivered")
    assert delivered.boundary == "after_model_response"
    recorder.assert_every_command_terminal()


async def test_a_grandchild_started_while_a_failed_runs_subtree_is_cancelled_gets_it_at_once(
    rt: Runtime, recorder: EventRecorder
):
    """A run that ends on a limit (or a failure) cancels what it started at once, in-flight
    model requests too: each run below is sent an immediate cancel. A grandchild that a
    child's tool starts before the child's own cancel reached it was sent a plain one."""
    holds, sees = HoldsCancels(), SeesCancels()
    late = SubAgent(Agent("late", ScriptedModel([reply("late")]), middleware=[sees]))
    entered, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def delegate(ctx: RunContext) -> str:
        """Ask a child, once told to."""
        entered.set()
        await go_on.wait()
        try:
            return str(await late.invoke_in_parent("go", ctx))
        except RunCancelled as exc:
            return f"late child cancelled: {exc.reason}"

    child_model = ScriptedModel([tool_call("delegate"), reply("child done")])
    child = SubAgent(
        Agent("child", child_model, tools=[delegate], middleware=[holds]), description="x"
    )
    calls = 0

    async def plan(request: ModelRequest) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls == 1:
            return tool_call("spawn_subagent", name="child", input="go")
        await entered.wait()  # the child's tool call took the last one the parent had
        return tool_call("wait_subagents")

    parent = await rt.start(
        Agent(
            "parent",
            FunctionModel(plan),
            tools=orchestrator_tools([child]),
            limits=RunLimits(max_tool_calls=2),
        ),
        "go",
    )
    await entered.wait()
    try:
        assert (await parent.result()).status is RunStatus.LIMIT_EXCEEDED
        await holds.entered.wait()  # the child's cancel is still on its way
        go_on.set()  # and its tool starts one more child
        await sees.seen.wait()
    finally:
        holds.release.set()
        go_on.set()

    (kid,) = rt.runs.tree.children(parent.run_id)
    handle = rt.runs.get(kid.run_id)
    assert handle is not None and (await handle.result()).status is RunStatus.CANCELLED
    assert sees.deliveries == [SteeringDelivery.IMMEDIATE]
    recorder.assert_every_command_terminal()


async def _completed_child(
    rt: Runtime, asked: list[int], above: Any = None
) -> tuple[Any, Any, Gate]:
    """A run (below ``above``) waiting inside its tool ``hold``, and a child of it that
    completed (``asked`` counts the child's model calls)."""
    hold = Gate("hold")
    parent = await rt.start(
        Agent("parent", ScriptedModel([tool_call("hold"), "p"]), tools=[hold.tool()]),
        "go",
        parent=above,
    )
    await asyncio.wait_for(hold.entered.wait(), 60)

    async def child_fn(request: Any) -> str:
        asked.append(1)
        return f"c{len(asked)}"

    child = await rt.start(Agent("child", model=FunctionModel(child_fn)), "x", parent=parent)
    assert (await asyncio.wait_for(child.result(), 60)).status is RunStatus.COMPLETED
    return parent, child, hold


async def test_a_message_gives_no_turn_to_a_completed_child_of_a_run_being_cancelled(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """Found: an ``END_OF_TURN`` message to a completed child while its parent's cancel was
    on its way down the tree reopened the child for another turn: the cancel had passed over
    it (it was not running), so it called its model again, below a run being cancelled, and
    could still be working when the parent ended ``cancelled``. As a child started below
    such a run does no work at all, the message gives it no turn: it fails as any command
    that comes after its target's last boundary (``target finished before delivery``), and
    the child's answer stands."""
    asked: list[int] = []
    parent, child, hold = await _completed_child(rt, asked)
    # for its next boundary, passed down at once: the parent is sure to reach it after its tool
    assert (await parent.cancel("stop", actor=OPERATOR)).accepted
    message = await child.steer(
        "one more thing", actor=OPERATOR, delivery=SteeringDelivery.END_OF_TURN
    )
    failed = await asyncio.wait_for(
        waiter.event("steering.failed", correlation_id=message.correlation_id), 60
    )
    assert failed.reason == "target finished before delivery"
    hold.open()
    assert (await asyncio.wait_for(parent.result(), 60)).status is RunStatus.CANCELLED
    again = await child.steer("and now?", actor=OPERATOR, delivery=SteeringDelivery.END_OF_TURN)
    failed = await asyncio.wait_for(
        waiter.event("steering.failed", correlation_id=again.correlation_id), 60
    )
    assert failed.reason == "target finished before delivery"  # below a cancelled run too
    result = await asyncio.wait_for(child.result(), 60)
    assert (result.status, result.output, asked) == (RunStatus.COMPLETED, "c1", [1])
    assert [
        e.type
        for e in recorder.events
        if e.run_id == child.run_id and e.type in (*ENDINGS, "run.resumed")
    ] == ["run.completed"]
    recorder.assert_every_command_terminal()


async def test_a_message_gives_no_turn_to_a_completed_grandchild_of_a_run_being_cancelled(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    """The same two levels down: the root's cancel marks its child still working, and a
    message to that child's completed child is given no turn either."""
    asked: list[int] = []
    outer = Gate("outer")
    root = await rt.start(
        Agent("root", ScriptedModel([tool_call("outer"), "r"]), tools=[outer.tool()]), "go"
    )
    await asyncio.wait_for(outer.entered.wait(), 60)
    middle, grandchild, hold = await _completed_child(rt, asked, above=root)
    assert (await root.cancel("stop", actor=OPERATOR)).accepted
    await asyncio.wait_for(
        waiter.event("steering.accepted", run_id=middle.run_id, kind=SteeringKind.CANCEL), 60
    )
    message = await grandchild.steer(
        "one more thing", actor=OPERATOR, delivery=SteeringDelivery.END_OF_TURN
    )
    failed = await asyncio.wait_for(
        waiter.event("steering.failed", correlation_id=message.correlation_id), 60
    )
    assert failed.reason == "target finished before delivery" and asked == [1]
    hold.open()
    outer.open()
    assert (await asyncio.wait_for(root.result(), 60)).status is RunStatus.CANCELLED
    assert (await asyncio.wait_for(middle.result(), 60)).status is RunStatus.CANCELLED
    assert grandchild.status is RunStatus.COMPLETED and asked == [1]
    recorder.assert_every_command_terminal()
