"""Token limits hold on the last call: the remaining budget goes out as the request's
``max_tokens``, and a response that still goes past it ends the run ``limit_exceeded``, its
output kept but not reported as a completed answer."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import pytest

from tinyagents import (
    Agent,
    LiteLLMModel,
    Model,
    ModelRequest,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    Usage,
    tool,
)
from tinyagents.errors import RunLimitExceeded
from tinyagents.events import LimitEvent
from tinyagents.harness import ModelResponse, StreamChunk
from tinyagents.testkit import EventRecorder, OpenAICompatServer, ScriptedModel, reply, tool_call


def used(input_tokens: int, output_tokens: int, response: ModelResponse) -> ModelResponse:
    response.usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return response


def limit_events(recorder: EventRecorder) -> list[LimitEvent]:
    return [e for e in recorder.events if isinstance(e, LimitEvent)]


class Counter:
    def __init__(self) -> None:
        self.calls = 0

        @tool
        def work() -> str:
            """Do something with a side effect."""
            self.calls += 1
            return "worked"

        self.tool = work


async def test_each_request_carries_the_remaining_token_budget(rt: Runtime):
    model = ScriptedModel(
        [used(30, 10, tool_call("work")), used(45, 5, tool_call("work")), used(6, 4, reply("ok"))]
    )
    counter = Counter()
    agent = Agent("worker", model, tools=[counter.tool], limits=RunLimits(max_tokens=100))
    result = await (await rt.start(agent, "go")).result()

    assert [r.settings.get("max_tokens") for r in model.requests] == [100, 60, 10]
    assert (result.status, counter.calls) == (RunStatus.COMPLETED, 2)  # 100 of 100 used


async def test_no_token_limit_sends_no_max_tokens(rt: Runtime):
    model = ScriptedModel([reply("ok")])
    await (await rt.start(Agent("worker", model), "go")).result()
    assert "max_tokens" not in model.requests[0].settings


async def test_one_call_past_the_budget_ends_limit_exceeded_with_its_output_kept(
    rt: Runtime, recorder: EventRecorder
):
    model = ScriptedModel([used(120, 38, reply("a long answer"))])
    agent = Agent("worker", model, limits=RunLimits(max_tokens=50))
    handle = await rt.start(agent, "go")
    result = await handle.result()

    assert model.requests[0].settings["max_tokens"] == 50
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert result.output == "a long answer"  # kept, but not as a completed answer
    assert result.error == (
        f"run limit 'max_tokens' exceeded in run {handle.run_id}: used 158, allowed 50"
    )
    assert result.usage["input_tokens"] + result.usage["output_tokens"] == 158
    (event,) = limit_events(recorder)
    assert (event.type, event.limit, event.used, event.allowed) == (
        "limit.exceeded",
        "max_tokens",
        158,
        50,
    )
    assert "run.completed" not in recorder.types("run.")
    assert recorder.types("run.")[-1] == "run.limit_exceeded"


async def test_a_tool_call_past_the_budget_is_not_run(rt: Runtime):
    counter = Counter()
    model = ScriptedModel([used(40, 20, tool_call("work")), reply("never")])
    agent = Agent("worker", model, tools=[counter.tool], limits=RunLimits(max_tokens=50))
    result = await (await rt.start(agent, "go")).result()

    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert counter.calls == 0 and len(model.requests) == 1


async def test_a_negative_token_count_from_a_custom_model_refills_no_budget(rt: Runtime):
    # LiteLLMModel reads a server's -1000 tokens as 0 (test_litellm_model); a custom Model
    # passing on such a count as it came lowered the run's usage, and its parent's: the run
    # below was given 1000 tokens more than its budget, and completed past it.
    counter = Counter()
    model = ScriptedModel(
        [
            used(-1000, 0, tool_call("work")),
            used(40, 20, tool_call("work")),
            reply("past the budget"),
        ]
    )
    agent = Agent("worker", model, tools=[counter.tool], limits=RunLimits(max_tokens=50))
    result = await (await rt.start(agent, "go")).result()

    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert result.usage["input_tokens"] == 40 and counter.calls == 1


async def test_using_the_budget_exactly_completes(rt: Runtime):
    model = ScriptedModel([used(30, 20, reply("just fits"))])
    agent = Agent("worker", model, limits=RunLimits(max_tokens=50))
    result = await (await rt.start(agent, "go")).result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "just fits")


async def test_a_child_is_sent_the_smallest_budget_left_up_its_tree(rt: Runtime):
    parent_model = ScriptedModel([used(60, 10, tool_call("child", input="go")), reply("done")])
    child_model = ScriptedModel([used(5, 5, reply("child answer"))])
    child = SubAgent(Agent("child", child_model, limits=RunLimits(max_tokens=500)))
    parent_agent = Agent(
        "parent", parent_model, tools=[SubAgentTool(child)], limits=RunLimits(max_tokens=100)
    )
    await (await rt.start(parent_agent, "go")).result()
    # The parent has 30 left after its first call: the child may use no more than that.
    assert child_model.requests[0].settings["max_tokens"] == 30


async def test_subagent_invoke_raises_on_a_call_past_the_budget(rt: Runtime):
    model = ScriptedModel([used(100, 100, reply("too much"))])
    with pytest.raises(RunLimitExceeded) as raised:
        await SubAgent(Agent("w", model, limits=RunLimits(max_tokens=50))).invoke("go", runtime=rt)
    assert (raised.value.limit, raised.value.used, raised.value.allowed) == (
        "max_tokens",
        200,
        50,
    )


# --------------------------------------------------------------------------- over HTTP


async def test_litellm_sends_the_budget_as_max_tokens_and_the_run_stops_past_it():
    answer = used(120, 38, reply("one hundred and fifty-eight tokens later"))
    async with OpenAICompatServer([answer]) as server, Runtime() as rt:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        agent = Agent("worker", model, limits=RunLimits(max_tokens=50))
        result = await (await rt.start(agent, "go")).result()

    assert server.requests[0]["max_tokens"] == 50
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert result.output == "one hundred and fifty-eight tokens later"
    assert "used 158, allowed 50" in (result.error or "")


@pytest.mark.parametrize(("own", "sent"), [(20, 20), (80, 50)])
async def test_litellm_sends_the_smaller_of_the_budget_and_its_own_max_tokens(own: int, sent: int):
    async with OpenAICompatServer([used(5, 5, reply("ok"))]) as server, Runtime() as rt:
        model = LiteLLMModel(
            "openai/test-model",
            api_base=server.base_url,
            api_key="sk-test",
            max_retries=0,
            max_tokens=own,
        )
        agent = Agent("worker", model, limits=RunLimits(max_tokens=50))
        assert (await (await rt.start(agent, "go")).result()).status is RunStatus.COMPLETED
    assert server.requests[0]["max_tokens"] == sent


@pytest.mark.parametrize(("budget", "sent"), [(1_000_000, 16_384), (900, 900)])
async def test_litellm_sends_no_more_max_tokens_than_the_model_can_write(budget: int, sent: int):
    # a run-wide budget of a million tokens was sent whole as max_tokens: OpenAI refuses every
    # request of gpt-4o-mini with it ("max_tokens is too large: 1000000. This model supports
    # at most 16384 completion tokens"), so a generous budget failed the run at once
    async with OpenAICompatServer([used(5, 5, reply("ok"))]) as server, Runtime() as rt:
        model = LiteLLMModel(
            "openai/gpt-4o-mini", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        agent = Agent("worker", model, limits=RunLimits(max_tokens=budget))
        assert (await (await rt.start(agent, "go")).result()).status is RunStatus.COMPLETED
    assert server.requests[0]["max_tokens"] == sent


class UsageReportingStream(Model):
    """Streams its words one by one, each chunk with the usage of the response so far (as a
    provider that reports usage while it streams does); records whether its stream was closed."""

    name = "usage-stream"
    streams = True

    def __init__(self, words: list[str], input_tokens: int = 1) -> None:
        self.words = words
        self.input_tokens = input_tokens
        self.closed = False

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streaming model is asked through stream()")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        try:
            for count, word in enumerate(self.words, start=1):
                usage = Usage(input_tokens=self.input_tokens, output_tokens=count)
                yield StreamChunk(text_delta=word, usage=usage)
            text = "".join(self.words)
            usage = Usage(input_tokens=self.input_tokens, output_tokens=len(self.words))
            yield StreamChunk(response=ModelResponse(text=text, usage=usage))
        finally:
            self.closed = True


async def test_a_stream_past_the_output_budget_is_stopped_mid_stream(
    rt: Runtime, recorder: EventRecorder
):
    # ports tests/test_usage_limits.py::test_stream_text_enforces_output_token_limit_mid_stream:
    # a stream whose chunks report usage is stopped on the chunk that takes the run past a
    # token budget. It was checked only once the stream had ended: every piece past the
    # budget was still generated (and paid for) and published to the run's subscribers.
    model = UsageReportingStream(["one ", "two ", "three ", "four"])
    agent = Agent("worker", model, limits=RunLimits(max_output_tokens=2))
    handle = await rt.start(agent, "count")
    result = await handle.result()

    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "'max_output_tokens'" in (result.error or "") and "used 3, allowed 2" in (
        result.error or ""
    )
    assert [d.text for d in recorder.of_type("model.delta")] == ["one ", "two "]  # type: ignore[attr-defined]
    assert model.closed and not recorder.of_type("model.response")
    assert result.usage["output_tokens"] == 3  # what the provider reported it had spent
    (event,) = limit_events(recorder)
    assert (event.limit, event.used, event.allowed) == ("max_output_tokens", 3, 2)


async def test_a_stream_that_reports_an_input_past_the_budget_is_stopped_at_once(
    rt: Runtime, recorder: EventRecorder
):
    # ports tests/test_usage_limits.py::test_per_request_input_tokens_limit_streaming (the
    # cumulative limit): a provider that reports the prompt's tokens on its first chunk
    # stops the stream there, before any of the answer is published.
    model = UsageReportingStream(["a ", "long ", "answer"], input_tokens=500)
    agent = Agent("worker", model, limits=RunLimits(max_input_tokens=100))
    result = await (await rt.start(agent, "go")).result()
    assert result.status is RunStatus.LIMIT_EXCEEDED and "used 500, allowed 100" in (
        result.error or ""
    )
    assert not recorder.of_type("model.delta") and model.closed
