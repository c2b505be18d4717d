"""pydantic-ai's count of an empty answer against its output retries, the empty response kept
in the transcript, its output schemas written without property titles, and more of its
agent tests, ported (an eleventh batch; see test_pydantic_ai_ports.py to _10).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tinyagents import Agent, ModelRetry, PromptedOutput, RunContext, RunStatus, ToolOutput, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import LiteLLMModel, Message, ModelRequest, ModelResponse
from tinyagents.harness.model import CUT_OFF
from tinyagents.testkit import FunctionModel, OpenAICompatServer, ScriptedModel, reply, tool_call


class Foo(BaseModel):
    a: int
    b: str


def ask(alternatives: str) -> str:
    return f"Validation feedback:\nPlease {alternatives}.\n\nFix the errors and try again."


def shape(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.metadata.get("retry") or m.content) for m in messages]


# --- an empty answer spends the output retries (pydantic-ai's consume_output_retry) ---


async def test_empty_response_counts_against_output_retries() -> None:
    # ports test_empty_response_exceeds_max_retries with output_retries=3: pydantic-ai asks
    # again while its output retries last (Exceeded maximum output retries (3) on the fourth
    # empty answer). Ours asked once, whatever output_retries said.
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_retries=3).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert "output_retries=3" in (result.error or "")
    assert len(model.requests) == 4


async def test_empty_answers_are_asked_for_again_while_output_retries_last() -> None:
    # the other side of the count: two empty answers, then text, with output_retries=2.
    model = ScriptedModel([ModelResponse(text=""), ModelResponse(text=""), reply("ok")])
    result = await Agent("a", model, output_retries=2).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "ok"), result.error


async def test_no_output_retries_fails_on_the_first_empty_answer() -> None:
    # output_retries=0: pydantic-ai raises on the first empty answer (1 > 0).
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_retries=0).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 1


async def test_an_empty_answer_and_an_invalid_one_share_the_output_retries() -> None:
    # pydantic-ai counts both with one output_retries_used: an empty answer, then JSON that
    # does not validate, is past the default output_retries=1. Ours asked for both.
    model = ScriptedModel(
        [ModelResponse(text=""), reply('{"a": "x"}'), reply('{"a": 1, "b": "y"}')]
    )
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2
    # and the other way round: an invalid answer, then an empty one
    model = ScriptedModel(
        [reply('{"a": "x"}'), ModelResponse(text=""), reply('{"a": 1, "b": "y"}')]
    )
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2


async def test_an_output_validator_counts_an_empty_answer_in_ctx_retry() -> None:
    # pydantic-ai's output validators see ``ctx.retry`` as output_retries_used, which an
    # empty answer raised.
    seen: list[tuple[int, int]] = []
    agent = Agent("a", ScriptedModel([ModelResponse(text=""), reply("ok")]), output_retries=2)

    @agent.output_validator
    def check(ctx: RunContext, output: str) -> str:
        seen.append((ctx.retry, ctx.max_retries))
        return output

    result = await agent.run("Hello")
    assert result.output == "ok", result.error
    assert seen == [(1, 2)]


# --- the empty response stays in the transcript (pydantic-ai's ModelResponse(parts=[])) ---


async def test_empty_response_stays_in_the_messages() -> None:
    # ports test_empty_response's snapshot: the request, the empty ModelResponse, the retry
    # prompt, the answer. Ours dropped the empty response.
    model = ScriptedModel([ModelResponse(text=""), reply("ok here is text")])
    result = await Agent("a", model).run("Hello")
    assert result.output == "ok here is text", result.error
    retry = ask("return text")
    assert [(m.role, m.content) for m in model.requests[1].messages] == [
        ("user", "Hello"),
        ("assistant", ""),
        ("user", retry),
    ]
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Hello"),
        ("assistant", ""),
        ("user", retry),
        ("assistant", "ok here is text"),
    ]


async def test_empty_response_stays_when_streamed() -> None:
    # ports tests/test_streaming.py's empty response retry, its messages.
    model = ScriptedModel([ModelResponse(text=""), reply("ok")], stream=True)
    result = await Agent("a", model).run("Hello")
    assert result.output == "ok", result.error
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]


async def test_an_empty_response_kept_is_not_sent_over_http() -> None:
    # pydantic-ai's OpenAIChatModel maps a ModelResponse with no parts to no message at all:
    # the retry request sends the prompt and the ask (one user message, joined), not an
    # empty assistant message between them.
    script = [ModelResponse(text="", finish_reason="stop"), reply("ok")]
    async with OpenAICompatServer(script) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        result = await Agent("a", model, instructions=None).run("Hello")
    assert result.output == "ok", result.error
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    sent = server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user"]
    assert sent[0]["content"] == f"Hello\n\n{ask('return text')}"


async def test_a_run_failed_on_empty_answers_keeps_the_first() -> None:
    # pydantic-ai's messages keep every empty response of a run that exceeded its retries;
    # ours keep the first and drop each ask answered with nothing (with that answer), so a
    # session's next turn sends no question that was never answered (LiteLLMModel sends no
    # empty assistant message, so the ask would reach the model again with the next prompt).
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_retries=2).run("Hello")
    assert result.status is RunStatus.FAILED
    assert shape(result.messages) == [("user", "Hello"), ("assistant", "")]
    assert shape(model.requests[2].messages) == [
        ("user", "Hello"),
        ("assistant", ""),
        ("user", "empty_answer"),
        ("assistant", ""),
        ("user", "empty_answer"),
    ]


# --- output schemas without property titles (pydantic-ai's GenerateToolJsonSchema) ---


class Bar(BaseModel):
    """A bar."""

    bar: str


class Outer(BaseModel):
    """Outer holds a bar."""

    inner: Bar
    n: int


PROMPT = (
    "Always respond with a JSON object that's compatible with this schema:\n\n{}\n\n"
    "Don't include any text or Markdown fencing before or after.\n"
)


def system_text(request: ModelRequest) -> str:
    first = request.messages[0]
    assert first.role == "system"
    return first.content


async def test_prompted_output_schema_has_no_property_titles() -> None:
    # ports tests/models/test_fallback.py's prompted output instructions: the schema written
    # into the prompt is {"properties": {"bar": {"type": "string"}}, "required": ["bar"],
    # "title": "Foo", "type": "object"}; ours kept "title": "Bar" on each property.
    class Foo(BaseModel):
        bar: str

    model = ScriptedModel(['{"bar": "baz"}'])
    result = await Agent("a", model, instructions=None, output_type=PromptedOutput(Foo)).run("go")
    assert result.output == Foo(bar="baz"), result.error
    schema = {"properties": {"bar": {"type": "string"}}, "required": ["bar"], "title": "Foo"}
    assert system_text(model.requests[0]) == PROMPT.format(json.dumps({**schema, "type": "object"}))


async def test_prompted_output_description_joins_the_docstring() -> None:
    # ports test_prompted_output (PromptedOutput(CityLocation, name=..., description=...)):
    # pydantic-ai's ObjectOutputProcessor writes the marker's description before the model's
    # docstring ("<description>. <docstring>"), after the title; ours dropped the docstring.
    class CityLocation(BaseModel):
        """Description from docstring."""

        city: str
        country: str

    model = ScriptedModel(['{"city": "Mexico City", "country": "Mexico"}'])
    marker = PromptedOutput(
        CityLocation, name="City & Country", description="Description from PromptedOutput"
    )
    result = await Agent("a", model, instructions=None, output_type=marker).run("capital?")
    assert result.output == CityLocation(city="Mexico City", country="Mexico"), result.error
    schema = {
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "title": "City & Country",
        "type": "object",
        "description": "Description from PromptedOutput. Description from docstring.",
    }
    assert system_text(model.requests[0]) == PROMPT.format(json.dumps(schema))


async def test_prompted_output_of_nested_models_drops_titles_in_defs() -> None:
    # GenerateToolJsonSchema drops the property titles of every model it writes, in $defs
    # too; the docstring is the description, after the title.
    model = ScriptedModel(['{"inner": {"bar": "x"}, "n": 1}'])
    agent = Agent("a", model, instructions=None, output_type=PromptedOutput(Outer))
    assert (await agent.run("go")).output == Outer(inner=Bar(bar="x"), n=1)
    written = system_text(model.requests[0]).split("\n\n")[1]
    assert json.loads(written) == {
        "$defs": {
            "Bar": {
                "description": "A bar.",
                "properties": {"bar": {"type": "string"}},
                "required": ["bar"],
                "title": "Bar",
                "type": "object",
            }
        },
        "properties": {"inner": {"$ref": "#/$defs/Bar"}, "n": {"type": "integer"}},
        "required": ["inner", "n"],
        "title": "Outer",
        "type": "object",
        "description": "Outer holds a bar.",
    }


async def test_native_output_schema_sent_has_no_property_titles() -> None:
    # ports test_agent.py's native output_object ({'properties': {'bar': {'type': 'string'}},
    # 'title': 'Foo', ...}) and OpenAIChatModel._map_json_schema: the response_format's schema
    # has no property titles and no description, which is the json_schema's description.
    async with OpenAICompatServer(['{"inner": {"bar": "x"}, "n": 1}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        result = await Agent("a", model, output_type=Outer).run("Hello")
    assert result.output == Outer(inner=Bar(bar="x"), n=1), result.error
    sent = server.requests[0]["response_format"]["json_schema"]
    assert (sent["name"], sent["strict"]) == ("Outer", True)
    assert sent["description"] == "Outer holds a bar."
    assert sent["schema"] == {
        "$defs": {
            "Bar": {
                "description": "A bar.",
                "properties": {"bar": {"type": "string"}},
                "required": ["bar"],
                "title": "Bar",
                "type": "object",
                "additionalProperties": False,
            }
        },
        "properties": {"inner": {"$ref": "#/$defs/Bar"}, "n": {"type": "integer"}},
        "required": ["inner", "n"],
        "title": "Outer",
        "type": "object",
        "additionalProperties": False,
    }


async def test_native_output_of_a_wrapped_type_sent_without_titles() -> None:
    # a type that is no model (list[Bar]) is wrapped as {"response": ...}: the models in its
    # $defs lose their property titles too (pydantic-ai builds it with GenerateToolJsonSchema).
    async with OpenAICompatServer(['{"response": [{"bar": "x"}]}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        result = await Agent("a", model, output_type=list[Bar]).run("Hello")
    assert result.output == [Bar(bar="x")], result.error
    schema = server.requests[0]["response_format"]["json_schema"]["schema"]
    assert schema["$defs"]["Bar"]["properties"] == {"bar": {"type": "string"}}


# --- more of pydantic-ai's empty-answer tests ---


async def test_agent_blank_text_response_retries_without_none_output() -> None:
    # ports test_agent_blank_text_response_retries_without_none_output: only empty text, to
    # plain ``str``, is asked "Please return text." until the output retries run out; the
    # retry request is the third message (after the empty response).
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_type=str).run("hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    retry = model.requests[1].messages[2]
    assert (retry.role, retry.content) == ("user", ask("return text"))


@pytest.mark.parametrize("output_type", [str, str | None])
async def test_agent_blank_text_response_token_limit(output_type: Any) -> None:
    # ports test_agent_blank_text_response_token_limit: empty text cut off by the token limit
    # is no None output either; the run fails at once, naming the limit.
    model = FunctionModel(lambda request: ModelResponse(text="", finish_reason="length"))
    result = await Agent("a", model, output_type=output_type).run("hello")
    assert result.status is RunStatus.FAILED and CUT_OFF["length"] in (result.error or "")
    assert len(model.requests) == 1


async def test_agent_blank_text_response_content_filter() -> None:
    # ports test_agent_blank_text_response_content_filter: a filtered-out empty answer to
    # ``str | None`` is not the model choosing silence: the run fails (pydantic-ai:
    # ContentFilterError).
    model = FunctionModel(lambda request: ModelResponse(text="", finish_reason="content_filter"))
    result = await Agent("a", model, output_type=str | None).run("hello")
    assert result.status is RunStatus.FAILED and CUT_OFF["content_filter"] in (result.error or "")
    assert len(model.requests) == 1


async def test_agent_allows_none_output_validator_retry() -> None:
    # ports test_agent_allows_none_output_validator_retry: an output validator that refuses
    # the None of an empty answer sends it back; the empty response stays before the retry.
    model = ScriptedModel([ModelResponse(text=""), reply("hello")])
    agent = Agent("a", model, output_type=str | None)

    @agent.output_validator
    def reject_none(ctx: RunContext, output: str | None) -> str | None:
        if output is None:
            raise ModelRetry("None not acceptable, please respond")
        return output

    result = await agent.run("hello")
    assert result.output == "hello", result.error
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "hello"),
        ("assistant", ""),
        (
            "user",
            "Validation feedback:\nNone not acceptable, please respond\n\n"
            "Fix the errors and try again.",
        ),
        ("assistant", "hello"),
    ]


# --- tools (tests/test_tools.py) ---


async def test_retry_tool_until_last_attempt() -> None:
    # ports tests/test_tools.py::test_retry_tool_until_last_attempt: ``ctx.last_attempt`` is
    # True on the call whose ModelRetry would end the run (retry == max_retries); the tool
    # answers then. Ours had no last_attempt.
    seen: list[tuple[int, bool]] = []

    @tool
    def always_fail(ctx: RunContext) -> str:
        """Always fail."""
        seen.append((ctx.retry, ctx.last_attempt))
        if ctx.last_attempt:
            return "I guess you never learn"
        raise ModelRetry("Please try again.")

    calls = [tool_call("always_fail", id=f"c{i}") for i in range(3)]
    model = ScriptedModel([*calls, reply("done")])
    result = await Agent("a", model, tools=[always_fail], retries=2).run("Always fail!")
    assert result.output == "done", result.error
    assert seen == [(0, False), (1, False), (2, True)]
    assert [m.content for m in result.messages if m.role == "tool"][-1] == (
        "I guess you never learn"
    )


async def test_last_attempt_of_an_output_validator() -> None:
    # an output validator's context is pydantic-ai's too: last_attempt once the answers sent
    # back reach output_retries.
    seen: list[bool] = []
    agent = Agent("a", ScriptedModel(["one", "two"]), output_retries=1)

    @agent.output_validator
    def check(ctx: RunContext, output: str) -> str:
        seen.append(ctx.last_attempt)
        if not ctx.last_attempt:
            raise ModelRetry("again")
        return output

    assert (await agent.run("go")).output == "two"
    assert seen == [False, True]


def test_output_type_empty() -> None:
    # ports tests/test_tools.py::test_output_type_empty: an empty list of output types is
    # refused when the agent is made (pydantic-ai: "At least one output type must be
    # provided.").
    with pytest.raises(ConfigurationError, match="output_type"):
        Agent("a", ScriptedModel(["x"]), output_type=[])


def test_tool_return_conflict() -> None:
    # ports tests/test_tools.py::test_tool_return_conflict: a tool named as an output tool is
    # refused when the agent is made; beside an output type of another name it is fine.
    @tool
    def ctx_tool(ctx: RunContext, x: int) -> int:
        """A tool."""
        return x

    Agent("a", ScriptedModel(["1"]), tools=[ctx_tool], output_type=int)
    with pytest.raises(ConfigurationError, match="ctx_tool"):
        Agent(
            "a",
            ScriptedModel(["1"]),
            tools=[ctx_tool],
            output_type=ToolOutput(int, name="ctx_tool"),
        )


# --- streaming (tests/test_streaming.py) ---


async def test_plain_response() -> None:
    # ports tests/test_streaming.py::test_plain_response: streamed text that is no JSON of
    # ``tuple[str, str]`` is sent back once, then the run fails (Exceeded maximum output
    # retries (1)); two requests.
    model = FunctionModel(lambda request: reply("hello world"), stream=True)
    result = await Agent("a", model, output_type=tuple[str, str]).run("")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2


class Apple(BaseModel):
    color: str


class Banana(BaseModel):
    length: float


async def test_stream_output_type_union_data_before_kind() -> None:
    # ports tests/test_streaming.py::test_stream_output_type_union_data_before_kind: a union
    # envelope streamed with ``data`` before ``kind`` is read as the member it names.
    text = '{"result": {"data": {"color": "red"}, "kind": "Apple"}}'
    model = ScriptedModel([text], stream=True)
    agent = Agent("a", model, output_type=PromptedOutput([Apple, Banana]))
    result = await agent.run("What fruit is it?")
    assert result.output == Apple(color="red"), result.error


# --- more output tests ---


async def test_agent_allows_none_output_prompted_structured_none() -> None:
    # ports test_agent_allows_none_output_prompted_structured_none: PromptedOutput([int,
    # NoneType]) answered with the NoneType member is the output None.
    answer = json.dumps({"result": {"kind": "NoneType", "data": {"response": None}}})
    model = ScriptedModel([answer])
    result = await Agent("a", model, output_type=PromptedOutput([int, type(None)])).run("hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, None), result.error


async def test_plain_response_then_tuple() -> None:
    # ports test_plain_response_then_tuple: text to an agent whose output is its output tool
    # alone is asked "Please include your response in a tool call."; the call that follows
    # is the output, answered "Final result processed.".
    model = ScriptedModel(["hello", tool_call("final_result", response=["foo", "bar"])])
    result = await Agent("a", model, output_type=ToolOutput(tuple[str, str])).run("Hello")
    assert result.output == ("foo", "bar"), result.error
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Hello"),
        ("assistant", "hello"),
        ("user", ask("include your response in a tool call")),
        ("assistant", ""),
        ("tool", "Final result processed."),
    ]
