"""The testkit server's ``mode="openai"``: what OpenAI's API refuses with an HTTP 400 and the
other modes let through, and litellm's real HTTP path against it (tool settings without
tools, a named ``tool_choice`` whose tool a run does not have, strict structured output)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

from typing import Any

import aiohttp
import pytest
from pydantic import BaseModel

from tinyagents import Agent, LiteLLMModel, Runtime, tool
from tinyagents.errors import ModelRequestRejected
from tinyagents.harness import Message, ModelRequest
from tinyagents.testkit import OpenAICompatServer
from tinyagents.testkit.server_rules import openai_param, openai_violation

ASKED = {"role": "user", "content": "2+3?"}
TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
FORCE_ADD = {"type": "function", "function": {"name": "add"}}
FORCE_SUB = {"type": "function", "function": {"name": "sub"}}


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "Out", "schema": schema, "strict": True}}


HOLDABLE = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "inner": {"$ref": "#/$defs/Inner"}},
    "required": ["a", "inner"],
    "additionalProperties": False,
    "$defs": {
        "Inner": {
            "type": "object",
            "properties": {"b": {"type": "string"}},
            "required": ["b"],
            "additionalProperties": False,
        }
    },
}

OPENAI_REFUSES: dict[str, tuple[dict[str, Any], str]] = {
    "tool_choice without tools": ({"tool_choice": "auto"}, "tool_choice"),
    "parallel_tool_calls without tools": ({"parallel_tool_calls": False}, "parallel_tool_calls"),
    "tools that is an empty list": ({"tools": [], "tool_choice": "auto"}, "tools"),
    "a named tool_choice that is not among tools": (
        {"tools": [TOOL], "tool_choice": FORCE_SUB},
        "tool_choice",
    ),
    "a strict schema taking extra properties": (
        {"response_format": _strict({**HOLDABLE, "additionalProperties": True})},
        "response_format",
    ),
    "a strict schema without additionalProperties": (
        {"response_format": _strict({"type": "object", "properties": {}, "required": []})},
        "response_format",
    ),
    "a strict schema with an optional property": (
        {"response_format": _strict({**HOLDABLE, "required": ["a"]})},
        "response_format",
    ),
    "a strict schema whose nested object takes extra properties": (
        {
            "response_format": _strict(
                {**HOLDABLE, "$defs": {"Inner": {"type": "object", "properties": {}}}}
            )
        },
        "response_format",
    ),
}


@pytest.mark.parametrize("case", sorted(OPENAI_REFUSES))
def test_openai_mode_refuses_what_openai_refuses(case: str) -> None:
    fields, param = OPENAI_REFUSES[case]
    problem = openai_violation({"model": "m", "messages": [ASKED], **fields})
    assert problem is not None
    assert openai_param(problem) == param


def test_openai_mode_accepts_what_openai_accepts() -> None:
    good = {
        "model": "m",
        "messages": [ASKED],
        "tools": [TOOL],
        "tool_choice": FORCE_ADD,
        "parallel_tool_calls": False,
        "response_format": _strict(HOLDABLE),
    }
    assert openai_violation(good) is None
    assert openai_violation({**good, "tool_choice": "required"}) is None
    assert openai_violation({"model": "m", "messages": [ASKED], "tool_choice": None}) is None
    # strict mode's rules bind only a schema sent strict: true
    lax = {**_strict({"type": "object", "additionalProperties": True}), "strict": False}
    lax["json_schema"] = {**lax["json_schema"], "strict": False}
    assert openai_violation({"model": "m", "messages": [ASKED], "response_format": lax}) is None


async def test_a_refused_request_is_openais_400_and_uses_up_no_reply() -> None:
    async with (
        OpenAICompatServer(["hi"], mode="openai") as server,
        aiohttp.ClientSession() as session,
    ):
        body = {"model": "m", "messages": [ASKED], "tool_choice": "auto"}
        async with session.post(f"{server.base_url}/chat/completions", json=body) as answer:
            assert answer.status == 400
            error = (await answer.json())["error"]
        async with session.post(
            f"{server.base_url}/chat/completions", json={"model": "m", "messages": [ASKED]}
        ) as answer:
            assert answer.status == 200
            assert (await answer.json())["choices"][0]["message"]["content"] == "hi"
    assert error == {
        "message": "Invalid value for 'tool_choice': 'tool_choice' is only allowed when "
        "'tools' are specified.",
        "type": "invalid_request_error",
        "param": "tool_choice",
        "code": None,
    }
    assert server.refusals == [error["message"]]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def model_for(server: OpenAICompatServer, **kw: Any) -> LiteLLMModel:
    kw.setdefault("max_retries", 0)  # a refusal must be the first error, not retried away
    return LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test", **kw)


async def test_litellm_is_refused_over_http_as_openai_refuses() -> None:
    # the strict server refuses litellm's real request, as OpenAI would: a schema strict mode
    # cannot hold, sent strict: true, is a ModelRequestRejected naming the problem
    async with OpenAICompatServer(["unused"], mode="openai") as server:
        request = ModelRequest(
            messages=[Message(role="user", content="hi")],
            response_format=_strict({"type": "object", "properties": {"a": {}}}),
        )
        with pytest.raises(ModelRequestRejected, match="additionalProperties"):
            await model_for(server, stream=False).request(request)
    assert len(server.refusals) == 1


class Loose(BaseModel):
    values: dict[str, int]


async def test_tool_settings_and_structured_output_pass_against_openai_mode() -> None:
    # what LiteLLMModel sends is what OpenAI takes: tool settings left out without tools,
    # a schema strict mode cannot hold (a dict field) sent strict: false
    async with OpenAICompatServer(['{"values": {"a": 1}}', "Paris"], mode="openai") as server:
        model = model_for(server, parallel_tool_calls=False, tool_choice="auto")
        structured = await Agent("s", model, output_type=Loose).run("count")
        async with Runtime() as rt:
            granted_none = await rt.start(Agent("t", model, tools=[add]), "go", tools=[])
            plain = await granted_none.result()
    assert server.refusals == []
    assert structured.output == Loose(values={"a": 1})
    assert plain.output == "Paris"
