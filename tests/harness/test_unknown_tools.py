"""A call to a tool the run does not have: an error result by default, or a failed run."""

from __future__ import annotations

import pytest

from tinyagents import Agent, RunStatus, Runtime, tool
from tinyagents.errors import ConfigurationError
from tinyagents.testkit import ScriptedModel, reply, tool_call


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


def test_unknown_tools_setting_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="unknown_tools"):
        Agent("a", ScriptedModel([]), unknown_tools="ignore")  # type: ignore[arg-type]
