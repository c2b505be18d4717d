"""pydantic-ai's agent and OpenAI-model tests, ported (a third batch; the first two are
test_pydantic_ai_ports.py and test_pydantic_ai_ports_2.py): streaming, structured output,
usage limits and message history, over the testkit's fakes and, for ``LiteLLMModel``, over
litellm's real HTTP path to the testkit's OpenAI-compatible server.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/...``). Where we
behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Generic, TypeVar

import pytest
from pydantic import BaseModel, ConfigDict, TypeAdapter

from tinyagents import (
    Agent,
    LiteLLMModel,
    Model,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.harness import (
    Message,
    ModelRequest,
    ModelResponse,
    RunContext,
    StreamChunk,
    Tool,
    ToolCall,
    Usage,
)
from tinyagents.testkit import (
    EventRecorder,
    EventWaiter,
    FunctionModel,
    OpenAICompatServer,
    RawStream,
    ScriptedModel,
    reply,
    tool_call,
)


class Pair(BaseModel):
    first: str
    second: str


@tool
def regular_tool(x: str) -> str:
    """Process x."""
    return f"{x}-processed"


@tool
def get_capital(country: str) -> str:
    """Get the capital of a country.

    Args:
        country: The country name.
    """
    return {"France": "Paris", "England": "London"}[country]


def model_for(server: OpenAICompatServer) -> LiteLLMModel:
    return LiteLLMModel(
        "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
    )


# --- streaming ----------------------------------------------------------------------------


async def test_a_streamed_empty_answer_is_asked_for_again() -> None:
    # ports tests/test_streaming.py::test_empty_response: a streamed response with nothing in
    # it is no answer; the model is asked again (pydantic-ai: "Please return text."), and the
    # streamed text of its next answer is the output.
    model = ScriptedModel([ModelResponse(text=""), reply("ok here is text")], stream=True)
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start(Agent("a", model), "hello")).result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "ok here is text")
    asked = model.requests[1].messages[-1]
    assert asked.role == "user" and asked.metadata.get("retry") == "empty_answer"
    text = "".join(d.text for d in recorder.of_type("model.delta"))  # type: ignore[attr-defined]
    assert text == "ok here is text"
    # the transcript keeps the empty response, the ask and the answer that followed it
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("unknown_tools", ["error_result", "fail"])
async def test_a_streamed_call_to_an_unknown_tool(unknown_tools: str) -> None:
    # ports tests/test_streaming.py::test_call_tool_wrong_name: a streamed call of 'foobar',
    # which the agent does not have. pydantic-ai (retries 0) fails the run; we answer it with an
    # error result naming the tools there are, or fail the run with unknown_tools="fail"
    # (docs/harness.md "Starting runs": per-tool retry caps are a difference kept on purpose).
    model = ScriptedModel([tool_call("foobar", id="c1"), reply("sorry")], stream=True)
    agent = Agent("a", model, tools=[regular_tool], unknown_tools=unknown_tools)  # type: ignore[arg-type]
    result = await agent.run("hello")
    if unknown_tools == "fail":
        assert result.status is RunStatus.FAILED and "foobar" in (result.error or "")
        assert len(model.requests) == 1
        return
    assert (result.status, result.output) == (RunStatus.COMPLETED, "sorry")
    (answer,) = [m for m in model.requests[1].messages if m.role == "tool"]
    assert answer.tool_call_id == "c1" and answer.metadata == {"error": True}
    assert "foobar" in answer.content and "regular_tool" in answer.content


async def test_streamed_structured_output_is_validated() -> None:
    # ports tests/test_streaming.py::test_streamed_structured_response and
    # ::test_stream_structured_output: the streamed pieces of a structured answer join to its
    # JSON, and the run's output is the validated object (pydantic-ai streams partial objects
    # as they validate; we publish the text pieces and validate the whole answer).
    model = ScriptedModel(['{"first": "One", "second": "Two"}'], stream=True)
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start(Agent("a", model, output_type=Pair), "go")).result()
    assert result.status is RunStatus.COMPLETED and result.output == Pair(first="One", second="Two")
    pieces = [d.text for d in recorder.of_type("model.delta")]  # type: ignore[attr-defined]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == {"first": "One", "second": "Two"}
    assert model.requests[0].response_format is Pair


async def test_streamed_structured_output_that_does_not_validate_is_fed_back() -> None:
    # ports tests/test_streaming.py::test_output_function_model_retry_in_stream (the output is
    # retried while streaming): a streamed answer that is no Pair is answered with what is
    # wrong, and the next streamed answer is the output.
    model = ScriptedModel(['{"first": "One"}', '{"first": "One", "second": "Two"}'], stream=True)
    result = await Agent("a", model, output_type=Pair).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == Pair(first="One", second="Two")
    ask = model.requests[1].messages[-1]
    assert ask.metadata.get("retry") == "invalid_output" and "second" in ask.content


# --- usage limits -------------------------------------------------------------------------


async def test_structured_output_is_no_tool_call_and_is_allowed_at_the_tool_call_limit() -> None:
    # ports tests/test_usage_limits.py::test_output_tool_allowed_at_limit and
    # ::test_output_tool_not_counted: pydantic-ai's output tool is not counted as a tool call
    # and may be called at the limit. Ours is no tool at all (response_format), so a run at
    # max_tool_calls=1 that used its one call still gives its structured answer, and its usage
    # counts the one call.
    model = ScriptedModel(
        [tool_call("regular_tool", x="test", id="call_1"), '{"first": "a", "second": "b"}']
    )
    agent = Agent(
        "a", model, tools=[regular_tool], output_type=Pair, limits=RunLimits(max_tool_calls=1)
    )
    result = await agent.run("test")
    assert result.status is RunStatus.COMPLETED and result.output == Pair(first="a", second="b")
    assert (result.usage["model_calls"], result.usage["tool_calls"]) == (2, 1)
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[2].content == "test-processed"
    # no tool is offered for the output: the only tool offered is the agent's own
    assert [t.name for t in model.requests[1].tools] == ["regular_tool"]


async def test_usage_counts_each_request_and_tool_call_of_the_run() -> None:
    # ports tests/test_usage_limits.py::test_request_usage_basics and the usage snapshots of
    # ::test_output_tool_not_counted: the run's usage sums what each response says it used.
    responses = iter(
        [
            ModelResponse(
                tool_calls=[ToolCall(id="c1", name="regular_tool", args={"x": "a"})],
                usage=Usage(input_tokens=51, output_tokens=5),
            ),
            ModelResponse(text="done", usage=Usage(input_tokens=52, output_tokens=9)),
        ]
    )
    result = await Agent("a", FunctionModel(lambda _r: next(responses)), tools=[regular_tool]).run(
        "test"
    )
    usage = result.usage
    assert (usage["model_calls"], usage["tool_calls"]) == (2, 1)
    assert (usage["input_tokens"], usage["output_tokens"]) == (103, 14)


def test_a_model_call_limit_of_zero_is_refused() -> None:
    # ports tests/test_usage_limits.py::test_usage_limits_explicit_zero. Kept on purpose: a
    # run that may make no model call could never answer, so max_model_calls and the token
    # limits take counts above 0 (test_token_limits_are_positive_counts), while
    # max_tool_calls=0 (no tool call) is allowed, as pydantic-ai's tool_calls_limit=0 is.
    with pytest.raises(ValueError, match="greater than 0"):
        RunLimits(max_model_calls=0)
    assert RunLimits(max_tool_calls=0).max_tool_calls == 0
    assert RunLimits().max_input_tokens is None


# --- tools --------------------------------------------------------------------------------


def test_a_tool_taking_var_args_is_refused_when_it_is_made() -> None:
    # ports tests/test_tools.py::test_positional_or_keyword_with_var_args. Kept on purpose, a
    # difference: pydantic-ai offers ``*values: int`` as an array argument ``values``; we
    # refuse the function when the tool is made, saying to list the arguments as parameters.
    def f(r0: int, *values: int) -> dict[str, Any]:
        return {"r0": r0, "values": list(values)}

    with pytest.raises(
        ConfigurationError, match=r"takes \*values: a tool's arguments must be named"
    ):
        tool(f)

    def g(r0: int, **options: int) -> int:
        return r0

    with pytest.raises(
        ConfigurationError, match=r"takes \*\*options: a tool's arguments must be named"
    ):
        tool(g)


# --- message history ----------------------------------------------------------------------


async def test_a_conversation_continued_on_another_model_round_trips_its_tool_calls() -> None:
    # ports tests/models/test_openai.py::test_multiple_agent_tool_calls: a run on one model,
    # then its transcript continued on another (an OpenAI-compatible server through litellm):
    # the first run's tool call and result reach the server as OpenAI messages, paired by id.
    first = ScriptedModel(
        [
            tool_call("get_capital", country="France", id="call_fr"),
            "The capital of France is Paris.",
        ]
    )
    earlier = await Agent("a", first, tools=[get_capital]).run("What is the capital of France?")
    assert earlier.output == "The capital of France is Paris."
    script: list[Any] = [
        tool_call("get_capital", country="England", id="call_en"),
        "The capital of England is London.",
    ]
    async with OpenAICompatServer(script) as server:
        agent = Agent("a", model_for(server), tools=[get_capital])
        result = await agent.run("What is the capital of England?", history=earlier.messages)
    assert server.refusals == []
    assert (result.status, result.output) == (
        RunStatus.COMPLETED,
        "The capital of England is London.",
    )
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == [
        "user", "assistant", "tool", "assistant",  # the first run
        "user", "assistant", "tool",  # this one
    ]  # fmt: skip
    france = sent[1]["tool_calls"][0]
    assert (france["id"], france["function"]["name"]) == ("call_fr", "get_capital")
    assert json.loads(france["function"]["arguments"]) == {"country": "France"}
    assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("call_fr", "Paris")
    assert (sent[6]["tool_call_id"], sent[6]["content"]) == ("call_en", "London")
    # the second run's transcript holds both runs, the first run's messages as they were
    assert result.messages[:4] == earlier.messages


async def test_a_history_may_start_with_the_models_answer() -> None:
    # ports tests/models/test_openai.py::test_message_history_can_start_with_model_response:
    # a history whose first message is the model's is sent as it is, the new prompt after it.
    async with OpenAICompatServer(["Linux mascot, a penguin character."]) as server:
        result = await Agent("a", model_for(server), instructions="").run(
            "Answer in 5 words only. Who is Tux?",
            history=[Message(role="assistant", content="Where do you want to go today?")],
        )
    assert result.output == "Linux mascot, a penguin character."
    assert server.requests[0]["messages"] == [
        {"role": "assistant", "content": "Where do you want to go today?"},
        {"role": "user", "content": "Answer in 5 words only. Who is Tux?"},
    ]
    assert [m.role for m in result.messages] == ["assistant", "user", "assistant"]


# --- LiteLLMModel: litellm's stream assembly and response_format --------------------------


async def test_streamed_structured_output_over_http_after_empty_deltas() -> None:
    # ports tests/models/test_openai.py::test_stream_structured, ::test_none_delta and
    # ::test_no_delta: empty deltas (no content, an empty tool_calls list, content "") before
    # the JSON, which arrives split mid-string, join to the answer; the schema was sent as a
    # json_schema response_format, and the output is the validated object.
    raw = RawStream(
        deltas=[
            {},
            {"tool_calls": []},
            {"content": ""},
            {"content": '{"first": "One'},
            {"content": '", "second": "Two"'},
            {"content": "}"},
        ],
        finish_reason="stop",
    )
    async with OpenAICompatServer([raw]) as server:
        result = await Agent("a", model_for(server), output_type=Pair).run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.output == Pair(first="One", second="Two")
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Pair"
    assert sent["json_schema"]["schema"]["required"] == ["first", "second"]


async def test_a_streamed_tool_call_after_empty_text_is_a_call_not_an_answer() -> None:
    # ports tests/models/test_openai.py::test_stream_tool_call_with_empty_text (Ollama sends
    # content "" with a tool call): the call runs, and the empty text is no answer.
    raw = RawStream(
        deltas=[
            {
                "content": "",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "regular_tool", "arguments": ""},
                    },
                ],
            },
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": "o'}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": 'ne"}'}}]},
        ]
    )
    async with OpenAICompatServer([raw, "done"]) as server:
        result = await Agent("a", model_for(server), tools=[regular_tool]).run("go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    call = result.messages[1].tool_calls[0]
    assert (call.id, call.name, call.args) == ("c1", "regular_tool", {"x": "one"})
    assert server.requests[1]["messages"][-1] == {
        "role": "tool",
        "content": "one-processed",
        "tool_call_id": "c1",
    }


async def test_streamed_text_before_a_tool_call_is_kept_beside_the_call() -> None:
    # ports tests/models/test_openai.py::test_stream_text_empty_think_tag_and_text_before_tool_call:
    # text streamed before a tool call is not the answer; the call runs, and the text goes
    # back to the server in the same assistant message as the call.
    raw = RawStream(
        deltas=[
            {"content": "Let me "},
            {"content": "check."},
            {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                             "function": {"name": "regular_tool", "arguments": '{"x": "a"}'}}]},
        ]
    )  # fmt: skip
    async with OpenAICompatServer([raw, "done"]) as server:
        result = await Agent("a", model_for(server), tools=[regular_tool]).run("go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    assistant = server.requests[1]["messages"][1]
    assert assistant["content"] == "Let me check."
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1"]


async def test_no_tool_settings_are_sent_without_tools() -> None:
    # ports tests/models/test_openai.py::test_parallel_tool_calls_not_sent_without_tools: an
    # agent with no tools sends no ``tools`` (OpenAI refuses an empty list), ``tool_choice``
    # or ``parallel_tool_calls``, also when the model was made with them (OpenAI refuses a
    # request with either and no tools: "'parallel_tool_calls' is only allowed when 'tools'
    # are specified"). A model shared by an agent with tools and one without (or a run granted
    # none of its tools) failed every request of the one without with an HTTP 400.
    async with OpenAICompatServer(["world", "Paris", "London"]) as server:
        model = LiteLLMModel(
            "openai/test-model",
            api_base=server.base_url,
            api_key="sk-test",
            max_retries=0,
            parallel_tool_calls=False,
            tool_choice="auto",
        )
        assert (await Agent("a", model).run("Hello")).output == "world"
        with_tools = Agent("b", model, tools=[get_capital])
        assert (await with_tools.run("capital of France?")).output == "Paris"
        async with Runtime() as rt:
            granted_none = await rt.start(with_tools, "capital of England?", tools=[])
            assert (await granted_none.result()).output == "London"
    without, with_, none_granted = server.requests
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & without.keys()
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & none_granted.keys()
    # with tools, the model's settings are sent as given
    assert (with_["parallel_tool_calls"], with_["tool_choice"]) == (False, "auto")


async def test_a_request_names_the_tools_the_run_may_call() -> None:
    # ports tests/models/test_openai.py::test_request_tool_call (the request side): each tool
    # is sent as an OpenAI function with its JSON schema and the docstring's description.
    async with OpenAICompatServer([tool_call("get_capital", country="France"), "Paris"]) as server:
        await Agent("a", model_for(server), tools=[get_capital]).run("capital of France?")
    (spec,) = server.requests[0]["tools"]
    assert spec["type"] == "function"
    function = spec["function"]
    assert function["name"] == "get_capital"
    assert function["description"] == "Get the capital of a country."
    assert function["parameters"]["properties"]["country"]["description"] == "The country name."
    assert function["parameters"]["required"] == ["country"]


# --- a run's transcript as JSON, and a stream cut off -----------------------------------------


async def test_a_transcript_saved_as_json_continues_a_conversation() -> None:
    # ports tests/test_agent.py::test_agent_run_result_serialization and pydantic-ai's
    # ModelMessagesTypeAdapter (docs: "Storing and loading messages"): a run's messages
    # dumped to JSON and loaded back are the same messages, and continue the conversation.
    # RunResult.model_dump_json() writes them too, but RunResult.model_validate_json() gives
    # them back as dicts (RunResult belongs to a layer below the harness): read them with
    # TypeAdapter(list[Message]) (docs/harness.md "Starting runs").
    model = ScriptedModel([tool_call("get_capital", country="France", id="c1"), "Paris."])
    first = await Agent("a", model, tools=[get_capital]).run("capital of France?")
    messages = TypeAdapter(list[Message])
    saved = messages.dump_json(first.messages)
    assert messages.validate_json(saved) == first.messages
    from_result = json.loads(first.model_dump_json())["messages"]
    assert messages.validate_python(from_result) == first.messages
    nxt = ScriptedModel(["London."])
    second = await Agent("a", nxt, tools=[get_capital]).run(
        "and of England?", history=messages.validate_json(saved)
    )
    assert second.status is RunStatus.COMPLETED
    assert nxt.requests[0].messages[:4] == first.messages


class HeldStream(Model):
    """Streams one piece of text, then waits for ever."""

    name = "held"
    streams = True

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streaming model is asked through stream()")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield StreamChunk(text_delta="success ")
        await asyncio.Event().wait()
        yield StreamChunk(response=ModelResponse(text="never"))  # pragma: no cover


async def test_a_stream_cancelled_in_flight_leaves_no_partial_answer_in_the_transcript() -> None:
    # ports tests/test_streaming.py::test_run_stream_cancel_all_messages_includes_interrupted_response.
    # Kept on purpose, a difference: pydantic-ai keeps the interrupted response (its text so
    # far, state='interrupted') in all_messages(); an IMMEDIATE cancel of ours ends the run
    # with no model.response (docs/harness.md "Streaming tokens"), and its transcript ends on
    # the prompt, so a session continuing it sends no half-written answer back.
    waiter = EventWaiter()
    async with Runtime(sinks=[waiter]) as rt:
        handle = await rt.start(Agent("a", HeldStream()), "Hello")
        delta = await waiter.event("model.delta", run_id=handle.run_id)
        await handle.cancel(immediate=True)
        result = await asyncio.wait_for(handle.result(), 60)
    assert delta.text == "success "  # type: ignore[attr-defined]
    assert result.status is RunStatus.CANCELLED
    assert [(m.role, m.content) for m in result.messages] == [("user", "Hello")]
    ran = [e.type for e in waiter.events if e.run_id == handle.run_id]
    assert "model.response" not in ran


# --- tools with a schema of their own ------------------------------------------------------


class Echo(Tool):
    async def call(self, args: dict[str, Any], *, ctx: Any = None) -> Any:
        return args


async def test_a_tool_with_a_schema_of_its_own_gets_the_arguments_as_sent() -> None:
    # ports tests/test_tools.py::test_function_tool_consistent_with_schema and
    # ::test_function_tool_from_schema_with_ctx: a tool made from a JSON schema (pydantic-ai's
    # Tool.from_schema; ours a Tool subclass with ``parameters``) is offered that schema as it
    # is, and called with the model's arguments as it sent them: neither validates them against
    # the schema (pydantic-ai's validator is any_schema), the tool's call does.
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "one": {"description": "first argument", "type": "string"},
            "two": {"description": "second argument", "type": "object"},
        },
        "required": ["one", "two"],
    }
    echo = Echo(name="foobar", description="does foobar stuff", parameters=schema)
    model = ScriptedModel(
        [tool_call("foobar", one="a", two={"b": 1}), tool_call("foobar", one=1), "ok"]
    )
    result = await Agent("a", model, tools=[echo]).run("go")
    (spec,) = model.requests[0].tools
    assert (spec.name, spec.description, spec.parameters) == ("foobar", "does foobar stuff", schema)
    results = [json.loads(m.content) for m in result.messages if m.role == "tool"]
    assert results == [{"one": "a", "two": {"b": 1}}, {"one": 1}]


# --- concurrent runs of one agent ---------------------------------------------------------


async def test_concurrent_runs_of_one_agent_ask_again_each_on_its_own() -> None:
    # ports tests/test_agent.py::test_concurrent_runs_output_retry_isolation: two runs of one
    # agent at once, each answering wrongly first (an invalid output in one, an empty answer
    # in the other) and rightly after being asked again, both before either is asked again.
    # Each run's asks are its own (one per prompt): were they shared, the second wrong answer
    # would fail its run.
    first_answers = 0
    both_answered = asyncio.Event()

    async def answer(request: ModelRequest) -> ModelResponse | str:
        nonlocal first_answers
        prompt = request.messages[0].content
        if len(request.messages) == 1:
            first_answers += 1
            if first_answers == 2:
                both_answered.set()
            return '{"first": "only"}' if prompt == "invalid" else ModelResponse(text="")
        await both_answered.wait()
        return '{"first": "a", "second": "b"}'

    agent = Agent("a", FunctionModel(answer), output_type=Pair)
    invalid, empty = await asyncio.wait_for(
        asyncio.gather(agent.run("invalid"), agent.run("empty")), 60
    )
    for result, retry in ((invalid, "invalid_output"), (empty, "empty_answer")):
        assert result.status is RunStatus.COMPLETED, result.error
        assert result.output == Pair(first="a", second="b")
        (asked,) = [m for m in result.messages if m.metadata.get("retry")]
        assert asked.metadata["retry"] == retry


async def test_a_whole_response_without_a_finish_reason_is_read() -> None:
    # ports tests/models/test_openai.py::test_process_response_no_finish_reason: a server that
    # sends ``finish_reason: null`` (some proxies do) is read as any other answer: its text is
    # the output, its tool call runs, its usage counts.
    def completion(message: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": None}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }

    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "regular_tool", "arguments": '{"x": "a"}'},
    }
    script = [
        completion({"role": "assistant", "content": None, "tool_calls": [call]}),
        completion({"role": "assistant", "content": "world"}),
    ]
    async with OpenAICompatServer(script) as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", stream=False
        )
        result = await Agent("a", model, tools=[regular_tool]).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "world")
    assert result.messages[2].content == "a-processed"
    assert (result.usage["input_tokens"], result.usage["output_tokens"]) == (6, 4)


# --- LiteLLMModel: the response_format a structured output sends ------------------------------

T = TypeVar("T")


class Item(BaseModel):
    n: int


class Page(BaseModel, Generic[T]):
    items: list[T]


class Tagged(BaseModel):
    name: str
    tags: dict[str, int]


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


async def sent_response_format(output_type: type[BaseModel], answer: str) -> dict[str, Any]:
    async with OpenAICompatServer([answer]) as server:
        result = await Agent("a", model_for(server), output_type=output_type).run("go")
    assert result.status is RunStatus.COMPLETED, result.error
    assert isinstance(result.output, output_type)
    sent: dict[str, Any] = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema"
    return sent["json_schema"]


async def test_a_generic_models_response_format_has_a_name_openai_takes() -> None:
    # ports tests/test_agent.py::test_output_type_generic_class_name_sanitization: a generic
    # model's class name (``Page[Item]``) is no name OpenAI takes for a response_format (it
    # must match ^[a-zA-Z0-9_-]+$, at most 64 characters): litellm sent it as it is, and OpenAI
    # refused every request of the run. Its other characters are sent as ``_``; the schema
    # is the one a plain model's would be (strict).
    sent = await sent_response_format(Page[Item], '{"items": [{"n": 1}]}')
    assert sent["name"] == "Page_Item_" and sent["strict"] is True
    assert sent["schema"]["required"] == ["items"]
    assert sent["schema"]["additionalProperties"] is False


@pytest.mark.parametrize(
    ("output_type", "answer"),
    [(Tagged, '{"name": "x", "tags": {"a": 1}}'), (Loose, '{"a": 1, "b": 2}')],
)
async def test_a_schema_strict_mode_cannot_hold_is_sent_not_strict(
    output_type: type[BaseModel], answer: str
) -> None:
    # ports tests/models/test_openai.py::test_strict_mode_cannot_infer_strict (for the output,
    # pydantic-ai's NativeOutput with strict inferred): OpenAI's strict mode needs every object
    # to say ``additionalProperties: false``; a dict field (``additionalProperties`` a schema)
    # or a model taking extra fields (``true``) cannot, and litellm sent them ``strict: true``,
    # which OpenAI refuses. They are sent ``strict: false``, as pydantic-ai sends them; the
    # run's output is still validated as the model.
    sent = await sent_response_format(output_type, answer)
    assert sent["strict"] is False and sent["name"] == output_type.__name__


class Odd(BaseModel):
    """A field named as a schema keyword is a field, not the keyword."""

    additionalProperties: int
    inner: Item | None  # required: a field with a default is sent not strict, as pydantic-ai


@pytest.mark.parametrize(
    ("output_type", "answer"),
    [
        (Pair, '{"first": "One", "second": "Two"}'),
        (Odd, '{"additionalProperties": 1, "inner": null}'),
    ],
)
async def test_a_schema_strict_mode_can_hold_is_sent_strict(
    output_type: type[BaseModel], answer: str
) -> None:
    # the other half of the same port: a plain model whose every field is required (nested
    # ones too) is sent strict, as litellm builds it (no additional properties)
    sent = await sent_response_format(output_type, answer)
    assert (sent["name"], sent["strict"]) == (output_type.__name__, True)
    assert sent["schema"]["additionalProperties"] is False


# --- delegating from inside a tool ------------------------------------------------------------


async def test_an_agent_run_inside_a_tool_is_its_own_unless_started_as_a_child() -> None:
    # ports tests/test_usage_limits.py::test_multi_agent_usage_no_incr and
    # ::test_multi_agent_usage_sync: a tool that runs another agent (a sync tool through
    # run_sync, in the thread it runs in; an async one with await) gets its answer, and that
    # run's usage is not the caller's, as in pydantic-ai without ``usage=ctx.usage``. Started
    # as a child (``SubAgent(...).invoke_in_parent(input, ctx)``, pydantic-ai's
    # ``usage=ctx.usage``) its usage rolls up into the caller's.
    @tool
    def ask_sync(q: str) -> str:
        """Ask the helper, from a sync tool."""
        result = Agent("helper", ScriptedModel(["42"])).run_sync(q)
        return f"{result.status.value}: {result.output}"

    @tool
    async def ask_async(q: str) -> str:
        """Ask the helper."""
        result = await Agent("helper", ScriptedModel(["43"])).run(q)
        return f"{result.status.value}: {result.output}"

    @tool
    async def ask_as_child(ctx: RunContext, q: str) -> str:
        """Ask the helper, as a child run."""
        helper = Agent("helper", ScriptedModel([reply("44", usage=Usage(input_tokens=7))]))
        output: str = await SubAgent(helper).invoke_in_parent(q, ctx)
        return f"completed: {output}"

    script = [tool_call("ask_sync", q="x"), tool_call("ask_async", q="y"), "done"]
    calls = Agent("a", ScriptedModel(script), tools=[ask_sync, ask_async])
    result = await asyncio.wait_for(calls.run("go"), 60)
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "completed: 42",
        "completed: 43",
    ]
    assert result.usage["model_calls"] == 3  # its own three requests, none of the helpers'
    parent_model = ScriptedModel([tool_call("ask_as_child", q="z"), "done"])
    parent = await Agent("a", parent_model, tools=[ask_as_child]).run("go")
    assert [m.content for m in parent.messages if m.role == "tool"] == ["completed: 44"]
    assert parent.usage["model_calls"] == 3  # its two and the child's one
    assert parent.usage["input_tokens"] >= 7  # the child's tokens too
