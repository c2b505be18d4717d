"""pydantic-ai's retry prompts for answers that are no tool call, dataclass / TypedDict /
``None`` output types, tool results of NaN and infinity, and a response's tool calls sharing
an id, ported (a ninth batch; see test_pydantic_ai_ports.py to _8).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Optional

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tinyagents import (
    Agent,
    ModelRetry,
    NativeOutput,
    PromptedOutput,
    RunStatus,
    SubAgent,
    SubAgentTool,
    TextOutput,
    ToolOutput,
    tool,
)
from tinyagents.errors import ConfigurationError
from tinyagents.harness import LiteLLMModel, ModelResponse
from tinyagents.testkit import OpenAICompatServer, ScriptedModel, tool_call


class Foo(BaseModel):
    a: int
    b: str


# --- the retry prompt of an answer that is no tool call: pydantic-ai's words ---


async def test_retry_prompt_without_tool_name() -> None:
    # ports tests/models/test_huggingface.py::test_retry_prompt_without_tool_name: an output
    # validator's ModelRetry on a text answer reaches the model as RetryPromptPart's
    # model_response() writes one without a tool name.
    model = ScriptedModel(["invalid-response", "final-response"])
    agent = Agent("a", model)

    @agent.output_validator
    def response_validator(value: str) -> str:
        if value == "invalid-response":
            raise ModelRetry("Response is invalid")
        return value

    result = await agent.run("Hello")
    assert result.output == "final-response", result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nResponse is invalid\n\nFix the errors and try again."
    )


async def test_a_structured_answers_validator_retry_has_the_same_words() -> None:
    # pydantic-ai: any retry without a tool name (native, prompted output) is worded so
    for output_type in (Foo, PromptedOutput(Foo)):
        model = ScriptedModel(['{"a": 1, "b": "x"}', '{"a": 2, "b": "x"}'])
        agent = Agent("a", model, output_type=output_type)

        @agent.output_validator
        def two(value: Foo) -> Foo:
            if value.a != 2:
                raise ModelRetry("a must be 2")
            return value

        result = await agent.run("go")
        assert result.output == Foo(a=2, b="x"), result.error
        assert model.requests[1].messages[-1].content == (
            "Validation feedback:\na must be 2\n\nFix the errors and try again."
        )


async def test_a_text_output_functions_retry_has_the_same_words() -> None:
    def shout(text: str) -> str:
        if text == "quiet":
            raise ModelRetry("say it louder")
        return text.upper()

    model = ScriptedModel(["quiet", "loud"])
    result = await Agent("a", model, output_type=TextOutput(shout)).run("go")
    assert result.output == "LOUD", result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nsay it louder\n\nFix the errors and try again."
    )


async def test_text_where_an_output_tool_is_the_only_way_to_answer_is_validation_feedback() -> None:
    # tests/models/test_openai.py pins the words a RetryPromptPart of no tool sends
    model = ScriptedModel(["just text", tool_call("final_result", a=1, b="x")])
    result = await Agent("a", model, output_type=ToolOutput(Foo)).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nPlease include your response in a tool call.\n\n"
        "Fix the errors and try again."
    )


async def test_a_native_answer_that_does_not_validate_is_sent_back_as_its_errors() -> None:
    # pydantic-ai's NativeOutput retry: RetryPromptPart(content=<errors>) with no tool name,
    # the errors as JSON in a fence (a top-level error's input left out: the answer is in the
    # conversation), as a prompted answer's (test_pydantic_ai_ports_8.py)
    model = ScriptedModel(['{"a": "one", "b": "x"}', '{"a": 1, "b": "x"}'])
    result = await Agent("a", model, output_type=Foo).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert model.requests[1].messages[-1].content == (
        "1 validation error:\n"
        "```json\n"
        "[\n"
        "  {\n"
        '    "type": "int_parsing",\n'
        '    "loc": [\n'
        '      "a"\n'
        "    ],\n"
        '    "msg": "Input should be a valid integer, unable to parse string as an integer"\n'
        "  }\n"
        "]\n"
        "```\n\n"
        "Fix the errors and try again."
    )


# --- dataclass and TypedDict output types: an object schema, as pydantic-ai's is_model_like ---


@dataclasses.dataclass
class Point:
    x: int
    label: str = "p"


class Span(TypedDict):
    """A span of text."""

    start: int
    end: int


POINT_SCHEMA = {
    "properties": {
        "x": {"title": "X", "type": "integer"},
        "label": {"default": "p", "title": "Label", "type": "string"},
    },
    "required": ["x"],
    "title": "Point",
    "type": "object",
}


async def test_a_dataclass_output_type_is_an_object_schema() -> None:
    model = ScriptedModel(['{"x": 3}'])
    result = await Agent("a", model, output_type=Point).run("go")
    assert result.output == Point(x=3), result.error
    sent = model.requests[0].response_format
    assert sent is not None and sent.__name__ == "Point"
    assert sent.model_json_schema() == POINT_SCHEMA


async def test_a_typeddict_output_type_in_every_mode() -> None:
    answer = '{"start": 1, "end": 4}'
    for output_type in (Span, NativeOutput(Span), PromptedOutput(Span)):
        model = ScriptedModel([answer])
        result = await Agent("a", model, output_type=output_type).run("go")
        assert result.output == {"start": 1, "end": 4}, result.error
    model = ScriptedModel([tool_call("final_result", start=1, end=4)])
    result = await Agent("a", model, output_type=ToolOutput(Span)).run("go")
    assert result.output == {"start": 1, "end": 4}, result.error
    (spec,) = model.requests[0].tools
    assert spec.description == "A span of text."  # the schema's description, as pydantic-ai
    assert spec.parameters["properties"] == {  # no property titles, as pydantic-ai's
        "start": {"type": "integer"},
        "end": {"type": "integer"},
    }


async def test_a_dataclass_in_a_union_and_beside_text() -> None:
    model = ScriptedModel(['{"result": {"kind": "Point", "data": {"x": 2}}}'])
    result = await Agent("a", model, output_type=Point | Foo).run("go")
    assert result.output == Point(x=2), result.error
    model = ScriptedModel([tool_call("final_result_Point", x=5)])
    agent = Agent("a", model, output_type=[Point, Span, str])
    assert list(agent.output_tools) == ["final_result_Point", "final_result_Span"]
    assert (await agent.run("go")).output == Point(x=5)


async def test_a_dataclass_answer_that_does_not_validate_is_sent_back() -> None:
    model = ScriptedModel(['{"x": "many"}', '{"x": 1}'])
    result = await Agent("a", model, output_type=Point).run("go")
    assert result.output == Point(x=1), result.error
    assert '"loc": [\n      "x"\n    ]' in model.requests[1].messages[-1].content


# --- None in a union: pydantic-ai's allows_none ---


async def test_agent_allows_none_output_empty_response() -> None:
    # ports test_agent_allows_none_output_empty_response
    model = ScriptedModel([ModelResponse(text="")])
    result = await Agent("a", model, output_type=str | None).run("hello")
    assert result.status is RunStatus.COMPLETED and result.output is None, result.error
    assert len(model.requests) == 1


async def test_agent_still_fails_if_none_not_allowed() -> None:
    # ports test_agent_still_fails_if_none_not_allowed (ours asks once, then fails)
    model = ScriptedModel([ModelResponse(text=""), ModelResponse(text="")])
    result = await Agent("a", model, output_type=str).run("hello")
    assert result.status is RunStatus.FAILED


async def test_agent_allows_none_output_after_tool() -> None:
    # ports test_agent_allows_none_output_after_tool
    def noop() -> str:
        return "done"

    model = ScriptedModel([tool_call("noop"), ModelResponse(text="")])
    result = await Agent("a", model, tools=[tool(noop)], output_type=str | None).run("hello")
    assert result.output is None and len(model.requests) == 2, result.error


async def test_agent_allows_none_output_validator_called_and_retry() -> None:
    # ports test_agent_allows_none_output_validator_called and ..._validator_retry
    model = ScriptedModel([ModelResponse(text=""), "hello"])
    agent = Agent("a", model, output_type=str | None)
    seen: list[str | None] = []

    @agent.output_validator
    def reject_none(output: str | None) -> str | None:
        seen.append(output)
        if output is None:
            raise ModelRetry("None not acceptable, please respond")
        return output

    result = await agent.run("hello")
    assert result.output == "hello" and seen == [None, "hello"], result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nNone not acceptable, please respond\n\nFix the errors and try again."
    )


def test_agent_output_type_bare_none_error() -> None:
    # ports test_agent_output_type_bare_none_error; output_type=None itself is text here
    # (our default), so the refusal is of a union of None alone
    with pytest.raises(ConfigurationError, match="other than None"):
        Agent("a", ScriptedModel(["x"]), output_type=[None])


async def test_agent_allows_none_output_tool_mode_none_via_tool() -> None:
    # ports test_agent_allows_none_output_tool_mode_none_via_tool, with text beside (output
    # tools are ours only then; without text a union is one response_format, below)
    model = ScriptedModel([tool_call("final_result_NoneType", response=None)])
    agent = Agent("a", model, output_type=Foo | str | None)
    assert list(agent.output_tools) == ["final_result_Foo", "final_result_NoneType"]
    result = await agent.run("hello")
    assert result.output is None, result.error
    none_tool = model.requests[0].tools[1]
    assert none_tool.parameters == {
        "properties": {"response": {"type": "null"}},
        "required": ["response"],
        "type": "object",
    }


async def test_a_union_with_none_is_a_member_of_the_envelope() -> None:
    # pydantic-ai's NativeOutput of such a union: the NoneType member; an empty answer is None
    answer = '{"result": {"kind": "NoneType", "data": {"response": null}}}'
    for output_type in (int | None, Optional[Foo]):  # noqa: UP045 - typing.Union too
        model = ScriptedModel([answer])
        agent = Agent("a", model, output_type=output_type)
        assert (await agent.run("hello")).output is None
        sent = model.requests[0].response_format
        assert sent is not None and sent.__name__.endswith("_or_NoneType")
    model = ScriptedModel(['{"result": {"kind": "int", "data": {"response": 42}}}'])
    assert (await Agent("a", model, output_type=int | None).run("hello")).output == 42
    model = ScriptedModel([ModelResponse(text="")])
    # ports test_agent_allows_none_output_tool_mode_empty_response
    assert (await Agent("a", model, output_type=int | None).run("hello")).output is None


async def test_agent_allows_none_output_native_and_prompted_structured_none() -> None:
    # ports test_agent_allows_none_output_native_structured_none and ..._prompted_...
    answer = json.dumps({"result": {"kind": "NoneType", "data": {"response": None}}})
    for marker in (NativeOutput, PromptedOutput):
        model = ScriptedModel([answer])
        agent = Agent("a", model, output_type=marker([int, type(None)]))
        assert (await agent.run("hello")).output is None


async def test_agent_allows_none_output_tool_output_union_null() -> None:
    # ports test_agent_allows_none_output_tool_output_union_null
    model = ScriptedModel([tool_call("final_result", response=None)])
    result = await Agent("a", model, output_type=ToolOutput(int | None)).run("hello")
    assert result.output is None, result.error


async def test_agent_allows_none_output_explicit_none_tool() -> None:
    # ports test_agent_allows_none_output_explicit_none_tool
    model = ScriptedModel([tool_call("final_result_NoneType", response=None)])
    agent = Agent("a", model, output_type=[ToolOutput(int), ToolOutput(type(None))])
    result = await agent.run("hello")
    assert result.output is None, result.error


# --- tool calls of one response that share an id (pydantic-ai runs every one) ---


async def test_calls_sharing_an_id_with_other_arguments_both_run_under_ids_of_their_own() -> None:
    # as pydantic-ai runs both; the second is given an id of its own, so each result pairs
    # with its call (providers refuse results they cannot pair)
    runs: list[int] = []

    def charge(amount: int) -> str:
        runs.append(amount)
        return f"charged {amount}"

    one, two = tool_call("charge", amount=5), tool_call("charge", amount=7)
    shared = dataclasses.replace(two.tool_calls[0], id=one.tool_calls[0].id)
    model = ScriptedModel([ModelResponse(tool_calls=[one.tool_calls[0], shared]), "done"])
    result = await Agent("a", model, tools=[tool(charge)]).run("go")
    assert result.output == "done" and runs == [5, 7], result.error
    ids = [m.tool_call_id for m in model.requests[1].messages if m.role == "tool"]
    assert len(set(ids)) == 2


# --- through litellm and the OpenAI-compatible server, and up to a parent ---


async def test_a_dataclass_and_an_optional_type_reach_an_openai_server_as_their_schemas() -> None:
    replies = ['{"x": 4}', '{"result": {"kind": "NoneType", "data": {"response": null}}}']
    async with OpenAICompatServer(replies) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        point = await Agent("a", model, output_type=Point).run("Hello")
        nothing = await Agent("a", model, output_type=int | None).run("Hello")
    assert point.output == Point(x=4), point.error
    assert nothing.status is RunStatus.COMPLETED and nothing.output is None, nothing.error
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Point"
    assert set(sent["json_schema"]["schema"]["properties"]) == {"x", "label"}
    sent = server.requests[1]["response_format"]["json_schema"]
    assert sent["name"] == "int_or_NoneType"
    assert server.refusals == []


async def test_a_sub_agents_dataclass_output_reaches_its_parent_as_json() -> None:
    child = Agent("child", ScriptedModel(['{"x": 2, "label": "q"}']), output_type=Point)
    assert await SubAgent(child).invoke("go") == Point(x=2, label="q")
    parent_model = ScriptedModel([tool_call("child", input="go"), "done"])
    child = Agent("child", ScriptedModel(['{"x": 2, "label": "q"}']), output_type=Point)
    parent = Agent("parent", parent_model, tools=[SubAgentTool(child)])
    assert (await parent.run("go")).output == "done"
    (result,) = [m for m in parent_model.requests[1].messages if m.role == "tool"]
    assert json.loads(result.content) == {"x": 2, "label": "q"}
