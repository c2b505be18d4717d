"""A call to a tool the run does not have: an error result by default, or a failed run."""

from __future__ import annotations

import pytest

from tinyagents import Agent, RunStatus, Runtime, SubAgentTool, tool
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import Gate, ScriptedModel, reply, tool_call, tool_calls


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


async def test_unknown_tool_is_an_error_result_by_default() -> None:
    model = ScriptedModel([tool_call("delete_everything"), reply("sorry")])
    async with Runtime() as rt:
        result = await (await rt.start(Agent("a", model, tools=[lookup]), "go")).result()
    assert result.status is RunStatus.COMPLETED
    message = model.requests[1].messages[-1]
    assert message.role == "tool" and message.metadata == {"error": True}
    assert "unknown tool 'delete_everything'" in message.content and "lookup" in message.content


async def test_unknown_tool_can_fail_the_run() -> None:
    model = ScriptedModel([tool_call("delete_everything"), reply("never reached")])
    agent = Agent("a", model, tools=[lookup], unknown_tools="fail")
    async with Runtime() as rt:
        result = await (await rt.start(agent, "go")).result()
    assert result.status is RunStatus.FAILED
    assert "ToolError" in (result.error or "") and "delete_everything" in (result.error or "")
    assert len(model.requests) == 1


async def test_an_unknown_tool_that_fails_the_run_spends_no_tool_call() -> None:
    # the call never ran, as with the default error result (which gives the call back): it
    # was still counted on the run and on every ancestor, so a parent's budget lost a tool
    # call to a child that failed on a tool it does not have
    child = Agent("child", ScriptedModel([tool_call("nope")]), unknown_tools="fail")
    parent_model = ScriptedModel([tool_call("child", input="look it up"), "done"])
    parent = Agent("parent", parent_model, tools=[SubAgentTool(child)])
    async with Runtime() as rt:
        handle = await rt.start(parent, "go")
        result = await handle.result()
        (child_info,) = rt.tree(handle.run_id).children
        child_result = await rt.runs.get(child_info.info.run_id).result()  # type: ignore[union-attr]
    assert child_result.status is RunStatus.FAILED and child_result.usage["tool_calls"] == 0
    assert "failed: ToolError" in parent_model.requests[1].messages[-1].content
    assert (result.status, result.usage["tool_calls"]) == (RunStatus.COMPLETED, 1)


def test_unknown_tools_setting_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown_tools"):
        Agent("a", ScriptedModel([]), unknown_tools="ignore")  # type: ignore[arg-type]


@pytest.mark.parametrize("unknown_tools", ["error_result", "fail"])
async def test_a_call_to_a_tool_steering_withdrew_after_the_model_called_it_is_an_error_result(
    unknown_tools: str,
) -> None:
    # the model called a tool it was offered; an operator narrowed the run's tools while the
    # call before it ran: with unknown_tools="fail" the run failed ("the model called
    # 'lookup', which run ... does not have"), and by default the model was told it had
    # called an unknown tool
    gate = Gate()
    model = ScriptedModel([tool_calls(tool_call("hold"), tool_call("lookup", key="k")), "ok"])
    agent = Agent("a", model, tools=[gate.tool(), lookup], unknown_tools=unknown_tools)  # type: ignore[arg-type]
    async with Runtime() as rt:
        handle = await rt.start(agent, "go")
        await gate.entered.wait()
        await handle.constrain_tools(["hold"])
        gate.open()
        result = await handle.result()

    assert (result.status, result.usage["tool_calls"]) == (RunStatus.COMPLETED, 1)
    answer = model.requests[1].messages[-1]
    assert answer.metadata == {"error": True}
    assert answer.content == (
        "tool 'lookup' was withdrawn from this run (its tools were narrowed) after you called "
        "it; available: hold. Call one of those."
    )
