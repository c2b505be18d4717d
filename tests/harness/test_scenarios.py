"""The harness scenarios of issue 3, each as its own test, driven by the testkit.

Runs are held at known points by a ``Gate`` (a tool or model waiting for the test); the test
waits for what happened through events (``Waiter``), never by sleeping.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tinyagents import (
    Agent,
    ModelRetry,
    RunLimits,
    RunStatus,
    Runtime,
    SteeringDelivery,
    SteeringKind,
    SubAgent,
    SubAgentTool,
    orchestrator_tools,
    tool,
)
from tinyagents.errors import RunLimitExceeded
from tinyagents.events import SteeringEvent
from tinyagents.harness import ModelRequest, ModelResponse
from tinyagents.protocol import Boundary, SteeringActor, SteeringCommand, SteeringTarget
from tinyagents.testkit import (
    BoundaryProbe,
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    fake_agent,
    first_request_with,
    reply,
    steering_messages,
    tool_call,
)

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def contains(request: ModelRequest, text: str) -> bool:
    return any(text in m.content for m in request.messages)


def events_of(recorder: EventRecorder, type_: str, run_id: str | None = None) -> list[Any]:
    return [e for e in recorder.of_type(type_) if run_id in (None, e.run_id)]


def steering_event(recorder: EventRecorder, correlation_id: str, state: str) -> SteeringEvent:
    """The one ``steering.<state>`` event of a command."""
    found = [e for e in recorder.steering(correlation_id) if e.type == f"steering.{state}"]
    assert len(found) == 1, f"{correlation_id}: {recorder.lifecycle(correlation_id)}"
    return found[0]


def last_tool_output(request: ModelRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "tool")


# --------------------------------------------------------------------------- 1


async def test_parent_orchestrator_steers_its_subagent(rt: Runtime, recorder: EventRecorder):
    gate = Gate()
    child_model = ScriptedModel([tool_call("hold"), reply("billing evidence: invoice 7")])
    researcher = SubAgent(
        Agent("researcher", child_model, tools=[gate.tool()]), description="finds evidence"
    )
    child_ids: list[str] = []

    async def orchestrate(request: ModelRequest) -> ModelResponse | str:
        turn = len(parent_model.requests)
        if turn == 1:
            return tool_call("spawn_subagent", {"name": "researcher", "input": "find evidence"})
        if turn == 2:
            child_ids.append(json.loads(last_tool_output(request))["run_id"])
            await gate.entered.wait()  # the child is inside its tool: steer it now
            return tool_call(
                "steer_subagent", run_id=child_ids[0], text="focus only on billing evidence"
            )
        if turn == 3:
            gate.open()
            return tool_call("wait_subagents", run_ids=child_ids)
        return reply("the researcher found invoice 7")

    parent_model = FunctionModel(orchestrate)
    parent = await rt.start(
        Agent("orchestrator", parent_model, tools=orchestrator_tools([researcher])), "audit"
    )
    result = await parent.result()

    assert result.status is RunStatus.COMPLETED
    (child_id,) = child_ids
    assert rt.runs.tree.get(child_id).parent_run_id == parent.run_id
    (cmd,) = [e for e in rt.steering_history(child_id) if e.type == "steering.applied"]
    assert cmd.actor == SteeringActor.parent_agent(parent.run_id, "orchestrator")
    assert "add_instruction accepted" in last_tool_output(parent_model.requests[2])

    # The child's model request after the steering carries it, with provenance, and the
    # one before it did not.
    assert first_request_with(child_model.requests, "focus only on billing evidence") == 1
    (message,) = steering_messages(child_model.requests[1])
    assert message.content.startswith(
        f'[steering · add_instruction · from parent agent "orchestrator" (run {parent.run_id}) '
        f"· {cmd.correlation_id}]\n<steering>\nfocus only on billing evidence\n</steering>\n"
    )
    assert "does not change your tools, limits or task contract" in message.content
    assert cmd.affected == {"model_request_id": child_model.requests[1].request_id}
    # The parent steered its own child: no "someone else steered your child" rollup.
    assert events_of(recorder, "subagent.steered") == []
    recorder.assert_every_command_terminal()


# --------------------------------------------------------------------------- 2


async def test_human_steers_a_paused_subagent(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    gate = Gate()
    child_model = ScriptedModel([tool_call("hold"), reply("child done")])
    child = SubAgent(Agent("researcher", child_model, tools=[gate.tool()]))
    parent_model = ScriptedModel([tool_call("researcher", input="dig"), reply("parent done")])
    parent = await rt.start(Agent("orchestrator", parent_model, tools=[SubAgentTool(child)]), "go")

    await gate.entered.wait()
    (child_info,) = rt.runs.tree.children(parent.run_id)
    handle = rt.runs.get(child_info.run_id)
    pause = await handle.pause(actor=OPERATOR)
    gate.open()
    await waiter.event("run.paused", handle.run_id)
    assert handle.status is RunStatus.PAUSED

    steer = await handle.steer("focus only on billing evidence", actor=OPERATOR)
    assert steer.accepted
    # A control command is still delivered while paused; once it is applied the paused loop
    # has looked at its queue, and the instruction was not delivered.
    status = await handle.request_status(actor=OPERATOR)
    await waiter.event("steering.applied", handle.run_id, correlation_id=status.correlation_id)
    assert recorder.lifecycle(steer.correlation_id) == ["requested", "accepted"]
    assert steering_event(recorder, status.correlation_id, "delivered").boundary == "while_paused"
    assert len(child_model.requests) == 1  # no model work while paused

    await handle.resume(actor=OPERATOR)
    assert (await parent.result()).status is RunStatus.COMPLETED

    assert recorder.terminal_state(pause.correlation_id) == "applied"
    applied = steering_event(recorder, steer.correlation_id, "applied")
    assert first_request_with(child_model.requests, "focus only on billing evidence") == 1
    assert applied.affected == {"model_request_id": child_model.requests[1].request_id}
    assert steering_messages(child_model.requests[1])[0].content.startswith(
        f'[steering · add_instruction · from human "alice" · {steer.correlation_id}]'
    )
    # The parent was not steered; it heard about its child being steered through rollups.
    assert not any(contains(r, "billing evidence") for r in parent_model.requests)
    rollups = events_of(recorder, "subagent.steered", parent.run_id)
    assert [(e.child_run_id, e.steering_kind) for e in rollups] == [
        (handle.run_id, "pause"),
        (handle.run_id, "add_instruction"),
        (handle.run_id, "request_status"),
        (handle.run_id, "resume"),
    ]
    recorder.assert_every_command_terminal()


# --------------------------------------------------------------------------- 3


async def test_human_steers_a_parent_orchestrator(rt: Runtime, recorder: EventRecorder):
    gate = Gate()
    child_model = ScriptedModel([tool_call("hold"), reply("child done")])
    child = SubAgent(Agent("researcher", child_model, tools=[gate.tool()]))
    parent_model = ScriptedModel([tool_call("researcher", input="dig"), reply("parent done")])
    parent = await rt.start(Agent("orchestrator", parent_model, tools=[SubAgentTool(child)]), "go")

    await gate.entered.wait()  # the parent is inside its SubAgentTool call, the child in a tool
    receipt = await parent.steer("summarise for the CFO", actor=OPERATOR)
    gate.open()
    assert (await parent.result()).status is RunStatus.COMPLETED

    delivered = steering_event(recorder, receipt.correlation_id, "delivered")
    assert delivered.boundary == "after_tool_result"  # the parent's first boundary after it
    assert first_request_with(parent_model.requests, "summarise for the CFO") == 1
    assert steering_messages(parent_model.requests[1])[0].content.startswith(
        f'[steering · add_instruction · from human "alice" · {receipt.correlation_id}]'
    )
    # Steering the parent does not leak into the child that was running.
    assert not any(contains(r, "CFO") for r in child_model.requests)
    assert events_of(recorder, "subagent.steered") == []
    recorder.assert_every_command_terminal()


# --------------------------------------------------------------------------- 4


async def test_steering_lands_at_the_next_safe_boundary(rt: Runtime, recorder: EventRecorder):
    gate = Gate()
    agent = fake_agent(
        "worker",
        tools=[gate.tool()],
        script=[tool_call("hold", id="call-1"), tool_call("step", n=2), reply("done")],
    )
    model = agent.model
    handle = await rt.start(agent, "go")

    await gate.entered.wait()  # inside the tool: no boundary until it returns
    receipt = await handle.steer("also check refunds", actor=OPERATOR)
    assert recorder.lifecycle(receipt.correlation_id) == ["requested", "accepted"]
    gate.open()
    assert (await handle.result()).status is RunStatus.COMPLETED

    delivered = steering_event(recorder, receipt.correlation_id, "delivered")
    assert delivered.boundary == "after_tool_result"
    assert delivered.affected == {"tool_call_id": "call-1"}
    # The exact request that first carries it: the one right after the tool result.
    assert first_request_with(model.requests, "also check refunds") == 1
    last = model.requests[1].messages
    assert [m.role for m in last[-2:]] == ["tool", "user"]
    applied = steering_event(recorder, receipt.correlation_id, "applied")
    assert applied.affected == {"model_request_id": model.requests[1].request_id}
    # Once sent it stays in the conversation; it is not sent a second time.
    assert len(steering_messages(model.requests[2])) == 1


async def test_before_model_call_waits_past_other_boundaries(rt: Runtime, recorder: EventRecorder):
    gate = Gate()
    agent = fake_agent(
        "worker", tools=[gate.tool()], script=[tool_call("hold", id="call-1"), reply("done")]
    )
    model = agent.model
    probe = BoundaryProbe(rt)
    handle = await rt.start(agent, "go")

    await gate.entered.wait()
    before_model = await handle.steer(
        "use the ledger", actor=OPERATOR, delivery=SteeringDelivery.BEFORE_MODEL_CALL
    )
    anywhere = await handle.steer("be brief", actor=OPERATOR)
    gate.open()
    await handle.result()

    assert steering_event(recorder, anywhere.correlation_id, "delivered").boundary == (
        "after_tool_result"
    )
    # after_tool_result and before_loop_continuation were passed first; it waited for
    # before_model_call, and both reached the same request.
    assert probe.boundaries(handle.run_id)[3:6] == [
        Boundary.AFTER_TOOL_RESULT,
        Boundary.BEFORE_LOOP_CONTINUATION,
        Boundary.BEFORE_MODEL_CALL,
    ]
    delivered = steering_event(recorder, before_model.correlation_id, "delivered")
    assert delivered.boundary == "before_model_call"
    assert first_request_with(model.requests, "use the ledger") == 1
    assert first_request_with(model.requests, "be brief") == 1


async def test_after_tool_result_waits_for_the_tool(rt: Runtime, recorder: EventRecorder):
    model_gate = Gate("model")
    agent = fake_agent("worker")

    async def slow_first_call(request: ModelRequest) -> ModelResponse | str:
        if len(model.requests) == 1:
            await model_gate.wait()
            return tool_call("step", n=1, id="call-7")
        return reply("done")

    agent.model = model = FunctionModel(slow_first_call)
    handle = await rt.start(agent, "go")
    await model_gate.entered.wait()  # a model request is in flight
    after_tool = await handle.steer(
        "cite the tool", actor=OPERATOR, delivery=SteeringDelivery.AFTER_TOOL_RESULT
    )
    nxt = await handle.steer("be brief", actor=OPERATOR)
    model_gate.open()
    await handle.result()

    first = steering_event(recorder, nxt.correlation_id, "delivered")
    assert first.boundary == "after_model_response"
    assert first.affected == {"model_request_id": model.requests[0].request_id}
    delivered = steering_event(recorder, after_tool.correlation_id, "delivered")
    assert delivered.boundary == "after_tool_result"
    assert delivered.affected == {"tool_call_id": "call-7"}
    assert first_request_with(model.requests, "cite the tool") == 1


# --------------------------------------------------------------------------- 5


async def test_child_tool_allowlist_cannot_be_widened(rt: Runtime, recorder: EventRecorder):
    @tool
    def search(query: str) -> str:
        """Search."""
        return f"results for {query}"

    @tool
    def delete_records(table: str) -> str:
        """Delete records."""
        return "deleted"

    gate = Gate()
    child_model = ScriptedModel([tool_call("hold"), reply("done")])
    child_agent = Agent("researcher", child_model, tools=[gate.tool(), search, delete_records])
    parent = await rt.start(Agent("orchestrator", Gate().model()), "go")
    # The parent grants its child only two of the agent's three tools.
    child = await rt.start(child_agent, "dig", parent=parent, tools=["hold", "search"])

    await gate.entered.wait()
    widen = await child.constrain_tools(["search", "delete_records"], actor=OPERATOR, check=False)
    gate.open()
    await child.result()

    assert widen.status == "rejected"
    assert widen.policy_id == "allowlist"
    assert "delete_records" in widen.reason and "only narrow" in widen.reason
    assert recorder.lifecycle(widen.correlation_id) == ["requested", "rejected"]
    assert child.info.tools == frozenset({"hold", "search"})
    assert [t.name for t in child_model.requests[1].tools] == ["hold", "search"]


async def test_narrowing_tools_mid_run_removes_the_tool(rt: Runtime, recorder: EventRecorder):
    @tool
    def search(query: str) -> str:
        """Search."""
        return f"results for {query}"

    gate = Gate()
    model = ScriptedModel([tool_call("hold"), tool_call("hold", id="call-late"), reply("done")])
    handle = await rt.start(Agent("worker", model, tools=[gate.tool(), search]), "go")

    await gate.entered.wait()
    narrow = await handle.constrain_tools(["search"], actor=OPERATOR)
    gate.open()
    await handle.result()

    assert narrow.accepted
    applied = steering_event(recorder, narrow.correlation_id, "applied")
    assert applied.affected["tools"] == ["search"]
    assert steering_event(recorder, narrow.correlation_id, "delivered").boundary == (
        "after_tool_result"
    )
    assert [t.name for t in model.requests[0].tools] == ["hold", "search"]
    assert [t.name for t in model.requests[1].tools] == ["search"]
    # The model called the removed tool anyway: an error result, and the tool did not run.
    late = model.requests[2].messages[-1]
    assert late.role == "tool" and late.tool_call_id == "call-late"
    assert late.metadata == {"error": True}
    assert "unknown tool 'hold'" in late.content and "search" in late.content
    assert gate.calls == 1


# --------------------------------------------------------------------------- 6


def looping_child(max_model_calls: int) -> SubAgent:
    """A child that keeps calling tools: it can only stop on its limit."""
    agent = fake_agent(
        "researcher",
        script=[tool_call("step", n=i) for i in range(1, 10)],
        limits=RunLimits(max_model_calls=max_model_calls),
    )
    return SubAgent(agent, description="digs forever")


async def test_subagent_tool_turns_a_limit_into_an_error_result(
    rt: Runtime, recorder: EventRecorder
):
    child = looping_child(max_model_calls=2)
    parent_model = ScriptedModel(
        [tool_call("researcher", input="find everything"), reply("I will narrow the task")]
    )
    parent = await rt.start(Agent("orchestrator", parent_model, tools=[SubAgentTool(child)]), "go")
    result = await parent.result()

    assert result.status is RunStatus.COMPLETED  # the parent carried on
    message = parent_model.requests[1].messages[-1]
    assert message.role == "tool" and message.metadata == {"error": True}
    assert "hit its configured limit max_model_calls (used 2, allowed 2)" in message.content
    assert "not because it completed" in message.content
    (child_info,) = rt.runs.tree.children(parent.run_id)
    assert child_info.status is RunStatus.LIMIT_EXCEEDED
    (limit,) = events_of(recorder, "limit.exceeded")
    assert (limit.run_id, limit.limit, limit.used, limit.allowed) == (
        child_info.run_id,
        "max_model_calls",
        2,
        2,
    )


async def test_subagent_invoke_raises_run_limit_exceeded(rt: Runtime):
    child = looping_child(max_model_calls=2)
    with pytest.raises(RunLimitExceeded) as caught:
        await child.invoke("find everything", runtime=rt)
    assert (caught.value.limit, caught.value.used, caught.value.allowed) == (
        "max_model_calls",
        2,
        2,
    )


# --------------------------------------------------------------------------- 7


def _subtree_agents(
    leaf_gate: Gate, mid_model_gate: Gate | None, parent_model_gate: Gate
) -> tuple[Agent, dict[str, list[str]]]:
    """orchestrator → mid → leaf. The leaf waits in a tool; mid and the orchestrator wait in
    their second model request (``mid_model_gate``) or, for mid without one, in
    ``wait_subagents``."""
    spawned: dict[str, list[str]] = {"mid": [], "leaf": []}
    leaf = SubAgent(
        Agent(
            "leaf", ScriptedModel([tool_call("hold"), reply("leaf done")]), tools=[leaf_gate.tool()]
        )
    )

    async def mid_fn(request: ModelRequest) -> ModelResponse | str:
        turn = len(mid_model.requests)
        if turn == 1:
            return tool_call("spawn_subagent", {"name": "leaf", "input": "hold on"})
        if turn == 2:
            spawned["leaf"].append(json.loads(last_tool_output(request))["run_id"])
        if mid_model_gate is not None:
            await mid_model_gate.wait()
            return reply("mid done")
        if turn == 2:
            return tool_call("wait_subagents", run_ids=spawned["leaf"])
        return reply("mid done")

    mid_model = FunctionModel(mid_fn)
    mid = SubAgent(Agent("mid", mid_model, tools=orchestrator_tools([leaf])))

    async def parent_fn(request: ModelRequest) -> ModelResponse | str:
        turn = len(parent_model.requests)
        if turn == 1:
            return tool_call("spawn_subagent", {"name": "mid", "input": "delegate"})
        if turn == 2:
            spawned["mid"].append(json.loads(last_tool_output(request))["run_id"])
            await parent_model_gate.wait()
            return tool_call("wait_subagents", run_ids=spawned["mid"])
        return reply("parent done")

    parent_model = FunctionModel(parent_fn)
    return Agent("orchestrator", parent_model, tools=orchestrator_tools([mid])), spawned


async def test_cancel_next_boundary_cancels_the_whole_subtree(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    leaf_gate, parent_gate = Gate(), Gate("parent-model")
    agent, spawned = _subtree_agents(leaf_gate, None, parent_gate)
    parent = await rt.start(agent, "go")
    await leaf_gate.entered.wait()
    await parent_gate.entered.wait()
    ((mid_id,), (leaf_id,)) = spawned["mid"], spawned["leaf"]

    cancel = await parent.cancel("stop everything", actor=OPERATOR)
    parent_gate.open()  # the parent reaches after_model_response and takes the cancel there
    await waiter.event("steering.accepted", leaf_id, kind=SteeringKind.CANCEL)
    assert not leaf_gate.finished.is_set()
    leaf_gate.open()  # the leaf's tool is never interrupted: it finishes, then the cancel lands

    result = await parent.result()
    assert result.status is RunStatus.CANCELLED
    assert steering_event(recorder, cancel.correlation_id, "delivered").boundary == (
        "after_model_response"
    )
    assert steering_event(recorder, cancel.correlation_id, "applied").affected["boundary"] == (
        "after_model_response"
    )
    _assert_subtree_cancelled(rt, recorder, [parent.run_id, mid_id, leaf_id])
    assert leaf_gate.finished.is_set() and not leaf_gate.cancelled
    (leaf_result,) = events_of(recorder, "tool.result", leaf_id)
    assert leaf_result.error is False
    recorder.assert_every_command_terminal()


async def test_immediate_cancel_cancels_model_requests_not_tools(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    leaf_gate, mid_gate, parent_gate = Gate(), Gate("mid-model"), Gate("parent-model")
    agent, spawned = _subtree_agents(leaf_gate, mid_gate, parent_gate)
    parent = await rt.start(agent, "go")
    await leaf_gate.entered.wait()
    await mid_gate.entered.wait()
    await parent_gate.entered.wait()
    ((mid_id,), (leaf_id,)) = spawned["mid"], spawned["leaf"]

    cancel = await parent.cancel("stop now", immediate=True, actor=OPERATOR)
    # The parent's and mid's in-flight model requests are cancelled at once …
    await waiter.event("steering.applied", parent.run_id, correlation_id=cancel.correlation_id)
    await waiter.event("steering.applied", mid_id, kind=SteeringKind.CANCEL)
    assert parent_gate.cancelled and mid_gate.cancelled
    # … while the leaf's running tool is not: it has the cancel, but is still in its tool.
    await waiter.event("steering.accepted", leaf_id, kind=SteeringKind.CANCEL)
    assert rt.runs.get(leaf_id).status is RunStatus.RUNNING
    assert not leaf_gate.cancelled and not leaf_gate.finished.is_set()
    leaf_gate.open()

    result = await parent.result()
    assert result.status is RunStatus.CANCELLED
    _assert_subtree_cancelled(rt, recorder, [parent.run_id, mid_id, leaf_id])
    assert leaf_gate.finished.is_set()
    (leaf_result,) = events_of(recorder, "tool.result", leaf_id)
    assert leaf_result.error is False
    # Neither cancelled model request produced a response.
    assert len(events_of(recorder, "model.response", parent.run_id)) == 1
    assert len(events_of(recorder, "model.response", mid_id)) == 1
    recorder.assert_every_command_terminal()


def _assert_subtree_cancelled(rt: Runtime, recorder: EventRecorder, run_ids: list[str]) -> None:
    for run_id in run_ids:
        assert rt.runs.get(run_id).status is RunStatus.CANCELLED, run_id
        ended = [e for e in recorder.events if e.run_id == run_id and e.type.startswith("run.")]
        assert [e.type for e in ended if e.type != "run.started"] == ["run.cancelled"], run_id


# --------------------------------------------------------------------------- 8


async def test_late_command_fails_instead_of_vanishing(rt: Runtime, recorder: EventRecorder):
    handle = await rt.start(fake_agent("worker"), "go")
    assert (await handle.result()).status is RunStatus.COMPLETED

    receipt = await handle.steer("too late", actor=OPERATOR)

    assert receipt.accepted
    assert recorder.lifecycle(receipt.correlation_id) == ["requested", "accepted", "failed"]
    failed = steering_event(recorder, receipt.correlation_id, "failed")
    assert failed.reason == "target finished before delivery"
    assert [e.type for e in rt.steering_history(handle.run_id)][-1] == "steering.failed"


async def test_end_of_turn_instruction_after_completion_gives_another_turn(
    rt: Runtime, recorder: EventRecorder
):
    model = ScriptedModel([reply("first answer"), reply("second answer, with refunds")])
    handle = await rt.start(Agent("worker", model), "go")
    assert (await handle.result()).output == "first answer"

    receipt = await handle.steer(
        "now include refunds", actor=OPERATOR, delivery=SteeringDelivery.END_OF_TURN
    )
    result = await handle.result()

    assert receipt.accepted
    assert result.status is RunStatus.COMPLETED
    assert result.output == "second answer, with refunds"
    # The reopened run's first model request carries the instruction.
    assert len(model.requests) == 2
    assert first_request_with(model.requests, "now include refunds") == 1
    assert recorder.lifecycle(receipt.correlation_id) == [
        "requested",
        "accepted",
        "delivered",
        "applied",
    ]
    assert steering_event(recorder, receipt.correlation_id, "delivered").boundary == (
        "before_loop_continuation"
    )
    assert [e.type for e in events_of(recorder, "run.completed", handle.run_id)] == [
        "run.completed",
        "run.completed",
    ]
    assert result.usage["model_calls"] == 2


class Total(BaseModel):
    total: int


async def _reopen_for_nothing(handle: Any) -> None:
    """Reopen ``handle``'s completed run as an END_OF_TURN message does, the message then
    never reaching it (the router fails a message the queue refuses after the reopen):
    the reopened turn has nothing for the model."""
    cmd = SteeringCommand(
        target=SteeringTarget.agent_run(handle.run_id),
        actor=OPERATOR,
        kind=SteeringKind.ADD_INSTRUCTION,
        payload={"text": "one more thing"},
        delivery=SteeringDelivery.END_OF_TURN,
    )
    assert await handle.driver.on_late_command(cmd)


async def test_a_run_reopened_for_nothing_ends_on_its_answer_validated_again(
    rt: Runtime, recorder: EventRecorder
):
    # Reopened with nothing for the model, the run ended on its last answer's raw text,
    # past its output type and its validators: a Total(total=84) came back as
    # '{"total": 42}'. It ends on that answer validated, as any final answer is.
    seen: list[Any] = []
    agent = Agent("worker", ScriptedModel(['{"total": 42}']), output_type=Total)

    @agent.output_validator
    def doubled(total: Total) -> Total:
        seen.append(total)
        return Total(total=total.total * 2)

    handle = await rt.start(agent, "go")
    assert (await handle.result()).output == Total(total=84)

    await _reopen_for_nothing(handle)
    result = await handle.result()

    assert len(events_of(recorder, "run.completed", handle.run_id)) == 2
    assert (result.status, result.output) == (RunStatus.COMPLETED, Total(total=84))
    assert seen == [Total(total=42), Total(total=42)]


async def test_a_run_reopened_for_nothing_is_asked_again_when_a_validator_now_refuses(
    rt: Runtime,
):
    # The validators run on the answer a reopened run ends with: one that refuses it now
    # sends it back to the model (the reopened turn has a model call left), as at any end.
    refuse = [False]
    model = ScriptedModel([reply("draft"), reply("final, with sources")])
    agent = Agent("worker", model)

    @agent.output_validator
    def sourced(text: str) -> str:
        if refuse[0] and "sources" not in text:
            raise ModelRetry("cite your sources")
        return text

    handle = await rt.start(agent, "go")
    assert (await handle.result()).output == "draft"
    refuse[0] = True
    await _reopen_for_nothing(handle)
    result = await handle.result()

    assert (result.status, result.output) == (RunStatus.COMPLETED, "final, with sources")
    assert len(model.requests) == 2
    assert (
        model.requests[1].messages[-1].content.startswith("Validation feedback:\ncite your sources")
    )


@pytest.mark.parametrize(
    "limits",
    [RunLimits(max_model_calls=1), RunLimits(max_output_tokens=2)],
    ids=["model_calls", "tokens"],
)
async def test_end_of_turn_instruction_to_a_run_with_no_model_call_left_leaves_it_completed(
    rt: Runtime, recorder: EventRecorder, limits: RunLimits
):
    # A run that completed on the last model call its budget allowed was reopened for the
    # turn, which its budget refused before any request: the completed answer was turned
    # into limit_exceeded by a message the model never saw. The message now fails like any
    # late command, and the run stays completed.
    model = ScriptedModel([reply("first answer"), reply("never sent")])
    handle = await rt.start(Agent("worker", model, limits=limits), "go")
    first = await handle.result()
    assert first.status is RunStatus.COMPLETED

    receipt = await handle.steer(
        "now include refunds", actor=OPERATOR, delivery=SteeringDelivery.END_OF_TURN
    )
    result = await handle.result()

    assert (result.status, result.output) == (RunStatus.COMPLETED, "first answer")
    assert len(model.requests) == 1
    assert recorder.lifecycle(receipt.correlation_id) == ["requested", "accepted", "failed"]
    assert steering_event(recorder, receipt.correlation_id, "failed").reason == (
        "target finished before delivery"
    )
    assert [e.type for e in events_of(recorder, "run.completed", handle.run_id)] == [
        "run.completed"
    ]
    assert not events_of(recorder, "run.limit_exceeded", handle.run_id)


@pytest.mark.parametrize(
    "delivery", [SteeringDelivery.NEXT_BOUNDARY, SteeringDelivery.END_OF_TURN], ids=str
)
@pytest.mark.parametrize(
    "limits",
    [RunLimits(max_model_calls=1), RunLimits(max_output_tokens=2)],
    ids=["model_calls", "tokens"],
)
async def test_an_instruction_at_the_final_answer_with_no_model_call_left_leaves_it_completed(
    rt: Runtime, recorder: EventRecorder, limits: RunLimits, delivery: SteeringDelivery
):
    # The same message as above, sent while the last model call the budget allowed was in
    # flight: delivered at the answer, it gave the run another turn its budget refused before
    # any request, so the completed answer ended limit_exceeded (SubAgent.invoke raised
    # RunLimitExceeded for it) for a message the model never saw. The answer stands now, and
    # the message fails saying why, as it does when it arrives after the run ended.
    gate = Gate("answer")
    handle = await rt.start(Agent("worker", gate.model("first answer"), limits=limits), "go")
    await gate.entered.wait()  # the run is inside its last allowed model call
    receipt = await handle.steer("now include refunds", actor=OPERATOR, delivery=delivery)
    gate.open()
    result = await handle.result()

    assert (result.status, result.output) == (RunStatus.COMPLETED, "first answer")
    assert result.usage["model_calls"] == 1
    assert recorder.lifecycle(receipt.correlation_id) == [
        "requested",
        "accepted",
        "delivered",
        "failed",
    ]
    reason = steering_event(recorder, receipt.correlation_id, "failed").reason or ""
    assert "no model call left" in reason
    assert not events_of(recorder, "run.limit_exceeded", handle.run_id)


# --------------------------------------------------------------------------- 13


async def test_litellm_model_drives_an_agent_with_a_tool_round_trip():
    from tinyagents import LiteLLMModel
    from tinyagents.testkit import OpenAICompatServer

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    recorder = EventRecorder()
    async with (
        OpenAICompatServer(
            [tool_call("add", a=2, b=3, id="call-add"), reply("2 + 3 = 5")]
        ) as server,
        Runtime(testing=True, sinks=[recorder]) as rt,
    ):
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", retry_backoff_s=0
        )
        handle = await rt.start(Agent("calc", model, instructions="You add.", tools=[add]), "2+3?")
        result = await handle.result()

    assert result.status is RunStatus.COMPLETED
    assert result.output == "2 + 3 = 5"
    assert result.usage["model_calls"] == 2 and result.usage["tool_calls"] == 1
    first, second = server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    assert second["messages"][-2]["tool_calls"][0]["id"] == "call-add"
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call-add", "content": "5"}
    (tool_result,) = events_of(recorder, "tool.result")
    assert tool_result.content_summary == "5" and tool_result.error is False


async def test_subagent_target_names_the_parent(rt: Runtime, recorder: EventRecorder):
    """A child addressed through the wrong parent is not found (a human steering by id)."""
    gate = Gate()
    parent = await rt.start(Agent("orchestrator", Gate().model()), "go")
    other = await rt.start(Agent("other", Gate().model()), "go")
    child = await rt.start(
        Agent("researcher", ScriptedModel([tool_call("hold"), reply("ok")]), tools=[gate.tool()]),
        "dig",
        parent=parent,
    )
    await gate.entered.wait()
    wrong = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.subagent_run(other.run_id, child.run_id),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "x"},
        )
    )
    right = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.subagent_run(parent.run_id, child.run_id),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "via the parent"},
        )
    )
    gate.open()
    await child.result()
    assert wrong.status == "rejected" and wrong.reason.startswith("not found")
    assert right.accepted and recorder.terminal_state(right.correlation_id) == "applied"


async def test_a_command_still_queued_when_the_run_ends_fails_before_the_runs_end_event(
    rt: Runtime, recorder: EventRecorder
):
    # Waiting for a tool result the run never gets (it has a tool, which the model does not
    # call): the run completes with it still queued.
    gate = Gate("think")
    spare = Gate("spare").tool()
    handle = await rt.start(Agent("worker", gate.model("the answer"), tools=[spare]), "go")
    await gate.entered.wait()
    receipt = await handle.steer(
        "after the next tool", actor=OPERATOR, delivery=SteeringDelivery.AFTER_TOOL_RESULT
    )
    gate.open()
    result = await handle.result()

    assert receipt.accepted and result.status is RunStatus.COMPLETED
    [failed] = [e for e in recorder.steering(receipt.correlation_id) if e.type == "steering.failed"]
    assert failed.reason == "target finished before delivery"
    ours = [e for e in recorder.events if e.run_id == handle.run_id]
    types = [e.type for e in ours]
    assert types.index("steering.failed") < types.index("run.completed")
    assert types[-1] == "run.completed"  # nothing of the run's after its end
    recorder.assert_every_command_terminal()
