"""RunLimits.behavior: 'error' raises / errors, 'stop_with_partial' hands back what there is."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from tinyagents import (
    Agent,
    ModelRetry,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    tool,
)
from tinyagents.errors import RunFailed, RunLimitExceeded
from tinyagents.harness import ModelResponse, Usage
from tinyagents.testkit import FunctionModel, ScriptedModel, reply, tool_call


@tool
def note(text: str) -> str:
    """Write a note."""
    return f"noted {text}"


def looping_child(behavior: str) -> SubAgent:
    script = [tool_call("note", text="a"), tool_call("note", text="b"), tool_call("note", text="c")]
    for response in script:
        response.text = "partial findings so far"
    model = ScriptedModel(script)
    limits = RunLimits(max_model_calls=2, behavior=behavior)  # type: ignore[arg-type]
    return SubAgent(Agent("child", model, tools=[note], limits=limits))


async def test_error_behavior_raises_with_the_numbers() -> None:
    async with Runtime() as rt:
        with pytest.raises(RunLimitExceeded) as info:
            await looping_child("error").invoke("go", runtime=rt)
    assert (info.value.limit, info.value.used, info.value.allowed) == ("max_model_calls", 2, 2)


async def test_stop_with_partial_returns_the_partial_output() -> None:
    async with Runtime() as rt:
        child = looping_child("stop_with_partial")
        output = await child.invoke("go", runtime=rt)
        assert output == "partial findings so far"
        (info,) = [i for i in rt.runs.list() if i.agent_id == "child"]
        assert info.status is RunStatus.LIMIT_EXCEEDED


async def test_subagent_tool_marks_partial_output_for_the_parent() -> None:
    child = looping_child("stop_with_partial")
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("ok")])
    parent = Agent("parent", parent_model, tools=[SubAgentTool(child)])
    async with Runtime() as rt:
        result = await (await rt.start(parent, "task")).result()
    assert result.status is RunStatus.COMPLETED
    tool_message = parent_model.requests[1].messages[-1]
    assert tool_message.role == "tool"
    assert not tool_message.metadata.get("error")
    assert tool_message.content.startswith("[partial: sub-agent 'child'")
    assert "max_model_calls" in tool_message.content
    assert tool_message.content.endswith("partial findings so far")


async def test_a_partial_child_stopped_by_its_parents_budget_names_the_parent() -> None:
    # the child's own limit (2 model calls) is not what stopped it: its parent's one tool
    # call left, which the child's first call spent
    child = looping_child("stop_with_partial")
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("ok")])
    limits = RunLimits(max_tool_calls=2)
    parent = Agent("parent", parent_model, tools=[SubAgentTool(child)], limits=limits)
    result = await parent.run("task")
    told = parent_model.requests[1].messages[-1].content
    assert told.startswith("[partial: sub-agent 'child'")
    assert "its configured limit" not in told
    assert f"stopped when run {result.run_id} above it ran out of its budget:" in told
    assert told.endswith("partial findings so far")


async def test_a_deadline_ends_a_model_call_that_never_answers() -> None:
    # the deadline was checked before calls only: a model that never answered held the run
    # "running" forever, long past deadline_s
    async def never(request: object) -> str:
        await asyncio.Event().wait()
        return "unreachable"

    async with Runtime() as rt:
        agent = Agent("a", FunctionModel(never), limits=RunLimits(deadline_s=0.2))
        handle = await rt.start(agent, "go")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "deadline_s" in (result.error or "")


async def test_a_deadline_bounds_a_tool_that_hangs() -> None:
    # tool_timeout_s (300 s here) was the only bound on a tool in flight
    @tool
    async def hangs() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedModel([tool_call("hangs"), reply("done")])
    limits = RunLimits(deadline_s=0.2, tool_timeout_s=300)
    async with Runtime() as rt:
        handle = await rt.start(Agent("a", model, tools=[hangs], limits=limits), "go")
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "deadline_s" in (result.error or "")


async def test_a_deadline_bounds_a_model_call_whose_cancel_cleanup_does_not_finish() -> None:
    # The deadline cancelled the request, then waited for it to end: a model whose cleanup
    # (a connection it closes in ``finally``) never finished held the run past deadline_s
    # for ever. The run no longer waits for that cleanup, which goes on alone.
    release = asyncio.Event()

    async def sticky(request: object) -> str:
        try:
            await asyncio.Event().wait()
        finally:
            await release.wait()
        return "unreachable"

    try:
        async with Runtime() as rt:
            agent = Agent("a", FunctionModel(sticky), limits=RunLimits(deadline_s=0.2))
            handle = await rt.start(agent, "go")
            result = await asyncio.wait_for(handle.result(), 60)
    finally:
        release.set()
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "deadline_s" in (result.error or "")


def test_a_limit_of_zero_says_none_was_allowed() -> None:
    # "used 0, allowed 0" told nobody what happened: a limit of 0 allows nothing at all
    assert str(RunLimitExceeded("max_tool_calls", 0, 0, run_id="r-1")) == (
        "run limit 'max_tool_calls' exceeded in run r-1: none allowed, its limit is 0"
    )
    batch = RunLimitExceeded("max_tool_calls", 2, 0, detail="0 made; the 2 tool calls left")
    assert str(batch) == (
        "run limit 'max_tool_calls' exceeded: used 2; none allowed, its limit is 0 "
        "(0 made; the 2 tool calls left)"
    )
    assert "used 3, allowed 3" in str(RunLimitExceeded("max_model_calls", 3, 3))
    # a limit whose numbers are not known says so, rather than "used None, allowed None"
    assert str(RunLimitExceeded("unknown", None, None, run_id="r-2")) == (
        "run limit 'unknown' exceeded in run r-2"
    )


async def test_a_run_allowed_no_tool_call_says_so() -> None:
    model = ScriptedModel([tool_call("note", text="a")])
    agent = Agent("a", model, tools=[note], limits=RunLimits(max_tool_calls=0))
    result = await agent.run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert result.error is not None and "used 0, allowed 0" not in result.error
    assert result.error.endswith(f"exceeded in run {result.run_id}: none allowed, its limit is 0")


async def test_a_child_left_no_budget_tells_its_parent_so() -> None:
    # the parent's one tool call starts the child, whose limit is what the parent has left: 0
    child = SubAgent(
        Agent("child", ScriptedModel([tool_call("note", text="a"), "x"]), tools=[note])
    )
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("done")])
    parent = Agent(
        "p", parent_model, tools=[SubAgentTool(child)], limits=RunLimits(max_tool_calls=1)
    )
    await parent.run("go")
    told = next(m for m in parent_model.requests[1].messages if m.role == "tool").content
    assert "used 0 of 0" not in told
    assert "above it ran out of its budget: max_tool_calls (used 1, allowed 1)," in told


async def test_a_child_that_spent_its_parents_budget_names_the_parent() -> None:
    # the child has no limit of its own: it is given the 2 tool calls its parent has left,
    # and spending them spends the parent's budget, not one the child was configured with
    script = [tool_call("note", text=t) for t in "abc"] + ["x"]
    child = SubAgent(Agent("child", ScriptedModel(script), tools=[note]))
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("done")])
    parent = Agent(
        "p", parent_model, tools=[SubAgentTool(child)], limits=RunLimits(max_tool_calls=3)
    )
    result = await parent.run("go")
    told = next(m for m in parent_model.requests[1].messages if m.role == "tool").content
    assert "its configured limit" not in told
    assert (
        f"stopped because run {result.run_id} above it ran out of its budget: max_tool_calls "
        "(used 3, allowed 3)"
    ) in told


class Finding(BaseModel):
    claim: str


def typed_child(answer: str) -> SubAgent:
    """A child with ``output_type=Finding`` whose answer ``answer`` takes it past its token
    budget: the answer is its partial output."""
    model = ScriptedModel(
        [ModelResponse(text=answer, usage=Usage(input_tokens=5, output_tokens=50))]
    )
    limits = RunLimits(max_tokens=10, behavior="stop_with_partial")
    return SubAgent(Agent("child", model, output_type=Finding, limits=limits))


async def test_stop_with_partial_hands_back_typed_output_when_the_text_is_one() -> None:
    # With Agent(output_type=...), SubAgent.invoke returned the partial output as raw text,
    # so a caller typed for a Finding got a str; the text is now read as the run's answer is.
    async with Runtime() as rt:
        output = await typed_child('```json\n{"claim": "two charges"}\n```').invoke(
            "go", runtime=rt
        )
    assert output == Finding(claim="two charges")


async def test_stop_with_partial_without_typed_output_raises_the_limit() -> None:
    # Text that is no Finding is no partial Finding: the limit is raised, saying why, rather
    # than a str handed back where a Finding is expected.
    async with Runtime() as rt:
        child = typed_child('{"claim": "two cha')
        with pytest.raises(RunLimitExceeded) as info:
            await child.invoke("go", runtime=rt)
        (run,) = [i for i in rt.runs.list() if i.agent_id == "child"]
        assert run.status is RunStatus.LIMIT_EXCEEDED
    assert info.value.limit == "max_tokens" and (info.value.used, info.value.allowed) == (55, 10)
    assert "stop_with_partial" in str(info.value)
    assert "its partial output is no valid Finding" in str(info.value)


class Total(BaseModel):
    total: int


@pytest.mark.parametrize(
    ("first", "answers", "output"),
    [
        (ModelResponse(text=""), [ModelResponse(text=""), reply("42")], "42"),
        ('{"total": "x"}', ['{"total": "y"}', '{"total": 42}'], Total(total=42)),
    ],
    ids=["empty_answer", "invalid_output"],
)
async def test_a_run_continued_after_an_ask_it_never_sent_gets_its_own_ask(
    first: ModelResponse | str, answers: list[ModelResponse | str], output: object
) -> None:
    """A run whose budget ran out right after it asked the model for an answer (an empty
    one, or one that is not valid output) ends on that ask; a run that continues its
    transcript (``input=[]``) sends it. Its model's first unusable answer failed that run at
    once, as if this run had asked already: asks are counted per run, as pydantic-ai counts
    its retries."""
    output_type = None if isinstance(output, str) else Total
    one = await Agent(
        "a",
        ScriptedModel([first]),
        output_type=output_type,
        limits=RunLimits(max_model_calls=1),
    ).run("total?")
    assert one.status is RunStatus.LIMIT_EXCEEDED
    assert one.messages[-1].metadata.get("retry") is not None  # it ends on the ask
    model = ScriptedModel(answers)
    two = await Agent("a", model, output_type=output_type).run([], history=one.messages)
    assert (two.status, two.output) == (RunStatus.COMPLETED, output)
    assert len(model.requests) == 2


# --------------------------------------------------------------------------- validators


def validated_child(validator: Any, *, output_type: Any = None, answer: str = "") -> SubAgent:
    """A ``stop_with_partial`` child with ``validator`` as its output validator, stopped at
    its limit: text beside tool calls (``looping_child``), or, typed, an answer past its
    token budget (``typed_child``)."""
    if output_type is None:
        agent = looping_child("stop_with_partial").agent
    else:
        agent = typed_child(answer).agent
    agent.output_validator(validator)
    return SubAgent(agent)


async def test_stop_with_partial_output_goes_through_the_childs_output_validators() -> None:
    # The partial output handed back was read past the child's output validators: a
    # validator that rewrites (or checks) the child's output never saw it, and the caller
    # got what the validators would have refused or changed.
    seen: list[tuple[str, bool]] = []

    def shout(ctx: RunContext, text: str) -> str:
        seen.append((text, ctx.partial_output))
        return text.upper()

    async with Runtime() as rt:
        output = await validated_child(shout).invoke("go", runtime=rt)
        done = Agent("done", ScriptedModel(["all done"]))
        done.output_validator(shout)
        assert (await done.run("go")).output == "ALL DONE"
    assert output == "PARTIAL FINDINGS SO FAR"
    assert seen == [("partial findings so far", True), ("all done", False)]


async def test_a_typed_partial_output_goes_through_the_validators_as_the_type() -> None:
    def checked(finding: Finding) -> Finding:
        return Finding(claim=f"checked: {finding.claim}")

    async with Runtime() as rt:
        child = validated_child(checked, output_type=Finding, answer='{"claim": "two charges"}')
        output = await child.invoke("go", runtime=rt)
    assert output == Finding(claim="checked: two charges")


@pytest.mark.parametrize("typed", [False, True], ids=["text", "typed"])
async def test_a_partial_output_a_validator_refuses_raises_the_limit_saying_why(
    typed: bool,
) -> None:
    # A refusal (ModelRetry) asks the model again at a completed answer; a run stopped at
    # its limit has no turn left for that, so there is no partial output to hand back: the
    # limit is raised, with the validator's message, never the refused output unvalidated.
    def cite(output: Any) -> Any:
        raise ModelRetry("cite a source")

    child = validated_child(
        cite, output_type=Finding if typed else None, answer='{"claim": "two charges"}'
    )
    async with Runtime() as rt:
        with pytest.raises(RunLimitExceeded) as info:
            await child.invoke("go", runtime=rt)
    limit = ("max_tokens", 55, 10) if typed else ("max_model_calls", 2, 2)
    assert (info.value.limit, info.value.used, info.value.allowed) == limit
    assert "stop_with_partial: an output validator refused its partial output: cite a source" in (
        str(info.value)
    )


async def test_a_validator_raising_on_the_partial_output_fails_the_invoke() -> None:
    def broken(text: str) -> str:
        raise ValueError("validator bug")

    async with Runtime() as rt:
        with pytest.raises(RunFailed, match="ValueError: validator bug") as info:
            await validated_child(broken).invoke("go", runtime=rt)
    assert isinstance(info.value.__cause__, ValueError)


async def test_subagent_tool_hands_the_parent_the_validated_partial_output() -> None:
    child = validated_child(lambda text: text.upper())
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("ok")])
    parent = Agent("parent", parent_model, tools=[SubAgentTool(child)])
    await parent.run("task")
    told = parent_model.requests[1].messages[-1]
    assert told.content.startswith("[partial: sub-agent 'child'")
    assert told.content.endswith("\nPARTIAL FINDINGS SO FAR")
    assert not told.metadata.get("error")


async def test_subagent_tool_tells_the_parent_a_validator_refused_the_partial_output() -> None:
    # The parent model was given the text the child's validator refuses; it is told the
    # child stopped at its limit with no output its validators accept instead (an error
    # result), without the refused text.
    def cite(text: str) -> str:
        raise ModelRetry("cite a source")

    parent_model = ScriptedModel([tool_call("child", input="go"), reply("ok")])
    parent = Agent("parent", parent_model, tools=[SubAgentTool(validated_child(cite))])
    await parent.run("task")
    told = parent_model.requests[1].messages[-1]
    assert told.metadata.get("error")
    assert "it hit its configured limit max_model_calls" in told.content
    assert "an output validator refused its partial output: cite a source" in told.content
    assert "partial findings so far" not in told.content
