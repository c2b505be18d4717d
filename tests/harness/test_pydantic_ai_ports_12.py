"""pydantic-ai's per-tool count of an output tool's retries beside empty answers, its
``StructuredDict`` output type, its ``Agent(retries=...)`` budgets, and more of its agent
tests, ported (a twelfth batch; see test_pydantic_ai_ports.py to _11).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from tinyagents import (
    Agent,
    ModelRetry,
    RunContext,
    RunLimits,
    RunStatus,
    StructuredDict,
    TextOutput,
    ToolOutput,
    tool,
)
from tinyagents.errors import ConfigurationError, InvalidIdError
from tinyagents.harness import LiteLLMModel, ModelResponse
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


# --- an output tool's own retries do not count empty answers (pydantic-ai's retries[name]) ---


async def test_an_output_functions_retry_does_not_count_empty_answers() -> None:
    # pydantic-ai: an empty answer spends output_retries_used (consume_output_retry); an
    # output tool's own count, retries[name], which its output function sees in ctx.retry
    # and which ends the run past the tool's max_retries, counts only its own calls sent
    # back. Output validators see output_retries_used (the empty answer counted).
    function_retries: list[int] = []
    validator_retries: list[int] = []

    def get_weather(ctx: RunContext, city: str) -> str:
        function_retries.append(ctx.retry)
        if ctx.retry == 0:
            raise ModelRetry("again")
        return f"Weather in {city}"

    model = ScriptedModel(
        [
            ModelResponse(text=""),
            tool_call("final_result", city="Paris"),
            tool_call("final_result", city="Paris"),
        ]
    )
    agent = Agent("a", model, output_type=get_weather, output_retries=2)

    @agent.output_validator
    def validate(ctx: RunContext, output: str) -> str:
        validator_retries.append(ctx.retry)
        return output

    result = await agent.run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "Weather in Paris"), result.error
    assert function_retries == [0, 1]
    # the empty answer and the output function's ModelRetry, both in output_retries_used
    assert validator_retries == [2]


async def test_an_output_tool_call_sent_back_after_an_empty_answer_is_within_its_own_cap() -> None:
    # pydantic-ai: output_retries=1; the empty answer spends the run's one output retry
    # (1 <= 1), and the invalid output tool call is checked against the tool's own count
    # (retries[name] 0 < max_retries 1): asked again, and the third answer is the output.
    model = ScriptedModel(
        [
            ModelResponse(text=""),
            tool_call("final_result", a="x", b="y"),
            tool_call("final_result", a=1, b="y"),
        ]
    )
    result = await Agent("a", model, output_type=ToolOutput(Foo)).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(a=1, b="y")), result.error


async def test_an_empty_answer_after_an_output_tool_call_sent_back_spends_the_output_retries() -> (
    None
):
    # the other way round: the output tool call sent back adds to output_retries_used
    # (_tool_execution's output_retries_increment), so the empty answer after it is past
    # output_retries=1 (2 > 1): pydantic-ai raises "Exceeded maximum output retries (1)".
    model = ScriptedModel(
        [
            tool_call("final_result", a="x", b="y"),
            ModelResponse(text=""),
            tool_call("final_result", a=1, b="y"),
        ]
    )
    result = await Agent("a", model, output_type=ToolOutput(Foo)).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2


# --- StructuredDict (pydantic-ai's pydantic_ai.output.StructuredDict) ---

PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
ANIMAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "species": {"type": "string"}},
    "required": ["name", "species"],
}


async def test_output_type_structured_dict() -> None:
    # ports test_output_type_structured_dict. pydantic-ai offers a list of output types as
    # output tools by default; ours sends a union as one response_format (docs/harness.md),
    # so the output tools are asked for with ToolOutput. Their tools are pydantic-ai's.
    person = StructuredDict(PERSON_SCHEMA, name="Person", description="A person")
    animal = StructuredDict(ANIMAL_SCHEMA, name="Animal", description="An animal")
    model = ScriptedModel([tool_call("final_result_Person", name="John Doe", age=30)])
    agent = Agent("a", model, output_type=[ToolOutput(person), ToolOutput(animal)])
    result = await agent.run("Generate a person")
    assert (result.status, result.output) == (RunStatus.COMPLETED, {"name": "John Doe", "age": 30})
    assert type(result.output) is dict
    tools = [(t.name, t.description, t.parameters) for t in model.requests[0].tools]
    assert tools == [
        (
            "final_result_Person",
            "A person",
            {
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
                "title": "Person",
                "type": "object",
            },
        ),
        (
            "final_result_Animal",
            "An animal",
            {
                "properties": {"name": {"type": "string"}, "species": {"type": "string"}},
                "required": ["name", "species"],
                "title": "Animal",
                "type": "object",
            },
        ),
    ]


async def test_structured_dict_as_the_output_type_is_the_response_format() -> None:
    # our default structured output (pydantic-ai's NativeOutput): its schema, as given and
    # titled, is the response_format; the answer's object is the output, as a dict.
    person = StructuredDict(PERSON_SCHEMA, name="Person")
    model = ScriptedModel(['{"name": "Ann", "age": 41}'])
    result = await Agent("a", model, output_type=person).run("Generate a person")
    assert (result.status, result.output) == (RunStatus.COMPLETED, {"name": "Ann", "age": 41})
    sent = model.requests[0].response_format
    assert isinstance(sent, type) and sent.model_json_schema() == {
        **PERSON_SCHEMA,
        "title": "Person",
    }


async def test_structured_dict_reads_any_object_as_pydantic_ai_does() -> None:
    # pydantic-ai reads a StructuredDict's answer as dict[str, Any]: the schema is what the
    # model is told, not checked (a missing "age" is taken); an answer that is no object is
    # sent back.
    person = StructuredDict(PERSON_SCHEMA)
    model = ScriptedModel(
        [tool_call("final_result", response=[1]), tool_call("final_result", name="Ann")]
    )
    # a ToolOutput's arguments are the object itself: a list under "response" is still a dict
    result = await Agent("a", model, output_type=ToolOutput(person)).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, {"response": [1]})
    model = ScriptedModel(["[1, 2]", '{"name": "Ann"}'])
    result = await Agent("a", model, output_type=person).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, {"name": "Ann"}), result.error
    assert len(model.requests) == 2


async def test_output_type_structured_dict_nested() -> None:
    # ports test_output_type_structured_dict_nested: $defs are inlined into the tool's schema
    car = StructuredDict(
        {
            "$defs": {
                "Tire": {
                    "type": "object",
                    "properties": {"brand": {"type": "string"}, "size": {"type": "integer"}},
                    "required": ["brand", "size"],
                }
            },
            "type": "object",
            "properties": {
                "make": {"type": "string"},
                "model": {"type": "string"},
                "tires": {"type": "array", "items": {"$ref": "#/$defs/Tire"}},
            },
            "required": ["make", "model", "tires"],
        },
        name="Car",
        description="A car with tires",
    )
    args = {"make": "Toyota", "model": "Camry", "tires": [{"brand": "Michelin", "size": 17}]}
    model = ScriptedModel([tool_call("final_result", **args)])
    result = await Agent("a", model, output_type=ToolOutput(car)).run("Generate a car")
    assert (result.status, result.output) == (RunStatus.COMPLETED, args)
    (spec,) = model.requests[0].tools
    assert spec.parameters == {
        "properties": {
            "make": {"type": "string"},
            "model": {"type": "string"},
            "tires": {
                "items": {
                    "properties": {"brand": {"type": "string"}, "size": {"type": "integer"}},
                    "required": ["brand", "size"],
                    "type": "object",
                },
                "type": "array",
            },
        },
        "required": ["make", "model", "tires"],
        "title": "Car",
        "type": "object",
    }
    assert spec.description == "A car with tires"


def test_structured_dict_recursive_refs() -> None:
    # ports test_structured_dict_recursive_refs: pydantic-ai's UserError, our
    # ConfigurationError
    class Node(BaseModel):
        nodes: list[Node] | dict[str, Node]

    with pytest.raises(ConfigurationError, match=r"does not support recursive \$refs"):
        StructuredDict(Node.model_json_schema())


def test_structured_dict_takes_an_object_schema_only() -> None:
    # pydantic-ai's check_object_json_schema: "Schema must be an object"; a top-level $ref to
    # an object in $defs is that object.
    with pytest.raises(ConfigurationError, match="must be an object's"):
        StructuredDict({"type": "array", "items": {"type": "string"}})
    with pytest.raises(ConfigurationError, match="JSON schema"):
        StructuredDict("not a schema")  # type: ignore[arg-type]
    referred = StructuredDict({"$defs": {"P": PERSON_SCHEMA}, "$ref": "#/$defs/P"})
    assert TypeAdapter(referred).json_schema() == PERSON_SCHEMA
    assert referred.__name__ == "StructuredDict"


def test_structured_dict_takes_its_name_and_description_from_its_schema() -> None:
    # pydantic-ai: "If not provided, the title (description) field of the JSON schema will be
    # used": a union of two named by their titles.
    person = StructuredDict({**PERSON_SCHEMA, "title": "Person", "description": "Someone"})
    animal = StructuredDict(ANIMAL_SCHEMA, name="Animal")
    agent = Agent(
        "a", ScriptedModel(["x"]), output_type=[ToolOutput(person), ToolOutput(animal), str]
    )
    assert [(t.name, t.description) for t in agent.output_tools.values()] == [
        ("final_result_Person", "Someone"),
        ("final_result_Animal", "Animal: The final response which ends this conversation"),
    ]


# --- Agent(retries=...): pydantic-ai's AgentRetries, an int or {"tools": ..., "output": ...} ---


def _always_sent_back(agent: Agent) -> list[int]:
    seen: list[int] = []

    @agent.output_validator
    def always_retry(ctx: RunContext, output: Any) -> Any:
        seen.append(ctx.retry)
        raise ModelRetry(f"retry {ctx.retry}")

    return seen


@pytest.mark.parametrize(
    ("retries", "budget"),
    [
        (5, 5),  # int-retries-sets-both
        ({"tools": 5}, 1),  # dict-tools-only-keeps-output-default
        ({"tools": 3, "output": 5}, 5),  # dict-sets-both-independently
        ({"output": 2}, 2),
    ],
)
async def test_output_retry_budget_resolution(retries: Any, budget: int) -> None:
    # ports test_output_retry_budget_resolution's Agent(retries=...) cases (the run-level,
    # override and spec ones: docs/harness.md, not offered): an int sets the output budget
    # too, a dict each budget it names. Ours took retries= for the tools alone (an int; a
    # dict was refused), the output budget staying output_retries=1.
    model = FunctionModel(lambda request: tool_call("final_result", a=1, b="foo"))
    agent = Agent("a", model, output_type=ToolOutput(Foo), retries=retries)
    seen = _always_sent_back(agent)
    result = await agent.run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert seen == list(range(budget + 1))
    assert agent.output_retries == budget


@pytest.mark.parametrize(
    ("retries", "cap"),
    [
        (None, None),
        (5, 5),
        ({"tools": 5}, 5),
        ({"output": 5}, None),
        ({"tools": 5, "output": 3}, 5),
    ],
)
def test_agent_init_retries(retries: Any, cap: int | None) -> None:
    # ports test_agent_init_retries: the retries: int | AgentRetries API takes shared and
    # per-category budgets. A tool's cap stays None (no cap) when none is given (our default,
    # test_pydantic_ai_ports.py::test_retries_per_tool_have_no_cap; pydantic-ai's is 1).
    agent = Agent("a", ScriptedModel(["x"]), retries=retries)
    assert agent.retries == cap


async def test_a_dict_of_retries_caps_the_tools() -> None:
    # ports test_tool_retry_budget_resolution with retries={"tools": 1}
    calls: list[int] = []

    def flaky(ctx: RunContext) -> str:
        """Fails."""
        calls.append(ctx.retry)
        raise ModelRetry("again")

    model = FunctionModel(lambda request: tool_call("flaky"))
    result = await Agent("a", model, tools=[flaky], retries={"tools": 1}).run("Hello")
    assert result.status is RunStatus.FAILED and "exceeded max retries count of 1" in (
        result.error or ""
    )
    assert calls == [0, 1]


def test_an_explicit_output_retries_beside_retries() -> None:
    # output_retries= (ours, pydantic-ai's before its AgentRetries) wins over an int's
    # shorthand; beside a dict naming "output" too it is a contradiction, refused.
    agent = Agent("a", ScriptedModel(["x"]), retries=5, output_retries=2)
    assert (agent.retries, agent.output_retries) == (5, 2)
    with pytest.raises(ConfigurationError, match="output_retries"):
        Agent("a", ScriptedModel(["x"]), retries={"output": 3}, output_retries=2)


@pytest.mark.parametrize(
    "retries", [-1, {"tools": -1}, {"output": -1}, {"tool": 1}, {"output": True}, "1", [1]]
)
def test_negative_or_unknown_retries_are_refused(retries: Any) -> None:
    # ports test_negative_tool_retries_raises_immediately with AgentRetries: pydantic-ai's
    # UserError when the agent is made, ours ConfigurationError; a key it has no budget of
    # (a typo) is refused too (pydantic-ai's TypedDict would leave it unread).
    with pytest.raises(ConfigurationError, match="retries"):
        Agent("a", ScriptedModel(["x"]), retries=retries)


# --- more of test_agent.py ---


class Weather(BaseModel):
    temperature: float
    description: str


async def test_output_type_async_function() -> None:
    # ports test_output_type_async_function: an async output function is awaited; its tool
    # is pydantic-ai's
    async def get_weather(city: str) -> Weather:
        return Weather(temperature=28.7, description="sunny")

    model = ScriptedModel([tool_call("final_result", city="Mexico City")])
    result = await Agent("a", model, output_type=get_weather).run("Mexico City")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    (spec,) = model.requests[0].tools
    assert (spec.name, spec.description) == (
        "final_result",
        "The final response which ends this conversation",
    )
    assert spec.parameters == {
        "additionalProperties": False,
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "type": "object",
    }


async def test_output_type_multiple_custom_tools() -> None:
    # ports test_output_type_multiple_custom_tools
    def get_weather(city: str) -> Weather:
        return Weather(temperature=28.7, description="sunny")

    model = ScriptedModel([tool_call("get_weather", city="Mexico City")])
    agent = Agent(
        "a",
        model,
        output_type=[
            ToolOutput(get_weather, name="get_weather"),
            ToolOutput(Weather, name="return_weather"),
        ],
    )
    result = await agent.run("Mexico City")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    assert [(t.name, t.description, t.parameters) for t in model.requests[0].tools] == [
        (
            "get_weather",
            "get_weather: The final response which ends this conversation",
            {
                "additionalProperties": False,
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
                "type": "object",
            },
        ),
        (
            "return_weather",
            "Weather: The final response which ends this conversation",
            {
                "properties": {
                    "temperature": {"type": "number"},
                    "description": {"type": "string"},
                },
                "required": ["temperature", "description"],
                "title": "Weather",
                "type": "object",
            },
        ),
    ]


async def test_tool_sync_function_returning_coroutine() -> None:
    # ports test_tool_sync_function_returning_coroutine: a plain def tool that returns a
    # coroutine has it awaited, its value the result
    async def compute() -> str:
        return "tool result value"

    def my_tool() -> Any:
        """Computes."""
        return compute()

    def step(request: Any) -> Any:
        results = [m for m in request.messages if m.role == "tool"]
        return tool_call("my_tool") if not results else results[0].content

    result = await Agent("a", FunctionModel(step), tools=[my_tool]).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "tool result value")


async def test_system_prompt_sync_function_returning_coroutine() -> None:
    # ports test_system_prompt_sync_function_returning_coroutine
    async def async_prompt() -> str:
        return "Async system prompt"

    model = ScriptedModel(["done"])
    agent = Agent("a", model)

    @agent.system_prompt
    def system_prompt() -> Any:
        return async_prompt()

    result = await agent.run("Hello")
    assert result.status is RunStatus.COMPLETED, result.error
    system = [m.content for m in model.requests[0].messages if m.role == "system"]
    assert system == ["Async system prompt"]


async def test_agent_allows_none_output_blank_text_response() -> None:
    # ports test_agent_allows_none_output_blank_text_response: str | None, an answer of
    # empty text is None, and the empty response stays in the transcript
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_type=str | None).run("hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, None), result.error
    assert [(m.role, m.content) for m in result.messages] == [("user", "hello"), ("assistant", "")]


async def test_agent_allows_none_output_tool_mode_int_via_tool() -> None:
    # ports test_agent_allows_none_output_tool_mode_int_via_tool: pydantic-ai's int | None
    # is output tools by default; ours is the union envelope, so the tools are asked for
    # with ToolOutput, and None is an output tool of its own beside it, as pydantic-ai's.
    model = ScriptedModel([tool_call("final_result_int", response=42)])
    agent = Agent("a", model, output_type=[ToolOutput(int), None])
    assert list(agent.output_tools) == ["final_result_int", "final_result_NoneType"]
    result = await agent.run("hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, 42), result.error
    # and an empty answer is None (test_agent_allows_none_output_tool_mode_empty_response)
    agent = Agent("a", ScriptedModel([ModelResponse(text="")]), output_type=[ToolOutput(int), None])
    result = await agent.run("hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, None), result.error


async def test_unknown_tool_per_tool_retries_exceeded() -> None:
    # ports test_unknown_tool_per_tool_retries_exceeded. Kept on purpose: a call of a tool the
    # run does not have counts against no cap (docs/harness.md, "Per-tool retry caps"; it is
    # answered with an error result, and unknown_tools="fail" ends the run on it), where
    # pydantic-ai's fails on the second call of "foobar" with retries={"tools": 1}.
    model = FunctionModel(lambda request: tool_call("foobar"))
    agent = Agent(
        "a", model, retries={"tools": 1, "output": 5}, limits=RunLimits(max_model_calls=4)
    )
    result = await agent.run("Hello")
    assert result.status is RunStatus.LIMIT_EXCEEDED and len(model.requests) == 4
    model = FunctionModel(lambda request: tool_call("foobar"))
    agent = Agent("a", model, retries={"tools": 1}, unknown_tools="fail")
    result = await agent.run("Hello")
    assert result.status is RunStatus.FAILED and "foobar" in (result.error or "")
    assert len(model.requests) == 1


# --- tests/test_streaming.py and tests/test_usage_limits.py ---


class OutputType(BaseModel):
    value: str


async def test_output_tool_event_history_has_no_dangling_call() -> None:
    # ports tests/test_streaming.py::test_output_tool_event_history_has_no_dangling_call:
    # every output tool call seen in the run's events has its result there, under the ids of
    # the transcript's calls and results.
    model = ScriptedModel([tool_call("final_result", value="hello")], stream=True)
    agent = Agent("a", model, output_type=ToolOutput(OutputType))
    events = [event async for event in agent.run_stream("test")]
    called = {e.tool_call_id for e in events if e.type == "tool.call"}
    returned = {e.tool_call_id for e in events if e.type == "tool.result"}
    assert called == returned and len(called) == 1 and None not in called
    assert events[-1].type == "run.completed"
    # the transcript of the same run, not streamed: one call, answered once
    model = ScriptedModel([tool_call("final_result", value="hello")])
    result = await Agent("a", model, output_type=ToolOutput(OutputType)).run("test")
    calls = [c.id for m in result.messages for c in m.tool_calls]
    answered = [m.tool_call_id for m in result.messages if m.role == "tool"]
    assert answered == calls and len(calls) == 1


async def test_output_function_model_retry_in_stream() -> None:
    # ports tests/test_streaming.py::test_output_function_model_retry_in_stream: a streamed
    # output function's ModelRetry with retries={"output": 0} ends the run with the model's
    # error, its message quoted (pydantic-ai: UnexpectedModelBehavior caused by ModelRetry).
    def reject(value: str) -> str:
        raise ModelRetry("please try again")

    model = ScriptedModel([tool_call("final_result", value="anything")], stream=True)
    agent = Agent(
        "a", model, output_type=ToolOutput(reject, name="final_result"), retries={"output": 0}
    )
    result = await agent.run("test")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert "please try again" in (result.error or "")
    assert len(model.requests) == 1


def test_per_request_input_tokens_limit_is_named_as_ours() -> None:
    # tests/test_usage_limits.py::test_per_request_input_tokens_limit_post_response: pydantic-
    # ai's UsageLimits(per_request_input_tokens_limit=...) (one request's input) is our
    # RunLimits(max_input_tokens_per_request=...) (test_pydantic_ai_ports_20.py); another
    # name is refused, as any RunLimits does not take.
    with pytest.raises(ConfigurationError, match="per_request_input_tokens"):
        RunLimits(per_request_input_tokens=5)  # type: ignore[call-arg]


# --- tests/test_tools.py: tool timeouts ---


async def test_tool_timeout_exceeds_retry_limit() -> None:
    # ports tests/test_tools.py::test_tool_timeout_exceeds_retry_limit: a tool that always
    # times out, with retries={"tools": 1}: the second timeout ends the run ("exceeded max
    # retries")
    @tool(timeout_s=0.05)
    async def always_slow_tool() -> str:
        """Always slow."""
        await asyncio.Event().wait()
        return "done"

    model = FunctionModel(lambda request: tool_call("always_slow_tool"))
    agent = Agent("a", model, tools=[always_slow_tool], retries={"tools": 1, "output": 1})
    result = await agent.run("call always_slow_tool")
    assert result.status is RunStatus.FAILED and "exceeded max retries" in (result.error or "")
    assert len(model.requests) == 2


async def test_agent_level_tool_timeout() -> None:
    # ports tests/test_tools.py::test_agent_level_tool_timeout and
    # test_per_tool_timeout_overrides_agent_timeout: pydantic-ai's Agent(tool_timeout=...) is
    # our RunLimits(tool_timeout_s=...), for every tool of the run; a tool's own smaller
    # timeout wins (ours: the smaller of the two, either way).
    @tool
    async def slow_tool() -> str:
        """Slow."""
        await asyncio.Event().wait()
        return "done"

    @tool(timeout_s=0.1)
    async def fast_timeout_tool() -> str:
        """Times out fast."""
        await asyncio.Event().wait()
        return "done"

    for name, limit in (("slow_tool", 0.1), ("fast_timeout_tool", 10.0)):
        model = ScriptedModel([tool_call(name), "done"])
        agent = Agent(
            "a",
            model,
            tools=[slow_tool, fast_timeout_tool],
            limits=RunLimits(tool_timeout_s=limit),
        )
        result = await agent.run(f"call {name}")
        assert (result.status, result.output) == (RunStatus.COMPLETED, "done"), result.error
        (sent,) = [m.content for m in model.requests[1].messages if m.role == "tool"]
        assert "timed out" in sent and "0.1" in sent, sent


# --- a union's members that are dataclasses, TypedDicts or StructuredDicts ---


@dataclasses.dataclass
class Point:
    """A point."""

    x: int
    label: Label


@dataclasses.dataclass
class Label:
    text: str


async def test_a_union_of_object_types_sends_each_members_own_schema() -> None:
    # pydantic-ai's UnionOutputProcessor puts each member's own object schema under its kind.
    # Ours sent a dataclass's (a TypedDict's, a StructuredDict's) as the envelope class it is
    # read through ({"properties": {"root": {"title": "Root"}}, ...}), so a model writing
    # what it was sent ({"root": ...}) was refused, and one writing the member's fields was
    # answering a schema it never saw.
    person = StructuredDict(PERSON_SCHEMA, name="Person", description="A person")
    answer = '{"result": {"kind": "Point", "data": {"x": 1, "label": {"text": "a"}}}}'
    model = ScriptedModel([answer])
    result = await Agent("a", model, output_type=[Point, person, Foo]).run("x")
    assert result.output == Point(x=1, label=Label(text="a")), result.error
    sent = model.requests[0].response_format.model_json_schema()
    kinds = {c["title"]: c for c in sent["properties"]["result"]["anyOf"]}
    assert list(kinds) == ["Point", "Person", "Foo"]
    defs = sent["$defs"]

    def member(kind: str) -> dict[str, Any]:
        ref = kinds[kind]["properties"]["data"]["$ref"]
        return defs[ref.rsplit("/", 1)[1]]

    assert member("Point")["properties"] == {
        "x": {"title": "X", "type": "integer"},
        "label": {"$ref": "#/$defs/Label"},
    }
    assert defs["Label"]["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert member("Person") == {**PERSON_SCHEMA, "title": "Person", "description": "A person"}
    assert kinds["Person"]["description"] == "A person"
    assert kinds["Point"]["description"] == "A point."
    assert member("Foo")["properties"] == Foo.model_json_schema()["properties"]
    # and the other member, as its schema says
    model = ScriptedModel(['{"result": {"kind": "Person", "data": {"name": "Ann", "age": 3}}}'])
    result = await Agent("a", model, output_type=[Point, person, Foo]).run("x")
    assert result.output == {"name": "Ann", "age": 3}, result.error


# --- the litellm path: strict mode only for a schema whose every property is required ---


class WithDefault(BaseModel):
    x: int
    y: int = 0


async def test_a_schema_with_optional_properties_is_sent_as_it_is_not_strict() -> None:
    # pydantic-ai's OpenAIJsonSchemaTransformer (strict=None): an object with a property it
    # does not require is not strict-compatible, and is sent strict false as it is. Ours
    # sent it strict (litellm's conversion made every property required), so the model had to
    # write the optional ones: a StructuredDict's "age", a model's defaulted "y".
    person = StructuredDict({**PERSON_SCHEMA, "required": ["name"]}, name="Person")
    async with OpenAICompatServer(['{"name": "Ann"}', '{"x": 1}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        first = await Agent("a", model, output_type=person).run("Hello")
        second = await Agent("a", model, output_type=WithDefault).run("Hello")
    assert first.output == {"name": "Ann"}, first.error
    assert second.output == WithDefault(x=1), second.error
    sent = [r["response_format"]["json_schema"] for r in server.requests]
    assert [(s["name"], s["strict"]) for s in sent] == [("Person", False), ("WithDefault", False)]
    assert sent[0]["schema"] == {
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name"],
        "title": "Person",
        "type": "object",
        "additionalProperties": False,
    }
    assert sent[1]["schema"] == {
        "properties": {"x": {"type": "integer"}, "y": {"default": 0, "type": "integer"}},
        "required": ["x"],
        "title": "WithDefault",
        "type": "object",
        "additionalProperties": False,
    }
    # a free-form object (no properties, nothing required): strict mode would hold the model
    # to {}; pydantic-ai sends it not strict, with no properties said
    async with OpenAICompatServer(['{"k": 1}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        free = await Agent("a", model, output_type=StructuredDict({"type": "object"})).run("Hi")
    assert free.output == {"k": 1}, free.error
    sent_free = server.requests[0]["response_format"]["json_schema"]
    assert sent_free["strict"] is False
    assert sent_free["schema"] == {
        "type": "object",
        "additionalProperties": False,
        "properties": {},
    }
    # every property required: strict, as before (test_pydantic_ai_ports_11.py)
    async with OpenAICompatServer(['{"a": 1, "b": "x"}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        await Agent("a", model, output_type=Foo).run("Hello")
    assert server.requests[0]["response_format"]["json_schema"]["strict"] is True


# --- run ids ---


async def test_agent_run_id_explicit_override() -> None:
    # ports test_agent_run_id_explicit_override and test_agent_run_id_available_in_run_context:
    # a run started with run_id= is that run, and its tools' context names it
    seen: list[str] = []

    def probe(ctx: RunContext) -> str:
        """Probe."""
        seen.append(ctx.run_id)
        return "ok"

    model = ScriptedModel([tool_call("probe"), "explicit"])
    result = await Agent("a", model, tools=[probe]).run("hi", run_id="run-app-42")
    assert (result.run_id, result.output) == ("run-app-42", "explicit"), result.error
    assert seen == ["run-app-42"]


async def test_agent_run_id_not_inherited_from_message_history() -> None:
    # ports test_agent_run_id_not_inherited_from_message_history: a run continuing another's
    # transcript has an id of its own
    agent = Agent("a", ScriptedModel(["one", "two"]))
    first = await agent.run("first turn", run_id="run-first")
    second = await agent.run("second turn", history=first.messages)
    assert second.status is RunStatus.COMPLETED and second.run_id != first.run_id


async def test_agent_run_id_empty_string_raises() -> None:
    # ports test_agent_run_id_empty_string_raises: pydantic-ai's UserError ("`run_id` must be
    # a non-empty string"), ours InvalidIdError (a ValueError); nothing runs
    model = ScriptedModel(["ok"])
    with pytest.raises(InvalidIdError, match="run_id must be a non-blank string"):
        await Agent("a", model).run("hi", run_id="")
    assert model.requests == []


PersonDict = StructuredDict(PERSON_SCHEMA, name="Person", description="A person")


async def test_a_tool_taking_just_a_structured_dict_is_offered_its_fields() -> None:
    # pydantic-ai's StructuredDict is model-like (__is_model_like__, read by is_model_like):
    # a tool whose one argument is one is offered the schema's fields, as for a model, and
    # gets the dict. Ours offered {"person": {...}}, one argument holding the object.
    @tool
    def greet(person: PersonDict) -> str:  # type: ignore[valid-type]
        """Greet someone."""
        return f"hi {person['name']} ({person['age']})"

    assert greet.parameters["properties"] == PERSON_SCHEMA["properties"]
    assert greet.parameters["required"] == ["name", "age"]
    model = ScriptedModel([tool_call("greet", name="Ann", age=41), "done"])
    result = await Agent("a", model, tools=[greet]).run("x")
    assert result.status is RunStatus.COMPLETED, result.error
    assert [m.content for m in model.requests[1].messages if m.role == "tool"] == ["hi Ann (41)"]


async def test_unknown_tool_call_events() -> None:
    # ports tests/test_streaming.py::test_unknown_tool_call_events: a call of a tool the run
    # does not have has its call and its (error) result in the run's events, as a known
    # tool's call does. (pydantic-ai emits the calls first, then the results; ours runs the
    # calls one after another, each call's events together.)
    def known_tool(x: int) -> int:
        """Double."""
        return x * 2

    model = ScriptedModel(
        [
            tool_calls(tool_call("unknown_tool", arg="value"), tool_call("known_tool", x=5)),
            "done",
        ],
        stream=True,
    )
    agent = Agent("a", model, tools=[known_tool])
    events = [e async for e in agent.run_stream("test") if e.type in ("tool.call", "tool.result")]
    assert [(e.type, e.name) for e in events] == [
        ("tool.call", "unknown_tool"),
        ("tool.result", "unknown_tool"),
        ("tool.call", "known_tool"),
        ("tool.result", "known_tool"),
    ]
    assert [e.error for e in events if e.type == "tool.result"] == [True, False]


# --- tests/test_tools.py: differences kept ---


def test_tool_ctx_second() -> None:
    # ports tests/test_tools.py::test_tool_ctx_second. Kept on purpose: pydantic-ai refuses a
    # RunContext that is not the first parameter ("RunContext annotations can only be used
    # as the first argument"); ours gives the context to a parameter annotated RunContext
    # wherever it is (docs/harness.md, "Tools"), and offers the rest.
    @tool
    def second(x: int, ctx: RunContext) -> str:
        """Second."""
        return f"{x} in {ctx.run_id}"

    assert second.parameters["properties"] == {"x": {"type": "integer"}}


def test_docstring_unknown() -> None:
    # ports tests/test_tools.py::test_docstring_unknown. Kept on purpose: pydantic-ai offers
    # **kwargs: int as an object of integers; ours refuses a tool whose arguments are not
    # named parameters (docs/harness.md, "Tools"), when the tool is made.
    def unknown_docstring(**kwargs: int) -> str:
        """Unknown style docstring."""
        return ""

    with pytest.raises(ConfigurationError, match=r"takes \*\*kwargs"):
        tool(unknown_docstring)


async def test_streamed_text_stream() -> None:
    # ports tests/test_streaming.py::test_streamed_text_stream (its stream_text(delta=True)
    # part): the model.delta pieces of a streamed text answer join into the run's output;
    # with a TextOutput function, the output is the function's of the whole text (ours does
    # not pass partial text through it: pydantic-ai's stream_output of partial output is
    # not offered).
    def upcase(text: str) -> str:
        return text.upper()

    for output_type, expected in ((None, "The cat sat on the mat."), (TextOutput(upcase), None)):
        model = ScriptedModel(["The cat sat on the mat."], stream=True)
        agent = Agent("a", model, output_type=output_type)
        events = [e async for e in agent.run_stream("Hello")]
        pieces = [e.text for e in events if e.type == "model.delta" and e.text]
        assert len(pieces) > 1 and "".join(pieces) == "The cat sat on the mat."
        assert events[-1].type == "run.completed"
        result = await Agent(
            "a", ScriptedModel(["The cat sat on the mat."], stream=True), output_type=output_type
        ).run("Hello")
        assert result.output == (expected or "THE CAT SAT ON THE MAT."), result.error
