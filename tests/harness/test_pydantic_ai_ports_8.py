"""pydantic-ai's output retry counting, ``sequential`` tools, prompted output's retry prompt
and non-object output types, ported (an eighth batch; see test_pydantic_ai_ports.py to _7).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from tinyagents import Agent, ModelRetry, PromptedOutput, RunContext, RunStatus, ToolOutput, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import LiteLLMModel, ModelRequest, ModelResponse
from tinyagents.testkit import (
    FunctionModel,
    OpenAICompatServer,
    ScriptedModel,
    tool_call,
    tool_calls,
)


class Foo(BaseModel):
    a: int
    b: str


class OutputType(BaseModel):
    value: str


def tool_results(request: ModelRequest) -> list[tuple[str | None, str]]:
    return [(m.name, m.content) for m in request.messages if m.role == "tool"]


# --- output retries: per output tool, as pydantic-ai counts them --------------------------------


async def test_each_output_tool_counts_its_own_retries_against_output_retries() -> None:
    # pydantic-ai's OutputToolset gives each output tool output_retries as its max_retries,
    # and ToolManager counts retries per tool name: a call of A sent back and a call of B
    # sent back are one each, under output_retries=1.
    def output_a(value: str) -> str:
        if value == "bad":
            raise ModelRetry("bad a")
        return f"A: {value}"

    def output_b(value: str) -> str:
        raise ModelRetry("bad b")

    model = ScriptedModel(
        [
            tool_call("final_result_output_a", value="bad"),
            tool_call("final_result_output_b", value="x"),
            tool_call("final_result_output_a", value="good"),
        ]
    )
    agent = Agent("a", model, output_type=[output_a, output_b], output_retries=1)
    result = await agent.run("go")
    assert result.output == "A: good", result.error
    model = ScriptedModel([tool_call("final_result_output_a", value="bad")] * 3)
    result = await Agent("a", model, output_type=[output_a, output_b], output_retries=1).run("go")
    assert result.status == RunStatus.FAILED
    assert "output_retries=1" in (result.error or "")
    assert len(model.requests) == 2


async def test_an_output_functions_context_counts_its_own_tools_retries() -> None:
    # ctx.retry of an output function is its tool's count (ToolManager's retries[name]).
    seen: list[tuple[str, int, int | None]] = []

    def output_a(ctx: RunContext, value: str) -> str:
        seen.append(("a", ctx.retry, ctx.max_retries))
        if value == "bad":
            raise ModelRetry("bad a")
        return value

    def output_b(ctx: RunContext, value: str) -> str:
        seen.append(("b", ctx.retry, ctx.max_retries))
        raise ModelRetry("bad b")

    model = ScriptedModel(
        [
            tool_call("final_result_output_a", value="bad"),
            tool_call("final_result_output_b", value="x"),
            tool_call("final_result_output_a", value="good"),
        ]
    )
    result = await Agent("a", model, output_type=[output_a, output_b], output_retries=2).run("go")
    assert result.output == "good", result.error
    assert seen == [("a", 0, 2), ("b", 0, 2), ("a", 1, 2)]


async def test_output_validator_retry_consistency_across_paths() -> None:
    # ports test_output_validator_retry_consistency_across_paths: output validators see the
    # run's output retries and the agent's output_retries, not a ToolOutput's own cap.
    retries: list[int] = []
    caps: list[int | None] = []

    def answer(request: ModelRequest) -> ModelResponse:
        return tool_call(request.tools[0].name, a=1, b="foo")

    agent = Agent(
        "a", FunctionModel(answer), output_type=ToolOutput(Foo, max_retries=5), output_retries=2
    )

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        retries.append(ctx.retry)
        caps.append(ctx.max_retries)
        if ctx.retry == 2:
            return o
        raise ModelRetry(f"Retry {ctx.retry}")

    result = await agent.run("Hello")
    assert result.output == Foo(a=1, b="foo"), result.error
    assert retries == [0, 1, 2]
    assert caps == [2, 2, 2]


async def test_output_validator_retry_counter_with_tool_switch() -> None:
    # ports test_output_validator_retry_counter_with_tool_switch: the run's count goes on
    # across output tools; each tool's own count (its cap) is apart.
    retries: list[int] = []
    caps: list[int | None] = []

    def output_a(value: str) -> str:
        return value

    def output_b(value: str) -> str:
        return value

    calls = 0

    def answer(request: ModelRequest) -> ModelResponse:
        nonlocal calls
        calls += 1
        names = [t.name for t in request.tools]
        name = next(n for n in names if ("output_b" if calls == 1 else "output_a") in n)
        return tool_call(name, value="x" if calls == 1 else "hello")

    agent = Agent(
        "a",
        FunctionModel(answer),
        output_type=[ToolOutput(output_a, max_retries=3), ToolOutput(output_b, max_retries=1)],
        output_retries=0,
    )

    @agent.output_validator
    def validate_output(ctx: RunContext, o: str) -> str:
        retries.append(ctx.retry)
        caps.append(ctx.max_retries)
        if ctx.retry < 2:
            raise ModelRetry(f"Retry {ctx.retry}")
        return o

    result = await agent.run("Hello")
    assert result.output == "hello", result.error
    assert retries == [0, 1, 2]
    assert caps == [0, 0, 0]


async def test_output_tool_validation_vs_execution_retry_counting() -> None:
    # ports test_output_tool_validation_vs_execution_retry_counting: arguments that do not
    # validate count as a retry too (the validator first sees retry 1).
    retries: list[int] = []
    calls = 0

    def answer(request: ModelRequest) -> ModelResponse:
        nonlocal calls
        calls += 1
        name = request.tools[0].name
        return tool_call(name, bad_field=1) if calls == 1 else tool_call(name, a=1, b="foo")

    agent = Agent("a", FunctionModel(answer), output_type=ToolOutput(Foo), output_retries=5)

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        retries.append(ctx.retry)
        if ctx.retry < 2:
            raise ModelRetry(f"Retry {ctx.retry}")
        return o

    result = await agent.run("Hello")
    assert result.output == Foo(a=1, b="foo"), result.error
    assert retries == [1, 2]


async def test_output_validator_exceeds_output_retries() -> None:
    # ports test_output_validator_exceeds_output_retries
    retries: list[int] = []

    def answer(request: ModelRequest) -> ModelResponse:
        return tool_call(request.tools[0].name, a=1, b="foo")

    agent = Agent("a", FunctionModel(answer), output_type=ToolOutput(Foo), output_retries=2)

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        retries.append(ctx.retry)
        raise ModelRetry(f"Retry {ctx.retry}")

    result = await agent.run("Hello")
    assert result.status == RunStatus.FAILED
    assert "output_retries=2" in (result.error or "")
    assert retries == [0, 1, 2]


# --- sequential tools: every call runs alone here -------------------------------------------------


async def test_sequential_tool_is_a_per_tool_barrier() -> None:
    # ports test_sequential_tool_is_a_per_tool_barrier: a sequential=True tool runs with no
    # other call in flight. Here every call runs alone (a response's calls one after
    # another), so no two are ever in flight together.
    active = 0
    most = 0
    barrier_ran_alone = True

    async def track(name: str) -> str:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0)  # another call would start here if calls overlapped
        active -= 1
        return name

    @tool
    async def parallel_a() -> str:
        return await track("a")

    @tool
    async def parallel_b() -> str:
        return await track("b")

    @tool(sequential=True)
    async def barrier() -> str:
        nonlocal barrier_ran_alone
        barrier_ran_alone = active == 0
        await asyncio.sleep(0)
        return "barrier"

    @tool
    async def parallel_c() -> str:
        return await track("c")

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("parallel_a"),
                tool_call("parallel_b"),
                tool_call("barrier"),
                tool_call("parallel_c"),
            ),
            "done",
        ]
    )
    tools = [parallel_a, parallel_b, barrier, parallel_c]
    result = await Agent("a", model, tools=tools).run("test")
    assert result.output == "done", result.error
    assert barrier_ran_alone and most == 1
    assert barrier.sequential is True and parallel_a.sequential is False


async def test_sequential_calls() -> None:
    # ports test_sequential_calls ('argument' mode): the calls before a sequential tool see
    # the state before it, those after see what it did.
    holder = 1
    seen: list[tuple[str, int]] = []

    @tool
    def call_first() -> None:
        seen.append(("first", holder))

    @tool(sequential=True)
    def increment_integer_holder() -> None:
        nonlocal holder
        holder = 2

    @tool
    def call_second() -> None:
        seen.append(("second", holder))

    calls = [tool_call("call_first")] * 3 + [tool_call("increment_integer_holder")]
    calls += [tool_call("call_second")] * 3
    model = ScriptedModel([tool_calls(*calls), "done"])
    tools = [call_first, increment_integer_holder, call_second]
    result = await Agent("a", model, tools=tools).run("call a lot of tools")
    assert result.output == "done", result.error
    assert seen == [("first", 1)] * 3 + [("second", 2)] * 3


async def test_tool_output_sequential_barrier() -> None:
    # ports test_exhaustive_tool_output_sequential_barrier: the tool calls before a
    # ToolOutput(sequential=True)'s call have run when it runs (we have no 'exhaustive' end
    # strategy: every call runs in the model's order, output calls included).
    events: list[str] = []

    def do_output(output: OutputType) -> OutputType:
        events.append("output")
        return output

    @tool
    async def tool_a() -> str:
        await asyncio.sleep(0)
        events.append("tool_a")
        return "a"

    marker = ToolOutput(do_output, name="do_output", sequential=True)
    assert marker.sequential is True
    model = ScriptedModel(
        [tool_calls(tool_call("tool_a"), tool_call("do_output", output={"value": "done"}))]
    )
    result = await Agent("a", model, tools=[tool_a], output_type=marker).run("test")
    assert result.output == OutputType(value="done"), result.error
    assert events == ["tool_a", "output"]


def test_sequential_that_is_no_bool_is_refused() -> None:
    # as Tool(sequential=...) refuses it: "no" would read as true
    with pytest.raises(ConfigurationError, match="sequential must be True or False"):
        ToolOutput(Foo, sequential="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="sequential must be True or False"):
        tool(name="t", sequential="no")(lambda: None)  # type: ignore[call-overload]


# --- PromptedOutput: the retry prompt is pydantic-ai's ------------------------------------------


class Apple(BaseModel):
    color: str


class Banana(BaseModel):
    length: float


async def test_prompted_output_union_invalid_kind_retries() -> None:
    # ports test_prompted_output_union_invalid_kind_retries: a kind that is no member's is
    # sent back, as pydantic-ai's RetryPromptPart.model_response() words it for an answer
    # that is no tool call (its errors as JSON; no response format to point at: none is sent).
    model = ScriptedModel(
        [
            '{"result": {"kind": "Cherry", "data": {"color": "red"}}}',
            '{"result": {"kind": "Banana", "data": {"length": 6.0}}}',
        ]
    )
    result = await Agent("a", model, output_type=PromptedOutput([Apple, Banana])).run("fruit?")
    assert result.output == Banana(length=6.0), result.error
    assert model.requests[0].response_format is None and not model.requests[0].tools
    assert model.requests[1].messages[-1].content == (
        "1 validation error:\n"
        "```json\n"
        "[\n"
        "  {\n"
        '    "type": "literal_error",\n'
        '    "loc": [\n'
        '      "result",\n'
        '      "kind"\n'
        "    ],\n"
        "    \"msg\": \"Input should be 'Apple' or 'Banana'\",\n"
        '    "input": "Cherry"\n'
        "  }\n"
        "]\n"
        "```\n\n"
        "Fix the errors and try again."
    )


async def test_a_prompted_answers_top_level_errors_leave_out_the_input() -> None:
    # pydantic-ai leaves a top-level error's input out (the answer is in the conversation
    # already) and keeps a nested one's; two errors are "2 validation errors".
    model = ScriptedModel(["not json", '{"b": 3}', '{"a": 1, "b": "x"}'])
    result = await Agent("a", model, output_type=PromptedOutput(Foo), output_retries=2).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    first = model.requests[1].messages[-1].content
    assert first.startswith("1 validation error:\n```json\n")
    assert '"type": "json_invalid"' in first and '"input"' not in first
    assert "response format" not in first
    assert first.endswith("```\n\nFix the errors and try again.")
    second = model.requests[2].messages[-1].content
    assert second.startswith("2 validation errors:\n")
    assert '"loc": [\n      "a"\n    ]' in second and '"input"' not in second


# --- output types that are no object: wrapped in {"response": ...}, as pydantic-ai wraps them ---


class Person(BaseModel):
    name: str


class Bar(BaseModel):
    c: bool


INT_SCHEMA = {
    "properties": {"response": {"type": "integer"}},
    "required": ["response"],
    "type": "object",
}


async def test_tool_output_of_a_scalar_is_wrapped_in_a_response_object() -> None:
    # pydantic-ai's ObjectOutputProcessor: a type whose schema is no object is the
    # "response" of one, and the call's output is that response.
    model = ScriptedModel([tool_call("final_result", response=42)])
    result = await Agent("a", model, output_type=ToolOutput(int)).run("go")
    assert result.output == 42, result.error
    (spec,) = model.requests[0].tools
    assert spec.parameters == INT_SCHEMA
    assert spec.description == "The final response which ends this conversation"


async def test_a_scalar_output_type_is_the_response_of_the_response_format() -> None:
    model = ScriptedModel(['{"response": 42}'])
    agent = Agent("a", model, output_type=int)
    result = await agent.run("go")
    assert result.output == 42, result.error
    sent = model.requests[0].response_format
    assert sent is not None and sent.model_json_schema() == INT_SCHEMA
    assert sent.__name__ == "int"


async def test_a_scalar_answer_that_does_not_validate_is_sent_back() -> None:
    model = ScriptedModel(['{"response": "many"}', '{"response": 3}'])
    result = await Agent("a", model, output_type=int).run("go")
    assert result.output == 3, result.error
    sent = model.requests[1].messages[-1].content
    assert '"loc": [\n      "response"\n    ],\n    "msg": "Input should be a valid integer' in sent


async def test_result_list_of_models_with_stringified_response() -> None:
    # ports test_result_list_of_models_with_stringified_response: the response may be the
    # JSON of the value as a string (some providers send it so).
    people = [{"name": "John Doe"}, {"name": "Jane Smith"}]
    model = ScriptedModel([json.dumps({"response": json.dumps(people)})])
    result = await Agent("a", model, output_type=list[Person]).run("Hello")
    assert result.output == [Person(name="John Doe"), Person(name="Jane Smith")], result.error


def test_response_tuple() -> None:
    # ports test_response_tuple's schema
    agent = Agent("a", ScriptedModel(["x"]), output_type=tuple[str, str])
    assert agent.output_type is not None
    assert agent.output_type.model_json_schema() == {
        "properties": {
            "response": {
                "maxItems": 2,
                "minItems": 2,
                "prefixItems": [{"type": "string"}, {"type": "string"}],
                "type": "array",
            }
        },
        "required": ["response"],
        "type": "object",
    }


async def test_tool_output_of_a_union_is_one_wrapped_tool() -> None:
    # ports test_output_type_tool_output_union's schema: ToolOutput(Foo | Bar) is one tool
    # whose response is either.
    model = ScriptedModel([tool_call("final_result", response={"c": True})])
    result = await Agent("a", model, output_type=ToolOutput(Foo | Bar, strict=False)).run("go")
    assert result.output == Bar(c=True), result.error
    (spec,) = model.requests[0].tools
    assert spec.parameters == {
        "$defs": {
            "Bar": {
                "properties": {"c": {"type": "boolean"}},
                "required": ["c"],
                "title": "Bar",
                "type": "object",
            },
            "Foo": {
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["a", "b"],
                "title": "Foo",
                "type": "object",
            },
        },
        "properties": {"response": {"anyOf": [{"$ref": "#/$defs/Foo"}, {"$ref": "#/$defs/Bar"}]}},
        "required": ["response"],
        "type": "object",
    }
    assert spec.strict is False


async def test_a_scalar_beside_text_is_an_output_tool() -> None:
    # output_type=[int, str]: pydantic-ai's final_result tool (wrapped) beside text
    model = ScriptedModel([tool_call("final_result", response=7)])
    result = await Agent("a", model, output_type=[int, str]).run("go")
    assert result.output == 7, result.error
    assert model.requests[0].tools[0].parameters == INT_SCHEMA
    model = ScriptedModel(["words"])
    assert (await Agent("a", model, output_type=[int, str]).run("go")).output == "words"


async def test_a_scalar_in_a_union_of_models_is_a_member_of_the_envelope() -> None:
    # a union without text is one response_format (pydantic-ai's native union): the scalar's
    # member is named by its type, its data the wrapped object.
    model = ScriptedModel(['{"result": {"kind": "int", "data": {"response": 5}}}'])
    agent = Agent("a", model, output_type=Foo | int)
    result = await agent.run("go")
    assert result.output == 5, result.error
    model = ScriptedModel(['{"result": {"kind": "Foo", "data": {"a": 1, "b": "x"}}}'])
    result = await Agent("a", model, output_type=[Foo, int]).run("go")
    assert result.output == Foo(a=1, b="x"), result.error


def test_an_output_type_pydantic_cannot_read_is_refused() -> None:
    class Plain:
        pass

    for output_type in (Plain, ToolOutput(Plain), [Plain, str]):
        with pytest.raises(ConfigurationError, match="output_type"):
            Agent("a", ScriptedModel(["x"]), output_type=output_type)


async def test_a_scalar_output_type_is_sent_to_an_openai_server_as_its_wrapped_schema() -> None:
    async with OpenAICompatServer(['{"response": [1, 2]}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        result = await Agent("a", model, output_type=list[int]).run("Hello")
    assert result.output == [1, 2], result.error
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "list"
    schema = sent["json_schema"]["schema"]
    assert schema["properties"] == {"response": {"items": {"type": "integer"}, "type": "array"}}
    assert schema["required"] == ["response"]
