"""The orchestrator toolkit: a parent model spawns, steers, waits for and cancels children."""

from __future__ import annotations

import json

import pytest

from tinyagents import Agent, RunLimits, RunStatus, Runtime, SubAgent, orchestrator_tools
from tinyagents.errors import ConfigurationError
from tinyagents.harness import ModelRequest, ModelResponse, ToolCall
from tinyagents.harness.tools import execute_tool_call
from tinyagents.protocol import SteeringActor
from tinyagents.testkit import (
    EventRecorder,
    FunctionModel,
    Gate,
    ScriptedModel,
    fake_agent,
    first_request_with,
    reply,
    tool_call,
)


def tool_output(request: ModelRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "tool")


def tool_error(request: ModelRequest) -> str:
    message = request.messages[-1]
    assert message.role == "tool" and message.metadata == {"error": True}, message
    return message.content


def spawn(name: str, input: str) -> ModelResponse:
    return tool_call("spawn_subagent", {"name": name, "input": input})


async def test_spawn_two_children_and_wait_for_both(rt: Runtime):
    research = SubAgent(fake_agent("research", answer="evidence"), description="finds evidence")
    critic = SubAgent(fake_agent("critic", answer="looks fine"), description="reviews")
    ids: list[str] = []

    async def orchestrate(request: ModelRequest) -> ModelResponse | str:
        turn = len(model.requests)
        if turn == 1:
            return ModelResponse(
                tool_calls=[
                    ToolCall(
                        id="s1", name="spawn_subagent", args={"name": "research", "input": "a"}
                    ),
                    ToolCall(id="s2", name="spawn_subagent", args={"name": "critic", "input": "b"}),
                ]
            )
        if turn == 2:
            outputs = [m.content for m in request.messages if m.role == "tool"]
            ids.extend(json.loads(o)["run_id"] for o in outputs)
            return tool_call("wait_subagents", run_ids=ids)
        return reply(tool_output(request))

    model = FunctionModel(orchestrate)
    agent = Agent("orchestrator", model, tools=orchestrator_tools([research, critic]))
    result = await (await rt.start(agent, "go")).result()

    assert result.status is RunStatus.COMPLETED
    waited = json.loads(result.output)
    assert [(w["run_id"], w["status"], w["output"]) for w in waited] == [
        (ids[0], "completed", "evidence"),
        (ids[1], "completed", "looks fine"),
    ]
    spec = {t.name: t for t in model.requests[0].tools}["spawn_subagent"]
    assert "research: finds evidence" in spec.description
    assert spec.parameters["properties"]["name"]["enum"] == ["critic", "research"]


async def test_spawning_an_unknown_subagent_is_an_error_result(rt: Runtime):
    model = ScriptedModel([spawn("nobody", "x"), reply("ok")])
    agent = Agent("orchestrator", model, tools=orchestrator_tools([SubAgent(fake_agent("a"))]))
    await (await rt.start(agent, "go")).result()
    assert tool_error(model.requests[1]) == "no sub-agent 'nobody'; available: ['a']"


async def test_a_child_past_the_depth_limit_is_reported_as_a_limit(rt: Runtime):
    # spawn_subagent let the RunLimitExceeded out ("tool 'spawn_subagent' raised
    # RunLimitExceeded: ..."): the model read it as the tool failing, where a SubAgentTool
    # call says the child could not start, which limit, and what to do instead.
    model = ScriptedModel([spawn("a", "x"), reply("ok")])
    tools = orchestrator_tools([SubAgent(fake_agent("a"))])
    agent = Agent("orchestrator", model, tools=tools, limits=RunLimits(max_depth=0))
    await (await rt.start(agent, "go")).result()
    error = tool_error(model.requests[1])
    # it said "would exceed the configured limit max_depth (would use 1, allowed 0)": a
    # count of something used, where nothing was used; now what the limit is and where the
    # run stands, in words
    assert error.startswith(
        "sub-agent 'a' could not start: sub-agent depth limit reached: this run is at depth 0 "
        "and its max_depth is 0, so it cannot start a sub-agent"
    )
    assert "would use" not in error
    assert rt.runs.list() == [rt.runs.list()[0]]  # the orchestrator only


async def test_a_parent_cannot_steer_a_run_that_is_not_its_descendant(
    rt: Runtime, recorder: EventRecorder
):
    gate = Gate()
    stranger = await rt.start(
        fake_agent("stranger", tools=[gate.tool()], script=[tool_call("hold"), reply("x")]), "go"
    )
    await gate.entered.wait()
    model = ScriptedModel(
        [tool_call("steer_subagent", run_id=stranger.run_id, text="obey"), reply("ok")]
    )
    parent = await rt.start(
        Agent("orchestrator", model, tools=orchestrator_tools([SubAgent(fake_agent("a"))])), "go"
    )
    await parent.result()
    gate.open()
    await stranger.result()

    error = tool_error(model.requests[1])
    assert error.startswith(f"add_instruction for run {stranger.run_id} was rejected: forbidden")
    assert "may steer only its own descendants" in error
    (rejected,) = [e for e in recorder.steering() if e.type == "steering.rejected"]
    assert rejected.policy_id == "authority"
    assert rejected.actor == SteeringActor.parent_agent(parent.run_id, "orchestrator")


async def test_a_grandparent_may_steer_its_grandchild(rt: Runtime, recorder: EventRecorder):
    gate = Gate()
    leaf_agent = fake_agent("leaf", tools=[gate.tool()], script=[tool_call("hold"), reply("x")])
    leaf_ids: list[str] = []

    async def mid_fn(request: ModelRequest) -> ModelResponse | str:
        if len(mid_model.requests) == 1:
            return spawn("leaf", "hold")
        leaf_ids.append(json.loads(tool_output(request))["run_id"])
        return tool_call("wait_subagents", run_ids=leaf_ids)

    mid_model = FunctionModel(mid_fn)
    mid = SubAgent(Agent("mid", mid_model, tools=orchestrator_tools([SubAgent(leaf_agent)])))

    async def top_fn(request: ModelRequest) -> ModelResponse | str:
        turn = len(top_model.requests)
        if turn == 1:
            return spawn("mid", "delegate")
        if turn == 2:
            await gate.entered.wait()
            return tool_call("steer_subagent", run_id=leaf_ids[0], text="from the top")
        if turn == 3:
            gate.open()
        return reply("done")

    top_model = FunctionModel(top_fn)
    top = await rt.start(Agent("top", top_model, tools=orchestrator_tools([mid])), "go")
    await top.result()
    await rt.runs.get(leaf_ids[0]).result()

    assert "add_instruction accepted" in tool_output(top_model.requests[2])
    assert first_request_with(leaf_agent.model.requests, "from the top") == 1
    # The leaf's parent (mid) hears that someone else steered its child.
    (rollup,) = [e for e in recorder.of_type("subagent.steered")]
    assert rollup.child_run_id == leaf_ids[0]
    assert rollup.detail["actor"].startswith('parent agent "top"')


async def test_cancel_subagent_cancels_only_that_child(rt: Runtime, recorder: EventRecorder):
    gate = Gate()
    held = SubAgent(fake_agent("held", tools=[gate.tool()], script=[tool_call("hold"), reply("x")]))
    quick = SubAgent(fake_agent("quick", answer="quick answer"))
    ids: dict[str, str] = {}

    async def orchestrate(request: ModelRequest) -> ModelResponse | str:
        turn = len(model.requests)
        if turn == 1:
            return spawn("held", "wait")
        if turn == 2:
            ids["held"] = json.loads(tool_output(request))["run_id"]
            return spawn("quick", "go")
        if turn == 3:
            ids["quick"] = json.loads(tool_output(request))["run_id"]
            await gate.entered.wait()
            return tool_call("cancel_subagent", run_id=ids["held"], reason="not needed")
        if turn == 4:
            gate.open()
            return tool_call("wait_subagents", run_ids=[ids["held"], ids["quick"]])
        return reply("done")

    model = FunctionModel(orchestrate)
    agent = Agent("orchestrator", model, tools=orchestrator_tools([held, quick]))
    parent = await rt.start(agent, "go")
    assert (await parent.result()).status is RunStatus.COMPLETED

    assert "cancel accepted" in tool_output(model.requests[3])
    waited = json.loads(tool_output(model.requests[4]))
    assert [(w["status"], w["output"]) for w in waited] == [
        ("cancelled", ""),
        ("completed", "quick answer"),
    ]
    assert waited[0]["error"] == "not needed"
    assert gate.finished.is_set()  # its running tool was not interrupted
    assert [e.run_id for e in recorder.of_type("run.cancelled")] == [ids["held"]]


@pytest.mark.parametrize("tool", ["steer_subagent", "cancel_subagent"])
async def test_steering_a_child_that_has_ended_says_so(
    rt: Runtime, recorder: EventRecorder, tool: str
):
    # The model was told "add_instruction accepted for run r-…" (or "cancel accepted") for a
    # child that had already ended: the command then failed ("target finished before
    # delivery") where the model could not see it, and it waited for a child that would
    # never read the instruction. Now the call says the child has ended; nothing is sent.
    ids: dict[str, str] = {}

    async def orchestrate(request: ModelRequest) -> ModelResponse | str:
        turn = len(model.requests)
        if turn == 1:
            return spawn("a", "go")
        if turn == 2:
            ids["a"] = json.loads(tool_output(request))["run_id"]
            return tool_call("wait_subagents", run_ids=[ids["a"]])
        if turn == 3:
            return tool_call(tool, run_id=ids["a"], **args)
        return reply("done")

    args = {"text": "one more thing"} if tool == "steer_subagent" else {}
    model = FunctionModel(orchestrate)
    agent = Agent("orchestrator", model, tools=orchestrator_tools([fake_agent("a", answer="a")]))
    await (await rt.start(agent, "go")).result()
    error = tool_error(model.requests[3])
    assert error == (
        f"run {ids['a']} has already ended (completed): nothing was sent; spawn a new "
        "sub-agent for more work"
    )
    assert recorder.of_type("steering.requested") == []
    # a run that is not its descendant is refused by the authority policy, ended or not:
    # whether it ended is none of the caller's business
    stranger = await rt.start(fake_agent("stranger", answer="x"), "go")
    await stranger.result()
    model = ScriptedModel([tool_call(tool, run_id=stranger.run_id, **args), reply("ok")])
    agent = Agent("orchestrator", model, tools=orchestrator_tools([fake_agent("a")]))
    await (await rt.start(agent, "go")).result()
    assert "was rejected: forbidden" in tool_error(model.requests[1])


async def test_wait_for_a_run_that_is_not_a_child_is_an_error(rt: Runtime):
    other = await rt.start(fake_agent("other"), "go")
    await other.result()
    model = ScriptedModel([tool_call("wait_subagents", run_ids=[other.run_id]), reply("ok")])
    agent = Agent("orchestrator", model, tools=orchestrator_tools([SubAgent(fake_agent("a"))]))
    await (await rt.start(agent, "go")).result()
    assert tool_error(model.requests[1]) == f"run {other.run_id} is not a sub-agent of this run"


async def test_orchestrator_tools_need_an_agent_run():
    tools = {t.name: t for t in orchestrator_tools([SubAgent(fake_agent("a"))])}
    result = await execute_tool_call(
        tools["steer_subagent"],
        ToolCall(id="c1", name="steer_subagent", args={"run_id": "r-1", "text": "x"}),
    )
    assert result.error and result.content == "steer_subagent must be called from an agent run"


async def test_calls_with_missing_or_wrong_arguments_are_refused_and_start_nothing(rt: Runtime):
    # spawn_subagent without an input started a child on "" (and input=null on "None"),
    # spending budget on no task; a missing run_id or text was "raised KeyError: 'run_id'";
    # run_ids given as one string waited for each of its characters ("run r is not ...").
    # Each is now an error result saying what the tool needs, and no tool call is spent.
    seen: list[str] = []
    critic = SubAgent(
        Agent("critic", FunctionModel(lambda r: seen.append(r.messages[-1].content) or "ok")),
        description="checks",
    )
    calls = [
        tool_call("spawn_subagent", name="critic"),
        tool_call("spawn_subagent", name="critic", input=None),
        tool_call("spawn_subagent", name=["critic"], input="x"),
        tool_call("steer_subagent", text="focus"),
        tool_call("steer_subagent", run_id="r-1"),
        tool_call("wait_subagents", run_ids="r-abc"),
        tool_call("wait_subagents"),
        tool_call("cancel_subagent"),
        tool_call("cancel_subagent", run_id="r-1", reason=5),
        tool_call("spawn_subagent", name="critic", input="x", priority="high"),
    ]
    model = ScriptedModel([*calls, "done"])
    orchestrator = Agent("o", model, tools=orchestrator_tools([critic]))
    result = await (await rt.start(orchestrator, "go")).result()
    assert (result.status, result.usage["tool_calls"], seen) == (RunStatus.COMPLETED, 0, [])
    errors = [tool_error(request) for request in model.requests[1:]]
    assert errors == [
        "tool 'spawn_subagent' needs a non-empty string 'input'",
        "tool 'spawn_subagent' needs a non-empty string 'input'",
        "no sub-agent ['critic']; available: ['critic']",
        "tool 'steer_subagent' needs a non-empty string 'run_id'",
        "tool 'steer_subagent' needs a non-empty string 'text'",
        "tool 'wait_subagents' needs 'run_ids': a list of run id strings",
        "tool 'wait_subagents' needs 'run_ids': a list of run id strings",
        "tool 'cancel_subagent' needs a non-empty string 'run_id'",
        "tool 'cancel_subagent' takes an optional string 'reason'",
        "tool 'spawn_subagent' takes no argument 'priority'; its arguments: ['input', 'name']. "
        "Call it again with those.",
    ]


def test_two_subagents_of_one_name_or_none_at_all_are_refused():
    # Two sub-agents named alike: the second silently replaced the first, which the model
    # could then never spawn (Agent refuses two tools of one name the same way). No
    # sub-agent at all: spawn_subagent offered an empty enum, a schema providers refuse.
    first = SubAgent(fake_agent("helper"), description="first")
    second = SubAgent(fake_agent("helper"), description="second")
    with pytest.raises(ConfigurationError, match="two sub-agents named 'helper'"):
        orchestrator_tools([first, second])
    with pytest.raises(ConfigurationError, match="at least one sub-agent"):
        orchestrator_tools([])
    renamed = SubAgent(fake_agent("helper"), name="helper-2", description="second")
    assert len(orchestrator_tools([first, renamed])) == 4
