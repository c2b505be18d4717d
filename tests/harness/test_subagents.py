"""Sub-agents: sessions, events, running inside a parent's tool, and how they report failure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tinyagents import (
    Agent,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    SupervisorSpec,
    orchestrator_tools,
    tool,
)
from tinyagents.errors import (
    ConfigurationError,
    ModelsWithheld,
    RunAborted,
    RunCancelled,
    RunFailed,
    ToolsWithheld,
)
from tinyagents.harness import Message
from tinyagents.harness.subagent import output_or_raise
from tinyagents.protocol import (
    SteeringActor,
    SteeringCommand,
    SteeringDelivery,
    SteeringKind,
    SteeringTarget,
)
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    Gate,
    ScriptedModel,
    fake_agent,
    reply,
    steering_messages,
    tool_call,
)

OPERATOR = SteeringActor.human("alice", scopes=["agent:control"])


def roles_and_text(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


def tool_message(model: ScriptedModel, request: int) -> Message:
    message = model.requests[request].messages[-1]
    assert message.role == "tool"
    return message


# --------------------------------------------------------------------------- sessions


async def test_session_keeps_the_transcript_across_sends(rt: Runtime):
    model = ScriptedModel([reply("Paris"), reply("about two million")])
    sub = SubAgent(Agent("geo", model, instructions="Answer briefly."))
    session = sub.session(runtime=rt)

    assert await session.send("capital of France?") == "Paris"
    assert await session.send("and its population?") == "about two million"

    assert roles_and_text(model.requests[1].messages) == [
        ("system", "Answer briefly."),
        ("user", "capital of France?"),
        ("assistant", "Paris"),
        ("user", "and its population?"),
    ]
    assert len(session.runs) == 2 and session.runs[0] != session.runs[1]
    assert roles_and_text(session.messages)[-1] == ("assistant", "about two million")


async def test_sends_at_the_same_time_take_turns_and_lose_none(rt: Runtime):
    # Two sends at once each started from the same transcript, and the one that ended last
    # overwrote the other's turn: a forked history, one exchange silently lost. Turns are
    # taken one at a time, in the order they were sent, each continuing the one before.
    gate = Gate("first-turn")
    seen: list[list[tuple[str, str]]] = []

    async def answer(request: Any) -> str:
        seen.append(roles_and_text(request.messages))
        if len(seen) == 1:
            await gate.wait()  # the first turn is still running when the second is sent
        return f"re: {request.messages[-1].content}"

    session = SubAgent(Agent("chat", FunctionModel(answer))).session(runtime=rt)
    first = asyncio.ensure_future(session.send("one"))
    await gate.entered.wait()
    second = asyncio.ensure_future(session.send("two"))
    gate.open()
    assert (await first, await second) == ("re: one", "re: two")
    assert seen[1] == [("user", "one"), ("assistant", "re: one"), ("user", "two")]
    assert roles_and_text(session.messages) == [*seen[1], ("assistant", "re: two")]
    assert len(session.runs) == 2


async def test_a_turn_reopened_by_end_of_turn_steering_stays_in_the_transcript(rt: Runtime):
    # An END_OF_TURN instruction sent to a turn's run after send() returned reopens that run
    # for another exchange. The session had already taken the transcript, so the next turn
    # started beside the reopened run, from a history without its exchange: a forked
    # conversation, the instruction and its answer lost to every later turn. The next turn
    # now waits for the reopened run and continues its transcript.
    gate = Gate("reopened-turn")
    seen: list[list[tuple[str, str]]] = []

    async def answer(request: Any) -> str:
        seen.append(roles_and_text(request.messages))
        if len(seen) == 2:
            await gate.wait()  # the reopened turn is still running when "two" is sent
        return f"answer {len(seen)}"

    session = SubAgent(Agent("chat", FunctionModel(answer))).session(runtime=rt)
    assert await session.send("one") == "answer 1"
    receipt = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.agent_run(session.runs[0]),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "add the source"},
            delivery=SteeringDelivery.END_OF_TURN,
        )
    )
    assert receipt.status.value == "accepted"
    await gate.entered.wait()
    second = asyncio.ensure_future(session.send("two"))
    gate.open()

    assert await second == "answer 3"
    assert [role for role, _ in seen[2]] == ["user", "assistant", "user", "assistant", "user"]
    assert seen[2][3] == ("assistant", "answer 2")  # the reopened exchange, then "two"
    assert "add the source" in seen[2][2][1] and seen[2][4] == ("user", "two")
    assert roles_and_text(session.messages) == [*seen[2], ("assistant", "answer 3")]


async def test_a_sessions_turns_run_on_one_thread_that_steering_can_address(
    rt: Runtime, recorder: EventRecorder
):
    # Each turn was a run on no thread, so a command for "the conversation" could only name
    # one turn's run, and between turns there was none to name. The turns now share the
    # session's thread: a command addressed to it between turns waits for the next turn.
    model = ScriptedModel([reply("Paris"), reply("Paris, France")])
    session = SubAgent(Agent("geo", model)).session(runtime=rt, thread_id="chat-7")
    assert session.thread_id == "chat-7"
    await session.send("capital of France?")
    receipt = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.thread("chat-7"),
            actor=OPERATOR,
            kind=SteeringKind.ADD_INSTRUCTION,
            payload={"text": "name the country too"},
        )
    )
    assert receipt.status.value == "deferred"  # no turn is running now
    assert await session.send("and again?") == "Paris, France"
    assert [rt.runs.get(r).info.thread_id for r in session.runs] == ["chat-7", "chat-7"]
    assert "name the country too" in steering_messages(model.requests[1])[0].content
    assert recorder.terminal_state(receipt.correlation_id) == "applied"
    # without a thread_id of its own, a session gets a new one
    other = SubAgent(Agent("geo", ScriptedModel(["x"]))).session(runtime=rt)
    assert other.thread_id and other.thread_id != "chat-7"


async def test_a_turn_whose_caller_stops_waiting_is_cancelled_not_left_running(rt: Runtime):
    # asyncio.wait_for(session.send(...), 30) timing out left the turn's run working, and
    # spending, for nobody; the session's lock was free again, so the next turn ran beside
    # it on the same thread. The run is now cancelled (in-flight model request included),
    # as a SubAgentTool's child is when its tool call is cancelled.
    gate = Gate("slow-model")
    model = ScriptedModel([lambda request: gate.wait(), reply("second")])
    session = SubAgent(Agent("chat", FunctionModel(lambda r: model.request(r)))).session(runtime=rt)
    turn = asyncio.ensure_future(session.send("first"))
    await gate.entered.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    abandoned = rt.runs.get(session.runs[0])
    assert abandoned is not None
    result = await abandoned.result()
    assert result.status is RunStatus.CANCELLED and gate.cancelled
    assert session.messages == []  # the turn left nothing in the transcript
    assert await session.send("again") == "second"


async def test_an_invoke_whose_caller_stops_waiting_cancels_its_run(rt: Runtime):
    gate = Gate("child-model")
    parent_gate = Gate("parent")
    parent = await rt.start(Agent("lead", parent_gate.model()), "go")
    for under in (None, parent):  # a run of its own, and a child of a live run
        call = asyncio.ensure_future(
            SubAgent(Agent("child", gate.model())).invoke("go", runtime=rt, parent=under)
        )
        await gate.entered.wait()
        gate.entered.clear()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    children = [h for h in rt.runs.list() if h.agent_id == "child"]
    assert len(children) == 2
    for info in children:
        handle = rt.runs.get(info.run_id)
        assert handle is not None
        assert (await handle.result()).status is RunStatus.CANCELLED
    parent_gate.open()
    await parent.result()


async def test_a_failed_turn_does_not_block_the_next_one(rt: Runtime):
    model = ScriptedModel([tool_call("step"), reply("second")])
    agent = Agent("chat", model, limits=RunLimits(max_tool_calls=0))
    session = SubAgent(agent).session(runtime=rt)
    with pytest.raises(Exception, match="max_tool_calls"):
        await session.send("first")
    assert await session.send("again") == "second"  # the first turn left no lock held


async def test_a_subagent_tool_call_without_input_is_refused_and_not_counted(rt: Runtime):
    # A SubAgentTool call with no usable input starts no child: like a call whose arguments
    # do not validate, it is an error result the model corrects, and spends no tool call.
    child_model = ScriptedModel([reply("found it")])
    child = SubAgent(Agent("finder", child_model), description="finds things")
    model = ScriptedModel(
        [tool_call("finder", input="  "), tool_call("finder", input="the invoice"), reply("ok")]
    )
    parent = Agent("lead", model, tools=[SubAgentTool(child)], limits=RunLimits(max_tool_calls=1))
    result = await (await rt.start(parent, "go")).result()
    assert (result.status, result.usage["tool_calls"]) == (RunStatus.COMPLETED, 1)
    refused = model.requests[1].messages[-1]
    assert refused.metadata == {"error": True} and "non-empty string 'input'" in refused.content
    assert len(child_model.requests) == 1


async def test_a_subagent_tool_call_with_an_argument_it_does_not_take_is_refused(rt: Runtime):
    # taken, and the extra argument dropped: the child never saw the context the model sent
    child_model = ScriptedModel([reply("found it")])
    finder = SubAgentTool(Agent("finder", child_model))
    model = ScriptedModel(
        [
            tool_call("finder", input="the invoice", context="customer acme"),
            tool_call("finder", input="the invoice of customer acme"),
            reply("ok"),
        ]
    )
    result = await (await rt.start(Agent("lead", model, tools=[finder]), "go")).result()

    assert (result.status, result.usage["tool_calls"]) == (RunStatus.COMPLETED, 1)
    assert tool_message(model, 1).content == (
        "tool 'finder' takes no argument 'context'; its arguments: ['input']. "
        "Call it again with those."
    )
    assert finder.parameters["additionalProperties"] is False
    assert [r.messages[-1].content for r in child_model.requests] == [
        "the invoice of customer acme"
    ]


async def test_an_agent_given_where_a_sub_agent_goes_works_and_anything_else_is_refused(
    rt: Runtime,
):
    # SubAgentTool(agent) was accepted and then failed every call with "tool 'helper' raised
    # AttributeError: 'Agent' object has no attribute 'start'"; SubAgent("helper") raised a
    # bare AttributeError. An Agent is now taken as SubAgent(agent); anything else is a
    # ConfigurationError that says what to pass.
    helper = Agent("helper", ScriptedModel(["found it"]), description="finds things")
    model = ScriptedModel([tool_call("helper", input="the invoice"), reply("done")])
    parent = Agent("lead", model, tools=[SubAgentTool(helper)])
    assert (await (await rt.start(parent, "go")).result()).output == "done"
    assert model.requests[1].messages[-1].content == "found it"
    assert model.requests[0].tools[0].description == "finds things"
    assert orchestrator_tools([helper])[0].toolkit.subagents["helper"].agent is helper
    for wrong in ("helper", None, SubAgentTool(helper)):
        with pytest.raises(ConfigurationError, match="SubAgent wraps an Agent"):
            SubAgent(wrong)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="takes a SubAgent or an Agent"):
            SubAgentTool(wrong)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="takes a SubAgent or an Agent"):
            orchestrator_tools([wrong])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        # taken: the description went to the provider as a number (refused on every request),
        # and a name of 5 raised "expected string or bytes-like object" from SubAgentTool
        (
            {"description": 5},
            r"SubAgent 'helper': description must be text \(what it does.*got int",
        ),
        ({"name": 5}, r"SubAgent 'helper': name: an Agent's name is text, got int"),
        ({"name": " "}, r"SubAgent 'helper': name: an agent's name ' ' shows no visible"),
    ],
)
def test_a_subagent_refuses_a_name_or_description_that_is_no_text(
    kwargs: dict[str, Any], words: str
):
    with pytest.raises(ConfigurationError, match=words):
        SubAgent(Agent("helper", ScriptedModel(["x"])), **kwargs)


@pytest.mark.parametrize("kwarg", ["history", "parent"])
async def test_a_session_turn_refuses_a_history_or_parent_of_its_own(rt: Runtime, kwarg: str):
    # a TypeError ("got multiple values for keyword argument 'history'") from inside
    session = SubAgent(Agent("helper", ScriptedModel(["one"]))).session(runtime=rt)

    with pytest.raises(ConfigurationError, match=rf"SubAgentSession.send takes no {kwarg}="):
        await session.send("hi", **{kwarg: []})
    assert session.runs == []  # nothing started
    assert await session.send("hi") == "one"


async def test_session_under_a_parent_registers_each_turn_as_a_child(rt: Runtime):
    gate = Gate("parent")
    parent = await rt.start(Agent("orchestrator", gate.model()), "go")
    session = SubAgent(fake_agent("helper", turns=0, answer="ok")).session(
        runtime=rt, parent=parent
    )
    await session.send("first")
    children = [c.run_id for c in rt.runs.tree.children(parent.run_id)]
    assert children == session.runs
    gate.open()
    await parent.result()


async def test_session_send_raises_the_childs_error(rt: Runtime):
    agent = fake_agent("helper", turns=3, limits=RunLimits(max_model_calls=1))
    session = SubAgent(agent).session(runtime=rt)
    with pytest.raises(Exception, match="max_model_calls"):
        await session.send("dig")


# --------------------------------------------------------------------------- events


async def test_invoke_with_events_returns_the_childs_subtree_events(rt: Runtime):
    grandchild = SubAgent(fake_agent("leaf", answer="leaf answer"))
    child_agent = fake_agent(
        "mid",
        tools=[SubAgentTool(grandchild)],
        script=[tool_call("leaf", input="look"), reply("mid answer")],
    )
    bystander_gate = Gate()
    bystander = await rt.start(
        fake_agent(
            "bystander", tools=[bystander_gate.tool()], script=[tool_call("hold"), reply("x")]
        ),
        "go",
    )
    await bystander_gate.entered.wait()

    result, events = await SubAgent(child_agent).invoke_with_events("go", runtime=rt)
    bystander_gate.open()
    await bystander.result()

    assert result.status is RunStatus.COMPLETED and result.output == "mid answer"
    runs = {e.run_id for e in events}
    (leaf_info,) = rt.runs.tree.children(result.run_id)
    assert runs == {result.run_id, leaf_info.run_id}
    assert bystander.run_id not in runs
    mine = [e.type for e in events if e.run_id == result.run_id]
    assert mine[0] == "run.started" and mine[-1] == "run.completed"
    assert "subagent.started" in mine and "subagent.completed" in mine
    assert [e.type for e in events if e.run_id == leaf_info.run_id][-1] == "run.completed"
    assert [e.offset for e in events] == sorted(e.offset for e in events)


async def test_invoke_without_a_runtime_uses_a_private_one():
    assert await SubAgent(fake_agent("solo", turns=1, answer="alone")).invoke("go") == "alone"


# --------------------------------------------------------------------------- in a parent


def delegating_parent(sub: SubAgent, seen: dict[str, Any]) -> Agent:
    @tool
    async def delegate(task: str, ctx: RunContext) -> str:
        """Hand the task to the sub-agent, as a child of this run."""
        seen["parent_run_id"] = ctx.run_id
        try:
            return await sub.invoke_in_parent(task, ctx)
        except RunCancelled as exc:
            seen["child_error"] = exc
            raise

    return fake_agent(
        "orchestrator", tools=[delegate], script=[tool_call("delegate", task="dig"), reply("done")]
    )


async def test_invoke_in_parent_runs_as_a_child_of_the_calling_run(
    rt: Runtime, recorder: EventRecorder
):
    seen: dict[str, Any] = {}
    child = fake_agent("researcher", answer="invoice 7")
    parent_agent = delegating_parent(SubAgent(child), seen)
    parent = await rt.start(parent_agent, "go")
    assert (await parent.result()).status is RunStatus.COMPLETED

    (child_info,) = rt.runs.tree.children(parent.run_id)
    assert seen["parent_run_id"] == parent.run_id
    assert child_info.agent_id == "researcher" and child_info.depth == 1
    assert parent_agent.model.requests[1].messages[-1].content == "invoice 7"
    rollups = [(e.type, e.child_run_id) for e in recorder.events if e.type.startswith("subagent.")]
    assert rollups == [
        ("subagent.started", child_info.run_id),
        ("subagent.completed", child_info.run_id),
    ]


async def test_invoke_in_parent_shares_the_parents_cancellation(
    rt: Runtime, recorder: EventRecorder, waiter: EventWaiter
):
    gate = Gate()
    seen: dict[str, Any] = {}
    child = fake_agent("researcher", tools=[gate.tool()], script=[tool_call("hold"), reply("x")])
    parent = await rt.start(delegating_parent(SubAgent(child), seen), "go")
    await gate.entered.wait()
    (child_info,) = rt.runs.tree.children(parent.run_id)

    await parent.cancel("enough", immediate=True, actor=OPERATOR)
    await waiter.event("steering.accepted", child_info.run_id)
    gate.open()
    result = await parent.result()

    assert result.status is RunStatus.CANCELLED
    assert child_info.status is RunStatus.CANCELLED
    assert isinstance(seen["child_error"], RunCancelled)
    assert f"parent run {parent.run_id} was cancelled" in seen["child_error"].reason


# --------------------------------------------------------------------------- SubAgentTool errors


async def test_a_parents_pause_holds_its_child_too(rt: Runtime):
    # Changed behaviour: a pause is passed down as a cancel is. The parent, waiting in its
    # SubAgentTool call, paused only once its child had finished; the child now pauses at its
    # own next boundary, and the parent's resume lets it go on
    gate = Gate("child-model")
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("done")])
    parent = await rt.start(
        Agent("parent", parent_model, tools=[SubAgentTool(Agent("child", gate.model("c")))]),
        "go",
    )
    await gate.entered.wait()
    await parent.pause(actor=OPERATOR)
    (child_info,) = rt.runs.tree.children(parent.run_id)
    child = rt.runs.get(child_info.run_id)
    assert child is not None
    paused = asyncio.get_running_loop().create_future()
    rt.bus.add_sink(
        lambda e: (
            paused.done()
            or (e.type == "run.paused" and e.run_id == child_info.run_id and paused.set_result(e))
        )
    )
    gate.open()
    await asyncio.wait_for(paused, 60)
    assert child_info.status is RunStatus.PAUSED
    assert len(parent_model.requests) == 1
    await parent.resume(actor=OPERATOR)
    assert (await child.result()).status is RunStatus.COMPLETED
    assert (await parent.result()).output == "done"


async def test_subagent_tool_reports_a_depth_limit_as_a_limit(rt: Runtime):
    leaf = SubAgent(fake_agent("leaf"))
    mid_model = ScriptedModel([tool_call("leaf", input="deeper"), reply("mid gave up")])
    mid = SubAgent(Agent("mid", mid_model, tools=[SubAgentTool(leaf)]))
    parent = await rt.start(
        fake_agent(
            "orchestrator",
            tools=[SubAgentTool(mid)],
            script=[tool_call("mid", input="go"), reply("done")],
            limits=RunLimits(max_depth=1),
        ),
        "go",
    )
    assert (await parent.result()).status is RunStatus.COMPLETED

    message = mid_model.requests[1].messages[-1]
    assert message.role == "tool" and message.metadata == {"error": True}
    assert "sub-agent 'leaf' could not start" in message.content
    assert (
        "sub-agent depth limit reached: this run is at depth 1 and its max_depth is 1, so it "
        "cannot start a sub-agent"
    ) in message.content
    (mid_info,) = rt.runs.tree.children(parent.run_id)
    assert rt.runs.tree.children(mid_info.run_id) == []


async def test_subagent_tool_reports_cancelled_and_failed_children(
    rt: Runtime, waiter: EventWaiter
):
    gate = Gate()
    held = SubAgent(fake_agent("held", tools=[gate.tool()], script=[tool_call("hold"), reply("x")]))
    broken = SubAgent(Agent("broken", ScriptedModel([])))  # its model has nothing to say
    parent_model = ScriptedModel(
        [tool_call("held", input="wait"), tool_call("broken", input="try"), reply("done")]
    )
    parent = await rt.start(
        Agent("orchestrator", parent_model, tools=[SubAgentTool(held), SubAgentTool(broken)]),
        "go",
    )
    await gate.entered.wait()
    (held_info,) = rt.runs.tree.children(parent.run_id)
    await rt.runs.get(held_info.run_id).cancel("not needed", actor=OPERATOR)
    gate.open()
    assert (await parent.result()).status is RunStatus.COMPLETED

    cancelled = tool_message(parent_model, 1)
    assert cancelled.metadata == {"error": True}
    assert cancelled.content == (
        f"sub-agent 'held' (run {held_info.run_id}) was cancelled by human \"alice\": not needed"
    )
    failed = tool_message(parent_model, 2)
    assert failed.metadata == {"error": True}
    # the child's run id once, then its error (it read "failed: run r-… failed: ...")
    broken_id = rt.runs.tree.children(parent.run_id)[1].run_id
    assert failed.content.startswith(
        f"sub-agent 'broken' (run {broken_id}) failed: ScriptExhaustedError: "
    )


def looper_its_supervisor_aborts() -> Agent:
    """An agent that calls ``search`` until its supervisor aborts it, at the second call."""

    @tool
    def search(query: str = "") -> str:
        """Search."""
        return "nothing"

    spec = SupervisorSpec(
        rules=[{"when": "tool_repeated", "tool": "search", "count": 2}], on_violation="abort"
    )
    return Agent(
        "looper",
        ScriptedModel([tool_call("search")] * 3 + [reply("never")]),
        tools=[search],
        supervisor=spec,
    )


async def test_subagent_tool_reports_a_child_its_supervisor_aborted_as_aborted(rt: Runtime):
    # the parent's model read "sub-agent 'looper' (run r-…) was cancelled: tool 'search'
    # called 2 times (limit 2)", as if someone had no more use for the work, with a reason
    # that did not say the child had been stopped for breaking its policy
    looper = looper_its_supervisor_aborts()
    parent_model = ScriptedModel([tool_call("looper", input="find it"), reply("done")])
    parent = await rt.start(Agent("orchestrator", parent_model, tools=[SubAgentTool(looper)]), "go")
    assert (await parent.result()).status is RunStatus.COMPLETED

    (child,) = rt.runs.tree.children(parent.run_id)
    assert child.status is RunStatus.ABORTED
    aborted = tool_message(parent_model, 1)
    assert aborted.metadata == {"error": True}
    assert aborted.content == (
        f"sub-agent 'looper' (run {child.run_id}) was aborted by middleware \"supervisor\" "
        "before it completed: tool 'search' called 2 times (limit 2)"
    )


async def test_subagent_invoke_raises_classified_errors(rt: Runtime):
    with pytest.raises(RunFailed) as failed:
        await SubAgent(Agent("broken", ScriptedModel([]))).invoke("go", runtime=rt)
    assert type(failed.value.__cause__).__name__ == "ScriptExhaustedError"

    gate = Gate()
    sub = SubAgent(fake_agent("held", tools=[gate.tool()], script=[tool_call("hold"), reply("x")]))
    handle = await sub.start("go", runtime=rt)
    await gate.entered.wait()
    await handle.cancel("stop", actor=OPERATOR)
    gate.open()
    with pytest.raises(RunCancelled, match="stop") as cancelled:
        await output_or_raise(handle, await handle.result())
    assert not isinstance(cancelled.value, RunAborted)


async def test_subagent_invoke_raises_run_aborted_for_a_child_its_supervisor_aborted(
    rt: Runtime,
):
    # it raised RunCancelled ("was cancelled"), as for a caller that gave up on the work:
    # a program could tell an abort only by reading the run's status
    looper = looper_its_supervisor_aborts()
    with pytest.raises(RunAborted) as aborted:
        await SubAgent(looper).invoke("find it", runtime=rt)
    assert isinstance(aborted.value, RunCancelled)  # handled alike by who does not care
    assert aborted.value.by == 'middleware "supervisor"'
    assert str(aborted.value).endswith(
        "was aborted by middleware \"supervisor\": tool 'search' called 2 times (limit 2)"
    )


async def test_subagent_tool_needs_an_input(rt: Runtime):
    parent_model = ScriptedModel([tool_call("researcher", input="  "), reply("done")])
    parent = await rt.start(
        Agent(
            "orchestrator", parent_model, tools=[SubAgentTool(SubAgent(fake_agent("researcher")))]
        ),
        "go",
    )
    await parent.result()
    message = tool_message(parent_model, 1)
    assert message.metadata == {"error": True}
    assert "needs a non-empty string 'input'" in message.content
    assert rt.runs.tree.children(parent.run_id) == []


def test_a_subagent_tool_whose_name_providers_refuse_says_how_to_name_it():
    # The agent's name is the tool's name by default; one with a space was refused with
    # "(pass name=... to @tool)", advice for a function tool that a SubAgentTool cannot take.
    agent = Agent("billing expert", ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError) as refused:
        SubAgentTool(agent)
    assert "SubAgentTool(..., name='billing_expert')" in str(refused.value)
    assert "@tool" not in str(refused.value)
    assert SubAgentTool(agent, name="billing_expert").name == "billing_expert"


async def test_invoke_with_events_refuses_a_blank_run_id_as_start_does(rt: Runtime):
    # invoke_with_events read run_id="" as "none given" and started the child under a new
    # id, where rt.start, agent.run and run_stream refuse it: the caller, who collects the
    # events by that id, never learnt which run it got.
    sub = SubAgent(Agent("a", ScriptedModel(["x"])))
    with pytest.raises(ValueError, match="run_id"):
        await sub.invoke_with_events("go", runtime=rt, run_id="")
    assert rt.runs.list() == []


async def test_a_childs_huge_error_reaches_the_parent_model_cut(rt: Runtime):
    # a child's error went whole into the parent's conversation: a provider error echoing a
    # large request (5 MB here) overflowed the parent's next model call
    def explode(request: Any) -> str:
        raise RuntimeError("echo " + "x" * 5_000_000)

    child = SubAgent(Agent("child", FunctionModel(explode)))
    parent_model = ScriptedModel([tool_call("child", input="try"), reply("done")])
    parent = await rt.start(Agent("orchestrator", parent_model, tools=[SubAgentTool(child)]), "go")
    assert (await parent.result()).status is RunStatus.COMPLETED
    failed = tool_message(parent_model, 1)
    assert failed.metadata == {"error": True}
    assert "failed: RuntimeError: echo xxx" in failed.content
    assert len(failed.content) < 5_000
    assert failed.content.endswith(f"({len('RuntimeError: echo ') + 5_000_000} chars)")
    (child_info,) = rt.runs.tree.children(parent.run_id)
    child_result = await rt.runs.get(child_info.run_id).result()
    assert child_result.error is not None and len(child_result.error) > 5_000_000  # kept whole


# --------------------------------------------------------------------------- model allowlists


async def _narrowed_parent(rt: Runtime, child: Agent) -> tuple[Any, ScriptedModel]:
    """A parent allowed models big and small, narrowed to small by steering while its first
    model call is held, which then calls ``child`` through a ``SubAgentTool``."""
    gate = Gate("parent")
    calls = 0

    async def parent_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await gate.wait()
            return tool_call("child", input="look")
        return "p"

    parent = Agent(
        "parent",
        model=FunctionModel(parent_fn),
        models=["big", "small"],
        tools=[SubAgentTool(SubAgent(child))],
    )
    handle = await rt.start(parent, "go")
    await gate.entered.wait()
    receipt = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=OPERATOR,
            kind=SteeringKind.CONSTRAIN_MODEL,
            payload={"models": ["small"]},
        )
    )
    assert receipt.status == "accepted"
    gate.open()
    return handle, parent


async def test_a_child_may_not_use_a_model_its_parent_was_narrowed_away_from(rt: Runtime):
    """``constrain_model`` took ``big`` away from the parent; its child, whose agent lists
    ``big`` first, ran on ``big`` all the same. A child gets no more than its parent was left
    with: it runs with the models its ancestors were not narrowed away from."""
    seen: list[str | None] = []

    async def child_fn(request: Any) -> str:
        seen.append(request.model)
        return "c"

    child = Agent("child", model=FunctionModel(child_fn), models=["big", "small"])
    handle, _ = await _narrowed_parent(rt, child)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert seen == ["small"]
    [child_info] = [i for i in rt.runs.list() if i.parent_run_id == handle.run_id]
    assert child_info.models == ("small",)
    assert child_info.withheld_models == {"big"}  # and from its own children in turn


async def test_a_child_whose_every_model_its_parent_was_narrowed_away_from_does_not_start(
    rt: Runtime,
):
    """The child's only model was taken away from its parent: it does not start, and the
    parent model is told why (an error tool result), not a run on the withheld model."""
    child_model = ScriptedModel(["c"], name="big")
    child = Agent("child", model=child_model)
    handle, _ = await _narrowed_parent(rt, child)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert child_model.requests == []
    [answer] = [m for m in result.messages if m.role == "tool"]
    assert "could not start" in answer.content and "'big'" in answer.content
    assert "constrain_model" in answer.content
    assert [i for i in rt.runs.list() if i.parent_run_id == handle.run_id] == []


async def test_a_child_with_a_model_of_its_own_is_not_bound_by_its_parents_list(rt: Runtime):
    """Only what was taken away is withheld: a child on a model its parent never listed
    still runs on it after the parent was narrowed."""
    child_model = ScriptedModel(["c"], name="other")
    child = Agent("child", model=child_model)
    handle, _ = await _narrowed_parent(rt, child)
    assert (await handle.result()).status is RunStatus.COMPLETED
    assert [r.model for r in child_model.requests] == ["other"]


async def test_starting_a_child_on_a_withheld_model_by_hand_is_refused(rt: Runtime):
    """``rt.start(..., parent=...)`` takes the same bound as a ``SubAgentTool``: a child whose
    every model was taken from its parent is refused with ``ModelsWithheld`` (a
    ``ConfigurationError``) and nothing is registered; a grandchild inherits the bound."""
    first, hold = Gate("first"), Gate("hold")
    calls = 0

    async def parent_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await first.wait()
            return tool_call("hold")
        return "p"

    parent = Agent(
        "parent", model=FunctionModel(parent_fn), models=["big", "small"], tools=[hold.tool()]
    )
    handle = await rt.start(parent, "go")
    await first.entered.wait()
    receipt = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=OPERATOR,
            kind=SteeringKind.CONSTRAIN_MODEL,
            payload={"models": ["small"]},
        )
    )
    assert receipt.status == "accepted"
    first.open()
    await hold.entered.wait()  # the narrowing landed after the response: the run holds there
    before = len(rt.runs.list())
    with pytest.raises(ModelsWithheld, match="'big'") as refused:
        await rt.start(Agent("child", model=ScriptedModel(["c"], name="big")), "x", parent=handle)
    assert isinstance(refused.value, ConfigurationError)
    assert len(rt.runs.list()) == before
    other = await rt.start(
        Agent("child", model=Gate("other").model(), models=["other"]), "x", parent=handle
    )
    with pytest.raises(ModelsWithheld):
        await rt.start(
            Agent("grandchild", model=ScriptedModel(["g"], name="big")), "x", parent=other
        )
    await other.cancel()
    hold.open()
    assert (await handle.result()).status is RunStatus.COMPLETED


# --------------------------------------------------------------------------- tool allowlists


def _dangerous_tool(ran: list[str]) -> Any:
    @tool
    async def delete_db() -> str:
        """Delete the database."""
        ran.append("delete_db")
        return "deleted"

    return delete_db


def _child_that_tries(name: str, ran: list[str], offered: list[list[str]]) -> Agent:
    """An agent granted ``delete_db`` and ``lookup`` whose model records the tools it is
    offered, calls ``delete_db`` once, then answers."""
    calls = 0

    async def child_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        offered.append(sorted(t.name for t in request.tools))
        return tool_call("delete_db") if calls == 1 else "c"

    @tool
    async def lookup() -> str:
        """Look something up."""
        return "found"

    return Agent(name, model=FunctionModel(child_fn), tools=[_dangerous_tool(ran), lookup])


async def _narrow_tools(rt: Runtime, handle: Any, tools: list[str]) -> None:
    receipt = await rt.submit(
        SteeringCommand(
            target=SteeringTarget.agent_run(handle.run_id),
            actor=OPERATOR,
            kind=SteeringKind.CONSTRAIN_TOOLS,
            payload={"tools": tools},
        )
    )
    assert receipt.status == "accepted"


async def test_a_sub_agent_tool_child_gets_no_tool_its_parent_was_narrowed_away_from(
    rt: Runtime,
):
    """``constrain_tools`` took ``delete_db`` away from the parent; the child its
    ``SubAgentTool`` starts has ``delete_db`` on its own agent, and could call it. A child gets
    no more than its parent was left with: it is not offered the tool, and a call to it is an
    error result (the tool never runs)."""
    ran: list[str] = []
    offered: list[list[str]] = []
    child = _child_that_tries("child", ran, offered)
    gate = Gate("parent")
    calls = 0

    async def parent_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await gate.wait()
            return tool_call("child", input="clean up")
        return "p"

    parent = Agent(
        "parent",
        model=FunctionModel(parent_fn),
        tools=[_dangerous_tool(ran), SubAgentTool(SubAgent(child))],
    )
    handle = await rt.start(parent, "go")
    await gate.entered.wait()
    await _narrow_tools(rt, handle, ["child"])
    gate.open()
    assert (await handle.result()).status is RunStatus.COMPLETED
    assert ran == []
    assert offered == [["lookup"], ["lookup"]]
    [child_info] = rt.runs.tree.children(handle.run_id)
    assert child_info.tools == {"lookup"}
    assert child_info.withheld_tools == {"delete_db"}  # and from its own children in turn
    child_result = await rt.runs.get(child_info.run_id).result()
    [refused] = [m for m in child_result.messages if m.role == "tool"]
    assert refused.metadata.get("error") is True
    assert "unknown tool 'delete_db'" in refused.content and "available: lookup" in refused.content


async def test_children_started_by_hand_get_no_tool_their_ancestor_was_narrowed_away_from(
    rt: Runtime,
):
    """``SubAgent.start`` and ``rt.start(parent=...)`` take the same bound as a
    ``SubAgentTool`` (a child naming a withheld tool at the start is refused); a grandchild
    inherits it, and a child left with no tool at all still runs (tools are optional)."""
    ran: list[str] = []
    first, hold = Gate("first"), Gate("hold")
    calls = 0

    async def parent_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await first.wait()
            return tool_call("hold")
        return "p"

    parent = Agent(
        "parent", model=FunctionModel(parent_fn), tools=[hold.tool(), _dangerous_tool(ran)]
    )
    handle = await rt.start(parent, "go")
    await first.entered.wait()
    await _narrow_tools(rt, handle, ["hold"])
    first.open()
    await hold.entered.wait()  # the narrowing landed after the response: the run holds there

    offered: list[list[str]] = []
    by_sub_agent = await SubAgent(_child_that_tries("child", ran, offered)).start(
        "x", runtime=rt, parent=handle
    )
    assert (await by_sub_agent.result()).status is RunStatus.COMPLETED
    assert offered == [["lookup"], ["lookup"]]

    offered.clear()
    with pytest.raises(ToolsWithheld, match="'delete_db'"):  # asked for by name: refused
        await rt.start(
            _child_that_tries("child", ran, offered), "x", parent=handle, tools=["delete_db"]
        )

    middle_gate = Gate("middle")
    middle = await rt.start(
        Agent("middle", model=middle_gate.model(), tools=[_dangerous_tool(ran)]),
        "x",
        parent=handle,
    )
    assert middle.info.tools == frozenset()
    offered.clear()
    grandchild = await rt.start(_child_that_tries("grandchild", ran, offered), "x", parent=middle)
    assert (await grandchild.result()).status is RunStatus.COMPLETED
    assert offered == [["lookup"], ["lookup"]]
    assert grandchild.info.withheld_tools == {"delete_db"}
    middle_gate.open()
    hold.open()
    assert (await handle.result()).status is RunStatus.COMPLETED
    assert ran == []


async def test_a_child_keeps_a_tool_its_parent_never_had_taken_away(rt: Runtime):
    """Only what was taken away is withheld: a narrowing that left ``delete_db`` with the
    parent withholds nothing from its child, and the child may call it."""
    ran: list[str] = []
    first, hold = Gate("first"), Gate("hold")
    calls = 0

    async def parent_fn(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            await first.wait()
            return tool_call("hold")
        return "p"

    parent = Agent(
        "parent", model=FunctionModel(parent_fn), tools=[hold.tool(), _dangerous_tool(ran)]
    )
    handle = await rt.start(parent, "go")
    await first.entered.wait()
    await _narrow_tools(rt, handle, ["hold", "delete_db"])
    first.open()
    await hold.entered.wait()
    offered: list[list[str]] = []
    child = await rt.start(_child_that_tries("child", ran, offered), "x", parent=handle)
    assert (await child.result()).status is RunStatus.COMPLETED
    assert offered == [["delete_db", "lookup"], ["delete_db", "lookup"]]
    assert ran == ["delete_db"]
    assert child.info.withheld_tools == frozenset()
    hold.open()
    assert (await handle.result()).status is RunStatus.COMPLETED
