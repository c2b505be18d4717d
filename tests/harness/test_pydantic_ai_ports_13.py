"""pydantic-ai's ``agent.output_json_schema()``, its per-run output type
(``agent.run(..., output_type=...)``), and more of its agent tests, ported (a thirteenth
batch; see test_pydantic_ai_ports.py to _12).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Union

import pytest
from pydantic import BaseModel
from typing_extensions import TypeAliasType

from tinyagents import (
    Agent,
    Middleware,
    NativeOutput,
    PromptedOutput,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    SteeringDelivery,
    StructuredDict,
    SubAgent,
    TextOutput,
    ToolOutput,
)
from tinyagents.errors import ConfigurationError, UnsupportedOutputError
from tinyagents.harness import FunctionTool, LiteLLMModel, Message, ModelRequest
from tinyagents.testkit import EventRecorder, Gate, OpenAICompatServer, ScriptedModel, tool_call


class Bar(BaseModel):
    answer: str


class Foo(BaseModel):
    a: list[Bar]
    b: int


FOO_SCHEMA: dict[str, Any] = {
    "properties": {
        "a": {"items": {"$ref": "#/$defs/Bar"}, "title": "A", "type": "array"},
        "b": {"title": "B", "type": "integer"},
    },
    "required": ["a", "b"],
    "title": "Foo",
    "type": "object",
}
BAR_DEFS: dict[str, Any] = {
    "Bar": {
        "properties": {"answer": {"title": "Answer", "type": "string"}},
        "required": ["answer"],
        "title": "Bar",
        "type": "object",
    }
}


def model() -> ScriptedModel:
    return ScriptedModel([])


# --- agent.output_json_schema() (pydantic-ai's tests/test_agent_output_schemas.py) ---


def test_text_output_json_schema() -> None:
    assert Agent("a", model()).output_json_schema() == {"type": "string"}

    def func(x: str) -> str:
        return x

    agent = Agent("a", model(), output_type=TextOutput(func))
    assert agent.output_json_schema() == {"type": "string"}


def test_function_output_json_schema() -> None:
    def func(x: int) -> int:
        return x

    assert Agent("a", model(), output_type=[func]).output_json_schema() == {"type": "integer"}

    def func_no_return_type_hint(x: int):  # type: ignore[no-untyped-def]
        return x

    agent = Agent("a", model(), output_type=[func_no_return_type_hint])
    assert agent.output_json_schema() == {"type": "string"}


def test_auto_output_json_schema() -> None:
    assert Agent("a", model(), output_type=bool).output_json_schema() == {"type": "boolean"}
    agent = Agent("a", model(), output_type=bool | int)
    assert agent.output_json_schema() == {"anyOf": [{"type": "boolean"}, {"type": "integer"}]}
    agent = Agent("a", model(), output_type=str | bool | Foo)
    assert agent.output_json_schema() == {
        "anyOf": [{"type": "string"}, {"type": "boolean"}, FOO_SCHEMA],
        "$defs": BAR_DEFS,
    }


def test_tool_output_json_schema() -> None:
    agent = Agent("a", model(), output_type=[ToolOutput(bool)])
    assert agent.output_json_schema() == {"type": "boolean"}
    # pydantic-ai's ToolOutput(str) is an output tool of {"response": str}; ours takes it too
    agent = Agent("a", model(), output_type=[ToolOutput(str), ToolOutput(bool), ToolOutput(Foo)])
    assert agent.output_json_schema() == {
        "anyOf": [{"type": "string"}, {"type": "boolean"}, FOO_SCHEMA],
        "$defs": BAR_DEFS,
    }
    agent = Agent("a", model(), output_type=[ToolOutput(bool), ToolOutput(bool), ToolOutput(bool)])
    assert agent.output_json_schema() == {"type": "boolean"}


def test_native_output_json_schema() -> None:
    agent = Agent("a", model(), output_type=NativeOutput([bool]))
    assert agent.output_json_schema() == {"type": "boolean"}
    agent = Agent("a", model(), output_type=NativeOutput([bool, Foo]))
    assert agent.output_json_schema() == {
        "anyOf": [{"type": "boolean"}, FOO_SCHEMA],
        "$defs": BAR_DEFS,
    }


def test_prompted_output_json_schema() -> None:
    agent = Agent("a", model(), output_type=PromptedOutput([bool]))
    assert agent.output_json_schema() == {"type": "boolean"}
    agent = Agent("a", model(), output_type=PromptedOutput([bool, Foo]))
    assert agent.output_json_schema() == {
        "anyOf": [{"type": "boolean"}, FOO_SCHEMA],
        "$defs": BAR_DEFS,
    }


def test_custom_output_json_schema() -> None:
    human = StructuredDict(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name", "age"],
        },
        name="Human",
        description="A human with a name and age",
    )
    assert Agent("a", model(), output_type=human).output_json_schema() == {
        "description": "A human with a name and age",
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "title": "Human",
        "required": ["name", "age"],
    }


def test_override_output_json_schema() -> None:
    agent = Agent("a", model())
    assert agent.output_json_schema() == {"type": "string"}
    assert agent.output_json_schema(output_type=[ToolOutput(bool)]) == {"type": "boolean"}
    # the agent's own is unchanged
    assert agent.output_json_schema() == {"type": "string"}


@dataclasses.dataclass
class DCWithDoc:
    """The result with name and score."""

    name: str
    score: int = 0


@dataclasses.dataclass
class DCNested:
    """Nested filter criteria."""

    category: str = "all"


@dataclasses.dataclass
class DCWithNestedField:
    """Output with nested dataclass."""

    filters: DCNested


class BMNested(BaseModel):
    """Nested filter criteria."""

    category: str = "all"


class BMWithNestedField(BaseModel):
    """Output with nested model."""

    filters: BMNested


def _without_descriptions(schema: Any) -> Any:
    # pydantic-ai's remove_schema_descriptions
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_without_descriptions(v) for v in schema]
    return schema


def test_output_type_description() -> None:
    # ports test_output_type_description (its dataclass case) and
    # test_nested_output_type_description
    agent = Agent("a", model(), output_type=DCWithDoc)
    assert _without_descriptions(agent.output_json_schema()) == {
        "properties": {
            "name": {"title": "Name", "type": "string"},
            "score": {"default": 0, "title": "Score", "type": "integer"},
        },
        "required": ["name"],
        "title": "DCWithDoc",
        "type": "object",
    }
    for output_type, nested in ((BMWithNestedField, "BMNested"), (DCWithNestedField, "DCNested")):
        schema = Agent("a", model(), output_type=output_type).output_json_schema()
        assert _without_descriptions(schema) == {
            "$defs": {
                nested: {
                    "properties": {
                        "category": {"default": "all", "title": "Category", "type": "string"}
                    },
                    "title": nested,
                    "type": "object",
                }
            },
            "properties": {"filters": {"$ref": f"#/$defs/{nested}"}},
            "required": ["filters"],
            "title": output_type.__name__,
            "type": "object",
        }


def test_output_json_schema_merges_defs_of_one_name_that_differ() -> None:
    # pydantic-ai's merge_json_schema_defs: two members whose $defs share a name but differ
    # keep both, the second renamed "<its title>_<name>_1" and its $refs rewritten
    class Inner(BaseModel):
        x: int

    class One(BaseModel):
        inner: Inner

    First = Inner

    class Inner(BaseModel):  # type: ignore[no-redef]
        y: str

    class Two(BaseModel):
        inner: Inner

    assert First is not Inner
    schema = Agent(
        "a", model(), output_type=[ToolOutput(One), ToolOutput(Two)]
    ).output_json_schema()
    assert [m["properties"]["inner"] for m in schema["anyOf"]] == [
        {"$ref": "#/$defs/Inner"},
        {"$ref": "#/$defs/Two_Inner_1"},
    ]
    assert schema["$defs"]["Inner"]["properties"] == {"x": {"title": "X", "type": "integer"}}
    assert schema["$defs"]["Two_Inner_1"]["properties"] == {"y": {"title": "Y", "type": "string"}}


def test_output_json_schema_of_an_output_type_the_agent_refuses_is_refused() -> None:
    # pydantic-ai would write a schema for NativeOutput(name=...); we do not carry that
    # marker's options out (UnsupportedOutputError), nor write a schema for what no run takes
    agent = Agent("a", model())
    with pytest.raises(UnsupportedOutputError):
        agent.output_json_schema(NativeOutput(Foo, name="foo"))
    with pytest.raises(ConfigurationError):
        agent.output_json_schema(output_type=[None])


# --- a per-run output type (pydantic-ai's agent.run(..., output_type=...)) ---


class Bar2(BaseModel):
    c: int
    d: str


class Simple(BaseModel):
    a: int
    b: str


def test_custom_output_type_sync() -> None:
    # pydantic-ai's TestModel writes an answer for whatever is asked; ours are scripted
    model = ScriptedModel(
        ['{"a": 0, "b": "a"}', '{"c": 0, "d": "a"}', "success (no tool calls)", '{"response": 0}']
    )
    agent = Agent("a", model, output_type=Simple)
    assert agent.run_sync("Hello").output == Simple(a=0, b="a")
    assert agent.run_sync("Hello", output_type=Bar2).output == Bar2(c=0, d="a")
    assert agent.run_sync("Hello", output_type=str).output == "success (no tool calls)"
    assert agent.run_sync("Hello", output_type=int).output == 0
    # each request asked for its own run's output
    formats = [r.response_format for r in model.requests]
    assert formats[:3] == [Simple, Bar2, None]
    assert formats[3] is not None and formats[3].model_json_schema()["properties"] == {
        "response": {"type": "integer"}
    }
    assert agent.output_type is Simple  # the agent is as it was


async def test_custom_output_type_async() -> None:
    model = ScriptedModel(["success (no tool calls)", '{"a": 0, "b": "a"}', '{"response": 0}'])
    agent = Agent("a", model)
    assert (await agent.run("Hello")).output == "success (no tool calls)"
    assert (await agent.run("Hello", output_type=Simple)).output == Simple(a=0, b="a")
    assert (await agent.run("Hello", output_type=int)).output == 0


def test_custom_output_type_invalid() -> None:
    agent = Agent("a", ScriptedModel(["1"]))

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Any) -> Any:
        return o

    with pytest.raises(ConfigurationError, match="cannot set a custom run output_type"):
        agent.run_sync("Hello", output_type=int)


async def test_a_per_run_output_type_the_agent_would_refuse_starts_nothing() -> None:
    model = ScriptedModel(["x"])

    def final_result() -> str:
        return "x"

    agent = Agent("a", model, tools=[final_result])
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match="output tools"):
            await rt.start(agent, "Hello", output_type=ToolOutput(Simple))
        with pytest.raises(ConfigurationError):
            await rt.start(agent, "Hello", output_type=[None])
        assert rt.runs.list() == []
    assert model.requests == []


async def test_run_stream_text_output_per_run() -> None:
    # ports tests/test_streaming.py's run_stream('Hello', output_type=TextOutput(upcase)):
    # the streamed deltas are the model's text, the output its upcased whole
    def upcase(text: str) -> str:
        return text.upper()

    agent = Agent("a", ScriptedModel(["The cat sat on the mat."]))
    events = [e async for e in agent.run_stream("Hello", output_type=TextOutput(upcase))]
    assert events[-1].type == "run.completed"
    assert events[-1].output_summary == "THE CAT SAT ON THE MAT."


async def test_a_per_run_output_type_offers_its_output_tools_and_its_events_carry_it() -> None:
    model = ScriptedModel([tool_call("final_result", a=1, b="x")])
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start(Agent("a", model), "Hello", output_type=ToolOutput(Simple))
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, Simple(a=1, b="x"))
    assert [t.name for t in model.requests[0].tools] == ["final_result"]
    (completed,) = [e for e in recorder.events if e.type == "run.completed"]
    assert completed.output_summary is not None and '"a":1' in completed.output_summary.replace(
        " ", ""
    )


async def test_a_run_given_more_to_do_keeps_its_own_output_type() -> None:
    # an END_OF_TURN message reopens the run for another turn: its answer is read as the
    # run's output type, not the agent's
    gate = Gate("hold")
    model = ScriptedModel([tool_call("hold"), '{"a": 1, "b": "x"}', '{"a": 2, "b": "y"}'])
    agent = Agent("a", model, tools=[gate.tool()])
    async with Runtime(testing=True) as rt:
        handle = await rt.start(agent, "Hello", output_type=Simple)
        await gate.entered.wait()
        await handle.steer("and once more", delivery=SteeringDelivery.END_OF_TURN)
        gate.open()
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, Simple(a=2, b="y"))
    assert [r.response_format for r in model.requests] == [Simple, Simple, Simple]


async def test_a_run_started_again_under_its_id_is_given_its_output_type_again(
    tmp_path: Path,
) -> None:
    # A run started again under its id (after its process stopped) is started as it was
    # first: its agent, its limits and, now, its output type are the caller's to give again.
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    gate = Gate("hold")
    async with Runtime(store, testing=True) as rt:
        model = ScriptedModel([tool_call("hold"), "never"])
        agent = Agent("clerk", model, tools=[gate.tool()])
        handle = await rt.start(agent, "Hello", run_id="r-job", output_type=Simple)
        await gate.entered.wait()
        await handle.steer("answer in full")
        # The process stops here, with the run in the middle of its work.
    async with Runtime(store, testing=True) as rt:
        model = ScriptedModel(['{"a": 3, "b": "z"}'])
        agent = Agent("clerk", model, tools=[gate.tool()])
        handle = await rt.start(agent, "Hello", run_id="r-job", output_type=Simple)
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, Simple(a=3, b="z"))
    (request,) = model.requests
    assert request.response_format is Simple


async def test_a_tool_output_of_str_is_an_output_tool_of_its_response() -> None:
    # pydantic-ai's ToolOutput(str) (test_tool_output_json_schema gives one): str is not
    # model-like, so its tool takes {"response": <text>}, as ToolOutput(int) does. It was
    # refused ("takes pydantic model classes, other types ... and functions, got the class
    # str").
    model = ScriptedModel([tool_call("final_result", response="hi")])
    result = await Agent("a", model, output_type=ToolOutput(str)).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "hi"), result.error
    (spec,) = model.requests[0].tools
    assert spec.parameters == {
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
        "type": "object",
    }


# --- output tools beside text, several output tools (test_response_union_allow_str,
# test_response_multiple_return_tools) ---


def upcase(text: str) -> str:
    return text.upper()


@pytest.mark.parametrize(
    "union",
    [
        Union[str, Simple],  # noqa: UP007
        Union[Simple, str],  # noqa: UP007
        str | Simple,
        Simple | str,
        [Simple, str],
        [TextOutput(upcase), ToolOutput(Simple)],
        TypeAliasType("TextOrSimple", Simple | str),
    ],
    ids=[
        "Union[str, Foo]",
        "Union[Foo, str]",
        "str | Foo",
        "Foo | str",
        "[Foo, str]",
        "TextOutput",
        "alias",
    ],
)
def test_response_union_allow_str(union: Any) -> None:
    model = ScriptedModel(["success (no tool calls)"])
    agent = Agent("a", model, output_type=union)
    got_tool_call_name: str | None = "unset"

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Any) -> Any:
        nonlocal got_tool_call_name
        got_tool_call_name = ctx.tool_name
        return o

    assert agent.allows_text
    result = agent.run_sync("Hello")
    assert isinstance(result.output, str)
    assert result.output.lower() == "success (no tool calls)"
    assert got_tool_call_name is None
    (request,) = model.requests
    assert request.response_format is None
    assert [(t.name, t.description, t.parameters) for t in request.tools] == [
        (
            "final_result",
            "The final response which ends this conversation",
            {
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["a", "b"],
                "title": "Simple",
                "type": "object",
            },
        )
    ]


class Bar3(BaseModel):
    """This is a bar model."""

    b: str


@pytest.mark.parametrize(
    "union",
    [
        Union[Simple, Bar3],  # noqa: UP007
        [Simple, Bar3],
        Simple | Bar3,
        TypeAliasType("OutputType", Simple | Bar3),  # pydantic-ai's `type OutputType = Foo | Bar`
    ],
    ids=["Union", "list", "|", "alias"],
)
def test_response_multiple_return_tools_as_one_response_format(union: Any) -> None:
    # pydantic-ai offers a union of models as output tools by default; ours sends it as one
    # response_format, its NativeOutput (docs/harness.md): the answer is its envelope, read
    # by no tool, so an output validator's ctx.tool_name is None.
    model = ScriptedModel(['{"result": {"kind": "Simple", "data": {"a": 0, "b": "a"}}}'])
    agent = Agent("a", model, output_type=union)
    got: list[str | None] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Any) -> Any:
        got.append(ctx.tool_name)
        return o

    result = agent.run_sync("Hello")
    assert result.output == Simple(a=0, b="a")
    assert got == [None]
    assert model.requests[0].tools == []
    assert model.requests[0].response_format is agent.output_type


def test_response_multiple_return_tools() -> None:
    # ports test_response_multiple_return_tools's `[ToolOutput(Foo), ToolOutput(Bar)]`
    model = ScriptedModel([tool_call("final_result_Simple", a=0, b="a")])
    agent = Agent("a", model, output_type=[ToolOutput(Simple), ToolOutput(Bar3)])
    got: list[str | None] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Any) -> Any:
        got.append(ctx.tool_name)
        return o

    result = agent.run_sync("Hello")
    assert result.output == Simple(a=0, b="a")
    assert got == ["final_result_Simple"]
    assert not agent.allows_text
    assert [(t.name, t.description, t.parameters) for t in model.requests[0].tools] == [
        (
            "final_result_Simple",
            "Simple: The final response which ends this conversation",
            {
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["a", "b"],
                "title": "Simple",
                "type": "object",
            },
        ),
        (
            "final_result_Bar3",
            "This is a bar model.",
            {
                "properties": {"b": {"type": "string"}},
                "required": ["b"],
                "title": "Bar3",
                "type": "object",
            },
        ),
    ]


async def test_a_type_alias_output_type_is_read_as_the_type_it_names() -> None:
    # `type OutputType = Foo | Bar` (Python 3.12; typing_extensions.TypeAliasType before) was
    # refused ("got TypeAliasType"); pydantic-ai reads an alias of a union as the union
    # (get_union_args), and wraps an alias of another type as it wraps the type
    model = ScriptedModel(['{"response": 3}'])
    result = await Agent("a", model, output_type=TypeAliasType("Num", int)).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, 3), result.error
    alias = TypeAliasType("Out", Simple | Bar3)
    agent = Agent("a", ScriptedModel([]), output_type=alias)
    assert set(agent.output_type.members) == {"Simple", "Bar3"}  # type: ignore[union-attr]
    assert agent.output_json_schema()["anyOf"][0]["title"] == "Simple"


# --- more of tests/test_agent.py ---


class Weather(BaseModel):
    temperature: float
    description: str


async def test_output_type_handoff_to_agent() -> None:
    # an output function that runs another agent: the supervisor's output is the inner
    # agent's, each run's transcript its own
    def get_weather(city: str) -> Weather:
        return Weather(temperature=28.7, description="sunny")

    agent = Agent(
        "weather",
        ScriptedModel([tool_call("final_result", city="Mexico City")]),
        output_type=get_weather,
    )
    inner: list[Any] = []

    async def handoff(city: str) -> Weather:
        result = await agent.run(f"Get me the weather in {city}")
        inner.append(result)
        return result.output  # type: ignore[no-any-return]

    supervisor_model = ScriptedModel([tool_call("final_result", city="Mexico City")])
    supervisor = Agent("supervisor", supervisor_model, output_type=handoff)
    result = await supervisor.run("Mexico City")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Mexico City"),
        ("assistant", ""),
        ("tool", "Final result processed."),
    ]
    (handed,) = inner
    assert [(m.role, m.content) for m in handed.messages] == [
        ("user", "Get me the weather in Mexico City"),
        ("assistant", ""),
        ("tool", "Final result processed."),
    ]


async def test_multi_agent_instructions_with_structured_output() -> None:
    # pydantic-ai's `instructions` are the running agent's on every request, kept in no
    # history, so agent2 continuing agent1's transcript is sent "Agent 2 instructions". Ours
    # are a system prompt (pydantic-ai's system_prompt): a transcript that leads with one
    # keeps it (docs/harness.md, "System prompt functions"); agent2's structured output is
    # asked for all the same. Without agent1's system message, agent2's instructions lead.
    agent1 = Agent(
        "one", ScriptedModel(["success (no tool calls)"]), instructions="Agent 1 instructions"
    )

    class Output(BaseModel):
        text: str

    result1 = await agent1.run("Hello")
    model2 = ScriptedModel(['{"text": "a"}', '{"text": "b"}'])
    agent2 = Agent("two", model2, instructions="Agent 2 instructions", output_type=Output)
    result2 = await agent2.run(result1.messages)
    assert result2.output == Output(text="a")
    assert model2.requests[0].messages[0].content == "Agent 1 instructions"
    assert model2.requests[0].response_format is Output
    without_prompt = [m for m in result1.messages if m.role != "system"]
    result3 = await agent2.run(without_prompt)
    assert result3.output == Output(text="b")
    assert model2.requests[1].messages[0].content == "Agent 2 instructions"


def test_output_type_prompted_output_must_be_only() -> None:
    with pytest.raises(ConfigurationError, match="must be the only output type"):
        Agent("a", ScriptedModel([]), output_type=[PromptedOutput(Simple), str])


@pytest.mark.parametrize("tool_timeout", [0, -1])
def test_agent_rejects_non_positive_tool_timeout(tool_timeout: float) -> None:
    # pydantic-ai's Agent(tool_timeout=...) is our RunLimits(tool_timeout_s=...)
    with pytest.raises(ConfigurationError, match="tool_timeout_s"):
        Agent("a", ScriptedModel([]), limits=RunLimits(tool_timeout_s=tool_timeout))


# --- tests/test_tools.py ---


class Payload(BaseModel):
    city: str


def my_tool(argument: Payload) -> str:
    return argument.city


@pytest.mark.parametrize(
    "args", [{"city": "Mexico City"}, {"argument": {"city": "Mexico City"}}], ids=["raw", "wrapped"]
)
async def test_single_base_model_arg_validator_accepts_wrapped_input(args: dict[str, Any]) -> None:
    # a tool of one model argument is offered the model's fields; a call given them wrapped
    # under the parameter's name (as they are once validated and sent on) is read alike
    model = ScriptedModel([tool_call("my_tool", **args), "done"])
    result = await Agent("a", model, tools=[FunctionTool(my_tool)]).run("Hello")
    assert result.status is RunStatus.COMPLETED
    assert [m.content for m in result.messages if m.role == "tool"] == ["Mexico City"]
    assert model.requests[0].tools[0].parameters["properties"] == {"city": {"type": "string"}}


async def test_return_bytes_invalid() -> None:
    # pydantic-ai fails the run on bytes that are no UTF-8 (PydanticSerializationError); ours
    # sends them base64 under a line that says so (docs/harness.md, "Starting runs")
    def return_bytes() -> bytes:
        return b"\00 \x81"

    model = ScriptedModel([tool_call("return_bytes"), "done"])
    result = await Agent("a", model, tools=[return_bytes]).run("")
    assert result.status is RunStatus.COMPLETED
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "[binary data: 3 bytes, base64]\nACCB"
    ]


def test_tool_ctx_agent_in_output_validator() -> None:
    agent = Agent("validated_agent", ScriptedModel(["success (no tool calls)"]))
    names: list[str] = []

    @agent.output_validator
    def check_agent(ctx: RunContext, output: str) -> str:
        names.append(ctx.agent.name)
        return output

    assert agent.run_sync("Hello").output == "success (no tool calls)"
    assert names == ["validated_agent"]


def test_tool_accepts_zero_max_retries() -> None:
    def noop() -> None: ...

    assert FunctionTool(noop, retries=0).retries == 0


def test_tooloutput_rejects_negative_max_retries() -> None:
    with pytest.raises(ConfigurationError, match="max_retries must be a whole number >= 0"):
        ToolOutput(int, max_retries=-1)
    assert ToolOutput(int, max_retries=0).max_retries == 0


def test_tool_rejects_non_positive_timeout() -> None:
    def noop() -> None: ...

    with pytest.raises(ConfigurationError, match="timeout_s"):
        FunctionTool(noop, timeout_s=0)


# --- tests/test_streaming.py: a streamed run's own output type ---


class OutputType(BaseModel):
    value: str


async def _streamed_output(agent: Agent, **kwargs: Any) -> Any:
    async with Runtime() as rt:
        events = [e async for e in agent.run_stream("test", runtime=rt, run_id="r-s", **kwargs)]
        handle = rt.runs.get("r-s")
        assert handle is not None and events[-1].type == "run.completed"
        return (await handle.result()).output


async def test_custom_output_type_default_str() -> None:
    agent = Agent("a", ScriptedModel(["success (no tool calls)", '{"value": "a"}']))
    assert await _streamed_output(agent) == "success (no tool calls)"
    assert await _streamed_output(agent, output_type=OutputType) == OutputType(value="a")


async def test_custom_output_type_default_structured() -> None:
    model = ScriptedModel(['{"value": "a"}', "success (no tool calls)"])
    agent = Agent("a", model, output_type=OutputType)
    assert await _streamed_output(agent) == OutputType(value="a")
    assert await _streamed_output(agent, output_type=str) == "success (no tool calls)"
    assert [r.response_format for r in model.requests] == [OutputType, None]


# --- tests/test_history_processor.py: through a middleware's model hook ---


class KeepRequests(Middleware):
    """pydantic-ai's ``ProcessHistory(lambda messages: [requests only])``."""

    async def model(self, request: ModelRequest, ctx: RunContext, call_next: Any) -> Any:
        kept = [m for m in request.messages if m.role != "assistant"]
        return await call_next(dataclasses.replace(request, messages=kept))


async def test_history_processor_messages_sent_to_provider() -> None:
    # A middleware's model hook changes what each request sends (here: the model's earlier
    # answers left out), as a processor does. Unlike a processor (Agent(history_processors=),
    # test_pydantic_ai_ports_19.py), it leaves the run's transcript as it was (docs/harness.md,
    # "Middleware").
    model = ScriptedModel(["Provider response"])
    agent = Agent("a", model, middleware=[KeepRequests()])
    history = [
        Message(role="user", content="Previous question"),
        Message(role="assistant", content="Previous answer"),
    ]
    result = await agent.run("New question", history=history)
    assert [(m.role, m.content) for m in model.requests[0].messages] == [
        ("user", "Previous question"),
        ("user", "New question"),
    ]
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Previous question"),
        ("assistant", "Previous answer"),
        ("user", "New question"),
        ("assistant", "Provider response"),
    ]


# --- through litellm (the testkit's OpenAI-compatible server) ---


async def test_a_per_run_output_type_is_the_response_format_litellm_sends() -> None:
    # each run's own: text (no response_format), then Simple's schema, then the agent's again
    async with OpenAICompatServer(["plain", '{"a": 1, "b": "x"}', "again"]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        agent = Agent("a", model)
        first = await agent.run("Hello")
        second = await agent.run("Hello", output_type=Simple)
        third = await agent.run("Hello")
    assert (first.output, second.output, third.output) == ("plain", Simple(a=1, b="x"), "again")
    formats = [r.get("response_format") for r in server.requests]
    assert formats[0] is None and formats[2] is None
    assert formats[1]["json_schema"]["name"] == "Simple"
    assert formats[1]["json_schema"]["schema"]["required"] == ["a", "b"]
    # a per-run ToolOutput is offered as a function tool
    async with OpenAICompatServer([tool_call("final_result", a=2, b="y")]) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        result = await Agent("a", model).run("Hello", output_type=ToolOutput(Simple))
    assert result.output == Simple(a=2, b="y"), result.error
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["final_result"]


async def test_a_sub_agent_invoked_with_its_own_output_type() -> None:
    child = SubAgent(Agent("child", ScriptedModel(['{"a": 5, "b": "z"}'])), description="d")
    assert await child.invoke("Hello", output_type=Simple) == Simple(a=5, b="z")
