"""A ``tool_choice`` forcing a tool a request does not offer, over litellm's real HTTP path
against the testkit server's ``mode="openai"`` (OpenAI refuses such a request with a 400)."""

from __future__ import annotations

import logging
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

from typing import Any

import pytest

from tinyagents import Agent, LiteLLMModel, Middleware, RunStatus, Runtime, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import ModelRequest
from tinyagents.testkit import EventRecorder, OpenAICompatServer, tool_call

FORCE_ADD = {"type": "function", "function": {"name": "add"}}
FORCE_SUB = {"type": "function", "function": {"name": "sub"}}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def sub(a: int, b: int) -> int:
    """Subtract b from a."""
    return a - b


def model_for(server: OpenAICompatServer, **kw: Any) -> LiteLLMModel:
    kw.setdefault("max_retries", 0)  # a refusal must be the first error, not retried away
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", **kw)


async def test_a_forced_tool_steering_took_away_is_not_forced() -> None:
    # A named tool_choice whose tool the request does not offer (constrain_tools took it
    # away) went out as it was: OpenAI refuses it ("not found in 'tools'"), so every request
    # of the steered run failed. It is now left out (the model chooses) while the tool is
    # not offered.
    async with (
        OpenAICompatServer([tool_call("sub", a=3, b=1), "2"], mode="openai") as server,
        Runtime() as rt,
    ):
        agent = Agent("calc", model_for(server, tool_choice=FORCE_ADD), tools=[add, sub])
        handle = await rt.start(agent, "3-1?")
        await handle.constrain_tools(["sub"])  # lands before the first model call
        result = await handle.result()
    assert server.refusals == []
    assert (result.status, result.output) == (RunStatus.COMPLETED, "2")
    first = server.requests[0]
    assert [spec["function"]["name"] for spec in first["tools"]] == ["sub"]
    assert "tool_choice" not in first


async def test_a_forced_tool_the_run_was_not_granted_is_not_forced() -> None:
    async with (
        OpenAICompatServer(["5"], mode="openai") as server,
        Runtime() as rt,
    ):
        agent = Agent("calc", model_for(server, tool_choice=FORCE_ADD), tools=[add, sub])
        result = await (await rt.start(agent, "2+3?", tools=["sub"])).result()
    assert server.refusals == []
    assert result.output == "5"
    assert "tool_choice" not in server.requests[0]


class ForceAdd(Middleware):
    name = "force-add"

    async def model(self, request: ModelRequest, ctx: Any, call_next: Any) -> Any:
        request.settings["tool_choice"] = FORCE_ADD
        return await call_next(request)


async def test_a_middlewares_forced_tool_is_sent_only_while_offered() -> None:
    script = [tool_call("add", a=2, b=3), "5"]
    async with (
        OpenAICompatServer(script, mode="openai") as server,
        Runtime() as rt,
    ):
        agent = Agent("calc", model_for(server), tools=[add, sub], middleware=[ForceAdd()])
        forced = await (await rt.start(agent, "2+3?")).result()
        server.add("4")
        withheld = await (await rt.start(agent, "2+2?", tools=["sub"])).result()
    assert server.refusals == []
    assert (forced.output, withheld.output) == ("5", "4")
    assert server.requests[0]["tool_choice"] == FORCE_ADD
    assert "tool_choice" not in server.requests[-1]


async def test_a_forced_tool_the_agent_does_not_have_is_refused_when_the_agent_is_made() -> None:
    async with OpenAICompatServer(mode="openai") as server:
        model = model_for(server, tool_choice=FORCE_SUB)
        with pytest.raises(ConfigurationError, match=r"tool_choice forces tool 'sub'"):
            Agent("calc", model, tools=[add])
        # an agent without tools may share it: its requests carry no tool settings
        server.add("hello")
        assert (await Agent("chat", model).run("hi")).output == "hello"
    assert "tool_choice" not in server.requests[0]


# --------------------------------------------------------------------------- said, not silent


async def test_a_dropped_forced_tool_is_said_in_the_request_event_and_warned_once_per_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Leaving the forced ``tool_choice`` out (steering took its tool away) was silent: an
    operator saw a run whose model no longer had to call ``add`` with nothing saying why. Each
    ``model.request`` of it names the tool no longer forced, and one warning per run says so."""
    recorder = EventRecorder()
    script = [tool_call("sub", a=3, b=1), "2", "7"]
    async with (
        OpenAICompatServer(script, mode="openai") as server,
        Runtime(sinks=[recorder]) as rt,
    ):
        agent = Agent("calc", model_for(server, tool_choice=FORCE_ADD), tools=[add, sub])
        with caplog.at_level(logging.WARNING, logger="tinyagents.harness"):
            handle = await rt.start(agent, "3-1?")
            await handle.constrain_tools(["sub"])  # lands before the first model call
            assert (await handle.result()).output == "2"
            other = await (await rt.start(agent, "3+4?", tools=["sub"])).result()
    assert other.output == "7"
    requests = [e for e in recorder.events if e.type == "model.request"]
    assert len(requests) == 3
    assert all(e.tool_choice_dropped == "add" for e in requests)  # type: ignore[attr-defined]
    warned = [r for r in caplog.records if "tool_choice" in r.getMessage()]
    assert len(warned) == 2  # once per run, not once per request
    assert handle.run_id in warned[0].getMessage() and "'add'" in warned[0].getMessage()


async def test_a_forced_tool_still_offered_is_not_reported_dropped() -> None:
    recorder = EventRecorder()
    async with (
        OpenAICompatServer([tool_call("add", a=2, b=3), "5"], mode="openai") as server,
        Runtime(sinks=[recorder]) as rt,
    ):
        agent = Agent("calc", model_for(server, tool_choice=FORCE_ADD), tools=[add, sub])
        assert (await (await rt.start(agent, "2+3?")).result()).output == "5"
    requests = [e for e in recorder.events if e.type == "model.request"]
    assert [e.tool_choice_dropped for e in requests] == [None, None]  # type: ignore[attr-defined]
