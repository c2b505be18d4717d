"""pydantic-ai's output function and output marker tests, ported (a seventh batch; see
test_pydantic_ai_ports.py to _6): ``output_type=fn`` (an output tool whose arguments are the
function's parameters), ``ToolOutput``, ``TextOutput``, ``NativeOutput``, ``PromptedOutput``
and lists mixing them (the options we do not carry out refused by name), over the testkit's
fakes and the OpenAI-compatible test server.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``).
Where we behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from tinyagents import (
    Agent,
    ModelRetry,
    NativeOutput,
    PromptedOutput,
    RunContext,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    TextOutput,
    ToolOutput,
    UnsupportedOutputError,
    tool,
)
from tinyagents.errors import ConfigurationError, RunLimitExceeded
from tinyagents.harness import LiteLLMModel, ModelRequest, ModelResponse
from tinyagents.testkit import (
    FunctionModel,
    OpenAICompatServer,
    ScriptedModel,
    tool_call,
    tool_calls,
)


class Weather(BaseModel):
    temperature: float
    description: str


class Foo(BaseModel):
    a: int
    b: str


class Bar(BaseModel):
    """A bar."""

    c: bool


def get_weather(city: str) -> Weather:
    if city != "Mexico City":
        raise ModelRetry("City not found, I only know Mexico City")
    return Weather(temperature=28.7, description="sunny")


def upcase(text: str) -> str:
    return text.upper()


def call_first_output_tool(args: dict[str, Any]) -> Any:
    """A model that calls the first output tool it is offered with ``args``."""

    def answer(request: ModelRequest) -> ModelResponse:
        return tool_call(request.tools[0].name, args)

    return answer


def tool_results(request: ModelRequest) -> list[tuple[str | None, str]]:
    return [(m.name, m.content) for m in request.messages if m.role == "tool"]


# --- output functions --------------------------------------------------------------------------


async def test_output_type_function() -> None:
    # ports test_output_type_function: the function is the output tool final_result, its
    # parameters the tool's arguments, described as pydantic-ai's default; its return is
    # the output, and no response_format is sent.
    model = FunctionModel(call_first_output_tool({"city": "Mexico City"}))
    result = await Agent("a", model, output_type=get_weather).run("Mexico City")
    assert result.status == RunStatus.COMPLETED, result.error
    assert result.output == Weather(temperature=28.7, description="sunny")
    (spec,) = model.requests[0].tools
    assert spec.name == "final_result"
    assert spec.description == "The final response which ends this conversation"
    assert spec.parameters["properties"] == {"city": {"type": "string"}}
    assert spec.parameters["required"] == ["city"]
    assert model.requests[0].response_format is None
    assert result.messages[-1].content == "Final result processed."


async def test_output_type_function_with_run_context() -> None:
    # ports test_output_type_function_with_run_context: a RunContext first parameter is
    # given the run's context (the output tool's call named in it), not offered to the model.
    seen: list[tuple[str | None, int, int | None]] = []

    def weather(ctx: RunContext, city: str) -> Weather:
        seen.append((ctx.tool_name, ctx.retry, ctx.max_retries))
        return Weather(temperature=20, description=city)

    model = FunctionModel(call_first_output_tool({"city": "Oslo"}))
    result = await Agent("a", model, output_type=weather).run("go")
    assert result.output == Weather(temperature=20, description="Oslo"), result.error
    assert seen == [("final_result", 0, 1)]
    assert list(model.requests[0].tools[0].parameters["properties"]) == ["city"]


async def test_an_async_output_function_is_awaited() -> None:
    async def weather(city: str) -> str:
        return f"Weather in {city}"

    model = FunctionModel(call_first_output_tool({"city": "Lima"}))
    assert (await Agent("a", model, output_type=weather).run("go")).output == "Weather in Lima"


async def test_output_type_function_with_retry() -> None:
    # ports test_output_type_function_with_retry: the function's ModelRetry is the call's
    # result (pydantic-ai's RetryPromptPart), and the model is asked again.
    def answer(request: ModelRequest) -> ModelResponse:
        city = "New York City" if len(request.messages) == 1 else "Mexico City"
        return tool_call("final_result", city=city)

    model = FunctionModel(answer)
    result = await Agent("a", model, output_type=get_weather).run("New York City")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    ((name, sent),) = tool_results(model.requests[1])
    assert name == "final_result"
    assert sent == "City not found, I only know Mexico City\n\nFix the errors and try again."


async def test_output_function_arguments_that_do_not_validate_are_sent_back() -> None:
    model = ScriptedModel(
        [tool_call("final_result", city=3), tool_call("final_result", city="Mexico City")]
    )
    result = await Agent("a", model, output_type=get_weather).run("go")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert sent == (  # pydantic-ai's RetryPromptPart with a tool name: the input is kept
        "1 validation error:\n```json\n[\n  {\n"
        '    "type": "string_type",\n    "loc": [\n      "city"\n    ],\n'
        '    "msg": "Input should be a valid string",\n    "input": 3\n  }\n]\n```\n\n'
        "Fix the errors and try again."
    )


async def test_tool_output_function_retries() -> None:
    # ports test_tool_output_function_retries: ctx.retry counts the calls sent back, and
    # ctx.max_retries is the agent's output_retries.
    retries: list[tuple[int, int | None]] = []

    def weather(ctx: RunContext, city: str) -> str:
        retries.append((ctx.retry, ctx.max_retries))
        if ctx.retry == 3:
            return f"Weather in {city}"
        raise ModelRetry(f"Retry {ctx.retry}")

    model = FunctionModel(call_first_output_tool({"city": "Mexico City"}))
    result = await Agent("a", model, output_type=weather, output_retries=3).run("Hello")
    assert result.output == "Weather in Mexico City", result.error
    assert retries == [(0, 3), (1, 3), (2, 3), (3, 3)]


async def test_an_output_function_past_its_retries_fails_the_run() -> None:
    model = FunctionModel(call_first_output_tool({"city": "Paris"}))
    result = await Agent("a", model, output_type=get_weather).run("go")
    assert result.status == RunStatus.FAILED
    assert "final_result call was sent back by its output function" in (result.error or "")
    assert "City not found" in (result.error or "")


async def test_an_output_functions_other_exception_fails_the_run() -> None:
    # as pydantic-ai: only ModelRetry asks the model again; anything else is the run's end
    def broken(city: str) -> str:
        raise KeyError(city)

    model = FunctionModel(call_first_output_tool({"city": "Paris"}))
    result = await Agent("a", model, output_type=broken).run("go")
    assert result.status == RunStatus.FAILED and "KeyError" in (result.error or "")


async def test_output_validators_run_on_an_output_functions_return() -> None:
    agent = Agent(
        "a", FunctionModel(call_first_output_tool({"city": "Mexico City"})), output_type=get_weather
    )

    @agent.output_validator
    def check(ctx: RunContext, output: Weather) -> str:
        assert ctx.tool_name == "final_result"
        return output.description

    assert (await agent.run("go")).output == "sunny"


async def test_a_text_answer_to_output_functions_alone_is_asked_for_a_call() -> None:
    # pydantic-ai's "Please include your response in a tool call." when the output type has
    # no text: the text is not the output, and the ask counts against output_retries.
    model = ScriptedModel(["it is sunny", tool_call("final_result", city="Mexico City")])
    result = await Agent("a", model, output_type=get_weather).run("go")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nPlease include your response in a tool call.\n\n"
        "Fix the errors and try again."
    )
    model = ScriptedModel(["text", "text again"])
    result = await Agent("a", model, output_type=get_weather).run("go")
    assert result.status == RunStatus.FAILED
    assert "answered in text again" in (result.error or "")


async def test_output_type_function_or_model() -> None:
    # ports test_output_type_function_or_model: several outputs are one tool each, named
    # final_result_<name of the function or class>, described "<name>: ..." with no docstring.
    model = FunctionModel(call_first_output_tool({"city": "Mexico City"}))
    result = await Agent("a", model, output_type=[get_weather, Weather]).run("go")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    specs = [(t.name, t.description) for t in model.requests[0].tools]
    assert specs == [
        (
            "final_result_get_weather",
            "get_weather: The final response which ends this conversation",
        ),
        ("final_result_Weather", "Weather: The final response which ends this conversation"),
    ]
    model = ScriptedModel([tool_call("final_result_Weather", temperature=1, description="x")])
    result = await Agent("a", model, output_type=[get_weather, Weather]).run("go")
    assert result.output == Weather(temperature=1, description="x"), result.error


async def test_an_output_function_with_a_docstring_is_described_by_it() -> None:
    def forecast(city: str) -> str:
        """Return the forecast for a city."""
        return city

    model = FunctionModel(call_first_output_tool({"city": "Rome"}))
    await Agent("a", model, output_type=forecast).run("go")
    assert model.requests[0].tools[0].description == "Return the forecast for a city."


async def test_output_functions_with_text_take_a_text_answer() -> None:
    model = ScriptedModel(["plain words"])
    result = await Agent("a", model, output_type=[get_weather, str]).run("go")
    assert result.output == "plain words", result.error
    assert [t.name for t in model.requests[0].tools] == ["final_result"]


# --- ToolOutput ----------------------------------------------------------------------------------


async def test_output_type_function_with_custom_tool_name() -> None:
    # ports test_output_type_function_with_custom_tool_name
    model = FunctionModel(call_first_output_tool({"city": "Mexico City"}))
    agent = Agent("a", model, output_type=ToolOutput(get_weather, name="get_weather"))
    result = await agent.run("Mexico City")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    (spec,) = model.requests[0].tools
    assert (spec.name, spec.description) == (
        "get_weather",
        "The final response which ends this conversation",
    )


async def test_tool_output_names_and_descriptions() -> None:
    # ports tests/test_agent.py's ToolOutput examples (output_type=[ToolOutput(Fruit,
    # name='return_fruit'), ...]): a description goes before the model's docstring.
    model = ScriptedModel([tool_call("return_bar", c=True)])
    output_type = [
        ToolOutput(Foo, name="return_foo", description="Give a foo"),
        ToolOutput(Bar, name="return_bar", description="Give a bar"),
    ]
    result = await Agent("a", model, output_type=output_type).run("go")
    assert result.output == Bar(c=True), result.error
    specs = [(t.name, t.description) for t in model.requests[0].tools]
    assert specs == [("return_foo", "Give a foo"), ("return_bar", "Give a bar. A bar.")]


async def test_tool_output_max_retries_overrides_agent_retries() -> None:
    # ports test_tool_output_max_retries_overrides_agent_retries
    seen: list[tuple[int, int | None]] = []

    def weather(ctx: RunContext, city: str) -> str:
        seen.append((ctx.retry, ctx.max_retries))
        if ctx.retry < 5:
            raise ModelRetry(f"Retry {ctx.retry}")
        return f"Weather in {city}"

    model = FunctionModel(call_first_output_tool({"city": "Mexico City"}))
    agent = Agent("a", model, output_type=ToolOutput(weather, max_retries=5), output_retries=2)
    result = await agent.run("Hello")
    assert result.output == "Weather in Mexico City", result.error
    assert seen == [(n, 5) for n in range(6)]


async def test_tool_output_max_retries_per_tool() -> None:
    # ports test_tool_output_max_retries_per_tool: each ToolOutput's cap counts its own
    # calls sent back.
    a_seen: list[int | None] = []
    b_seen: list[int | None] = []

    def output_a(ctx: RunContext, value: str) -> str:
        a_seen.append(ctx.max_retries)
        if ctx.retry < 3:
            raise ModelRetry(f"Retry A {ctx.retry}")
        return f"A: {value}"

    def output_b(ctx: RunContext, value: str) -> str:
        b_seen.append(ctx.max_retries)
        raise ModelRetry(f"Retry B {ctx.retry}")

    calls = 0

    def answer(request: ModelRequest) -> ModelResponse:
        nonlocal calls
        calls += 1
        names = [t.name for t in request.tools]
        name = next(n for n in names if ("output_b" if calls == 1 else "output_a") in n)
        return tool_call(name, value="x" if calls == 1 else "hello")

    output_type = [ToolOutput(output_a, max_retries=3), ToolOutput(output_b, max_retries=1)]
    agent = Agent("a", FunctionModel(answer), output_type=output_type, output_retries=0)
    result = await agent.run("Hello")
    assert result.output == "A: hello", result.error
    assert b_seen == [1]
    assert a_seen == [3, 3, 3, 3]


async def test_a_tool_output_past_its_own_max_retries_fails_the_run() -> None:
    model = FunctionModel(call_first_output_tool({"city": "Paris"}))
    agent = Agent("a", model, output_type=ToolOutput(get_weather, max_retries=2))
    result = await agent.run("go")
    assert result.status == RunStatus.FAILED
    assert "max_retries=2" in (result.error or "")
    assert len(model.requests) == 3


def test_tool_output_refuses_bad_options() -> None:
    with pytest.raises(ConfigurationError, match="max_retries"):
        ToolOutput(Foo, max_retries=-1)
    with pytest.raises(ConfigurationError, match="name"):
        ToolOutput(Foo, name="no spaces allowed")
    with pytest.raises(ConfigurationError, match="strict"):
        ToolOutput(Foo, strict="yes")  # type: ignore[arg-type]


def test_a_tool_output_of_a_bare_type_is_wrapped() -> None:
    # as pydantic-ai wraps it, in {"response": ...} (test_pydantic_ai_ports_8.py)
    agent = Agent("a", ScriptedModel(["x"]), output_type=ToolOutput(int))
    assert agent.output_tools["final_result"].parameters["required"] == ["response"]


def test_a_tool_named_as_a_tool_output_is_refused() -> None:
    @tool
    def get_weather_tool(city: str) -> str:
        return city

    with pytest.raises(ConfigurationError, match="output tools"):
        Agent(
            "a",
            ScriptedModel(["x"]),
            tools=[get_weather_tool],
            output_type=ToolOutput(get_weather, name="get_weather_tool"),
        )


async def test_a_tool_output_beside_function_tools_in_one_response() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    model = ScriptedModel(
        [tool_calls(tool_call("note", text="x"), tool_call("final_result", city="Mexico City"))]
    )
    result = await Agent("a", model, tools=[note], output_type=ToolOutput(get_weather)).run("go")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    assert ran == ["x"]


# --- TextOutput ----------------------------------------------------------------------------------


async def test_output_type_text_output_function() -> None:
    # ports test_output_type_text_output_function
    model = ScriptedModel(["world"])
    result = await Agent("a", model, output_type=TextOutput(upcase)).run("hello")
    assert result.output == "WORLD", result.error
    assert model.requests[0].tools == [] and model.requests[0].response_format is None


async def test_output_type_text_output_function_with_retry() -> None:
    # ports test_output_type_text_output_function_with_retry: its ModelRetry asks again
    def weather(ctx: RunContext, city: str) -> Weather:
        assert ctx is not None
        return get_weather(city)

    model = ScriptedModel(["New York City", "Mexico City"])
    result = await Agent("a", model, output_type=TextOutput(weather)).run("New York City")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nCity not found, I only know Mexico City\n\n"
        "Fix the errors and try again."
    )


async def test_output_function_retries() -> None:
    # ports test_output_function_retries (TextOutput): ctx.retry and ctx.max_retries
    seen: list[tuple[int, int | None]] = []

    async def weather(ctx: RunContext, text: str) -> str:
        seen.append((ctx.retry, ctx.max_retries))
        if ctx.retry == 3:
            return f"Weather: {text}"
        raise ModelRetry(f"Retry {ctx.retry}")

    model = FunctionModel(lambda request: "sunny")
    result = await Agent("a", model, output_type=TextOutput(weather), output_retries=3).run("Hi")
    assert result.output == "Weather: sunny", result.error
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3)]


async def test_a_text_output_function_past_the_output_retries_fails_the_run() -> None:
    def refuse(text: str) -> str:
        raise ModelRetry(f"not {text}")

    model = ScriptedModel(["x", "y"])
    result = await Agent("a", model, output_type=TextOutput(refuse)).run("go")
    assert result.status == RunStatus.FAILED
    assert "sent back by its TextOutput function or an output validator" in (result.error or "")
    assert "not y" in (result.error or "")


async def test_text_that_a_text_output_functions_parameter_refuses_is_sent_back() -> None:
    def short(text: Annotated[str, Field(max_length=5)]) -> str:
        return text

    model = ScriptedModel(["far too long", "brief"])
    result = await Agent("a", model, output_type=TextOutput(short)).run("go")
    assert result.output == "brief", result.error
    assert model.requests[1].messages[-1].content == (
        "Your answer is not valid text output: text: String should have at most 5 characters "
        "(got 'far too long'). Fix the errors and try again."
    )


async def test_a_text_output_beside_output_tools() -> None:
    model = ScriptedModel(["words"])
    result = await Agent("a", model, output_type=[Foo, TextOutput(upcase)]).run("go")
    assert result.output == "WORDS", result.error
    assert [t.name for t in model.requests[0].tools] == ["final_result"]
    model = ScriptedModel([tool_call("final_result", a=1, b="x")])
    result = await Agent("a", model, output_type=[Foo, TextOutput(upcase)]).run("go")
    assert result.output == Foo(a=1, b="x"), result.error


@pytest.mark.parametrize(
    "output_type",
    [[str, str], [str, TextOutput(upcase)], [TextOutput(upcase), TextOutput(upcase)]],
    ids=["str-str", "str-TextOutput", "TextOutput-TextOutput"],
)
def test_output_type_multiple_text_output(output_type: Any) -> None:
    # ports test_output_type_multiple_text_output
    with pytest.raises(ConfigurationError, match="only one str or TextOutput"):
        Agent("a", ScriptedModel(["x"]), output_type=output_type)


def test_output_type_text_output_invalid() -> None:
    # ports test_output_type_text_output_invalid
    def int_func(x: int) -> str:
        return str(x)

    with pytest.raises(
        ConfigurationError, match="TextOutput must take a function taking a single str"
    ):
        Agent("a", ScriptedModel(["x"]), output_type=TextOutput(int_func))


async def test_a_sub_agent_hands_back_its_output_functions_return() -> None:
    child = Agent(
        "c", ScriptedModel([tool_call("final_result", city="Mexico City")]), output_type=get_weather
    )
    assert await SubAgent(child).invoke("go") == Weather(temperature=28.7, description="sunny")
    child = Agent("c", ScriptedModel(["abc"]), output_type=TextOutput(upcase))
    assert await SubAgent(child).invoke("go") == "ABC"


def partial_child(output_type: Any) -> SubAgent:
    """A ``stop_with_partial`` child stopped at its model call budget with text beside its
    tool calls (as test_limit_behavior's ``looping_child``)."""

    @tool
    def note(text: str) -> str:
        return "noted"

    script = [tool_call("note", text="a"), tool_call("note", text="b"), tool_call("note", text="c")]
    for response in script:
        response.text = "partial findings"
    limits = RunLimits(max_model_calls=2, behavior="stop_with_partial")
    model = ScriptedModel(script)
    return SubAgent(Agent("c", model, tools=[note], limits=limits, output_type=output_type))


async def test_a_partial_output_goes_through_the_text_output_function() -> None:
    # a stop_with_partial run's partial output is its final output: a TextOutput's text
    # passes its function as a completed answer's does; a ModelRetry there leaves none.
    async with Runtime() as rt:
        assert await partial_child(TextOutput(upcase)).invoke("go", runtime=rt) == (
            "PARTIAL FINDINGS"
        )

    def refuse(text: str) -> str:
        raise ModelRetry("not done")

    async with Runtime() as rt:
        with pytest.raises(RunLimitExceeded, match="TextOutput function refused its partial"):
            await partial_child(TextOutput(refuse)).invoke("go", runtime=rt)


async def test_output_tools_alone_have_no_partial_output_in_text() -> None:
    # with output functions (or ToolOutput) alone, text is never the output, partial or not
    async with Runtime() as rt:
        with pytest.raises(RunLimitExceeded, match="only through its output tools"):
            await partial_child(get_weather).invoke("go", runtime=rt)


# --- NativeOutput and PromptedOutput -------------------------------------------------------------


async def test_native_output() -> None:
    # ports test_native_output: the output's schema is the response_format (which is how a
    # model class, or a union of them, is sent anyway); no output tool is offered.
    model = ScriptedModel(['{"a": 1, "b": "x"}'])
    agent = Agent("a", model, output_type=NativeOutput(Foo))
    assert agent.output_type is Foo and agent.output_tools == {}
    result = await agent.run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert model.requests[0].response_format is Foo and model.requests[0].tools == []
    model = ScriptedModel(['{"result": {"kind": "Bar", "data": {"c": true}}}'])
    result = await Agent("a", model, output_type=NativeOutput([Foo, Bar])).run("go")
    assert result.output == Bar(c=True), result.error


def test_output_type_native_output_must_be_only() -> None:
    # ports test_output_type_native_output_must_be_only / ..._prompted_output_must_be_only
    for marker in (NativeOutput(Foo), PromptedOutput(Foo)):
        with pytest.raises(ConfigurationError, match="must be the only output type"):
            Agent("a", ScriptedModel(["x"]), output_type=[marker, str])


@pytest.mark.parametrize(
    "marker",
    [
        NativeOutput(Foo, name="foo"),
        NativeOutput(Foo, description="a foo"),
        NativeOutput(Foo, strict=True),
        NativeOutput(Foo, template="Give {schema}"),
        NativeOutput(get_weather),
        NativeOutput([Foo, str]),
    ],
    ids=["name", "description", "strict", "template", "function", "str"],
)
def test_native_output_options_we_do_not_carry_out_are_refused_by_name(marker: Any) -> None:
    with pytest.raises(UnsupportedOutputError, match="NativeOutput"):
        Agent("a", ScriptedModel(["x"]), output_type=marker)


class CityLocation(BaseModel):
    """Description from docstring."""

    city: str
    country: str


def system_text(request: ModelRequest) -> str | None:
    first = request.messages[0]
    return first.content if first.role == "system" else None


async def test_prompted_output() -> None:
    # ports test_prompted_output: no response_format; the schema (titled and described by
    # the marker, as pydantic-ai's ObjectOutputProcessor writes it) ends the system prompt of each request, in pydantic-ai's default
    # template, and the answer's text is read as its JSON. The transcript keeps no prompt.
    model = ScriptedModel(['{"city": "Mexico City", "country": "Mexico"}'])
    marker = PromptedOutput(
        CityLocation, name="City & Country", description="Description from PromptedOutput"
    )
    result = await Agent("a", model, instructions=None, output_type=marker).run("capital?")
    assert result.output == CityLocation(city="Mexico City", country="Mexico"), result.error
    request = model.requests[0]
    assert request.response_format is None and request.tools == []
    schema = {  # no property titles; the marker's description, then the docstring, last
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
        "title": "City & Country",
        "type": "object",
        "description": "Description from PromptedOutput. Description from docstring.",
    }
    assert system_text(request) == (
        "Always respond with a JSON object that's compatible with this schema:\n\n"
        f"{json.dumps(schema)}\n\nDon't include any text or Markdown fencing before or after.\n"
    )
    assert [m.role for m in result.messages] == ["user", "assistant"]


#: Foo's schema as pydantic-ai writes it into the prompt: no property titles.
FOO_SCHEMA = json.dumps(
    {
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
        "title": "Foo",
        "type": "object",
    }
)


async def test_prompted_output_with_template_and_instructions() -> None:
    # ports test_prompted_output_with_template / _with_template_and_instructions: a template
    # without {schema} has the schema after it; the agent's instructions come first.
    model = ScriptedModel(['{"a": 1, "b": "x"}'])
    marker = PromptedOutput(Foo, template="Gimme some JSON:")
    result = await Agent("a", model, instructions="Be helpful", output_type=marker).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert system_text(model.requests[0]) == f"Be helpful\n\nGimme some JSON:\n\n{FOO_SCHEMA}"
    assert result.messages[0].content == "Be helpful"  # the transcript's is the agent's own
    model = ScriptedModel(['{"a": 1, "b": "x"}'])
    marker = PromptedOutput(Foo, template="JSON like {schema}, please")
    await Agent("a", model, output_type=marker).run("go")
    assert system_text(model.requests[0]) == f"JSON like {FOO_SCHEMA}, please"


async def test_prompted_output_with_template_false() -> None:
    # ports test_prompted_output_with_template_false: no schema prompt at all
    model = ScriptedModel(['{"a": 1, "b": "x"}'])
    agent = Agent("a", model, instructions=None, output_type=PromptedOutput(Foo, template=False))
    result = await agent.run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    assert system_text(model.requests[0]) is None
    assert model.requests[0].response_format is None


async def test_prompted_output_union_and_retries() -> None:
    # ports test_prompted_output_union_invalid_kind_retries: a union is read in the union
    # envelope (its schema the one in the prompt); a kind that is no member's is sent back
    model = ScriptedModel(
        [
            '{"result": {"kind": "Baz", "data": {}}}',
            '```json\n{"result": {"kind": "Bar", "data": {"c": true}}}\n```',
        ]
    )
    result = await Agent("a", model, output_type=PromptedOutput([Foo, Bar])).run("go")
    assert result.output == Bar(c=True), result.error
    assert '"kind"' in (system_text(model.requests[0]) or "")
    # pydantic-ai's words (test_pydantic_ai_ports_8.py checks them whole)
    assert (
        '"loc": [\n      "result",\n      "kind"\n    ]' in model.requests[1].messages[-1].content
    )


def test_prompted_output_of_functions_or_text_is_refused_by_name() -> None:
    for outputs in (get_weather, [Foo, str]):
        with pytest.raises(UnsupportedOutputError, match="PromptedOutput takes pydantic model"):
            Agent("a", ScriptedModel(["x"]), output_type=PromptedOutput(outputs))
    assert issubclass(UnsupportedOutputError, ConfigurationError)


# --- through litellm and the OpenAI-compatible test server ---------------------------------------


async def test_output_functions_and_markers_through_litellm() -> None:
    # an output function's tool goes out as a function tool (ToolOutput's strict flag with
    # it), no response_format; the call comes back through litellm and the function's
    # ModelRetry is its tool result. A TextOutput's text is passed through its function.
    replies = [
        tool_call("get_weather", city="Paris"),
        tool_call("get_weather", city="Mexico City"),
        "quiet",
    ]
    async with OpenAICompatServer(replies, mode="openai") as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        marker = ToolOutput(get_weather, name="get_weather", strict=False)
        result = await Agent("a", model, output_type=marker).run("go")
        text = await Agent("a", model, output_type=TextOutput(upcase)).run("go")
    assert result.output == Weather(temperature=28.7, description="sunny"), result.error
    assert text.output == "QUIET", text.error
    first = server.requests[0]
    assert "response_format" not in first
    (function,) = [t["function"] for t in first["tools"]]
    assert function["name"] == "get_weather" and function["strict"] is False
    second = server.requests[1]["messages"]
    assert second[-1]["role"] == "tool" and "City not found" in second[-1]["content"]
    assert "tools" not in server.requests[2]
    assert server.refusals == []


async def test_prompted_output_through_litellm() -> None:
    # no response_format goes out; the schema is in the system message litellm sends
    async with OpenAICompatServer(['{"a": 2, "b": "z"}'], mode="openai") as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        agent = Agent("a", model, instructions="Be brief", output_type=PromptedOutput(Foo))
        result = await agent.run("go")
    assert result.output == Foo(a=2, b="z"), result.error
    (sent,) = server.requests
    assert "response_format" not in sent
    system = sent["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief\n\nAlways")
    assert server.refusals == []
