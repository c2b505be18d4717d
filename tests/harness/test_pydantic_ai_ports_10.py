"""pydantic-ai's retry prompt after an empty answer ("Please return text."), its retry prompt
of an output tool call whose arguments do not validate (the validation errors as JSON), a
``typing.TypedDict`` output type on Python 3.11, and more of its agent tests, ported (a
tenth batch; see test_pydantic_ai_ports.py to _9).

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/test_agent.py``
unless said otherwise). Where we behave differently on purpose, the test says why.
"""

from __future__ import annotations

import asyncio
import json
import sys
import typing

import pytest
import typing_extensions
from pydantic import BaseModel, field_validator

from tinyagents import Agent, RunContext, RunLimits, RunStatus, ToolOutput, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import ModelRequest, ModelResponse, ToolCall
from tinyagents.testkit import FunctionModel, ScriptedModel, reply, tool_call


class Foo(BaseModel):
    a: int
    b: str


def ping() -> str:
    """Answer pong."""
    return "pong"


def save_progress(data: str) -> str:
    """Save the progress."""
    return "saved"


def please(alternatives: str) -> str:
    """The retry prompt after an empty answer, as pydantic-ai's ``RetryPromptPart`` (no tool
    name) reaches the model: ``model_response()`` of its ``Please ...`` content."""
    return f"Validation feedback:\nPlease {alternatives}.\n\nFix the errors and try again."


def tool_results(request: ModelRequest) -> list[tuple[str | None, str]]:
    return [(m.name, m.content) for m in request.messages if m.role == "tool"]


# --- the retry prompt after an empty answer: pydantic-ai's "Please return text." ---


async def test_empty_response() -> None:
    # ports test_empty_response: an agent of text output without tools is asked "Please
    # return text." (its RetryPromptPart, written as model_response() writes one without a
    # tool name; tests/models/test_openai.py pins the user message it becomes).
    model = ScriptedModel([ModelResponse(text=""), reply("ok here is text")])
    result = await Agent("a", model).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "ok here is text")
    ask = model.requests[1].messages[-1]
    assert (ask.role, ask.content) == ("user", please("return text"))
    assert ask.metadata.get("retry") == "empty_answer"


async def test_retry_message_no_tools() -> None:
    # ports test_retry_message_no_tools (and test_thinking_only_response_retry): without a
    # function tool the ask does not suggest calling one.
    model = ScriptedModel([ModelResponse(text=""), reply("result")])
    result = await Agent("a", model).run("Hello")
    assert result.output == "result", result.error
    assert model.requests[1].messages[-1].content == please("return text")


async def test_thinking_only_response_after_tool_call_retries() -> None:
    # ports test_thinking_only_response_after_tool_call_retries (and the end of
    # test_empty_final_response): with a function tool the ask is "Please return text or
    # call a tool."; the text sent beside the earlier tool call is not reused as the answer.
    model = ScriptedModel(
        [
            ModelResponse(
                text="I'll save your progress.",
                tool_calls=[ToolCall(id="c1", name="save_progress", args={"data": "test"})],
            ),
            ModelResponse(text=""),
            reply("Your progress is saved."),
        ]
    )
    result = await Agent("a", model, tools=[save_progress]).run("Hello")
    assert result.output == "Your progress is saved.", result.error
    assert model.requests[2].messages[-1].content == please("return text or call a tool")


async def test_the_ask_names_no_tool_the_run_was_not_granted() -> None:
    # pydantic-ai builds the ask from the tools of the step (its tool manager's): a run
    # narrowed to no tools is asked for text alone.
    model = ScriptedModel([ModelResponse(text=""), reply("ok")])
    await Agent("a", model, tools=[ping]).run("Hello", tools=[])
    assert model.requests[1].messages[-1].content == please("return text")


async def test_thinking_only_response_retry_with_tool_output() -> None:
    # ports test_thinking_only_response_retry_with_tool_output: output given through an
    # output tool alone is asked "Please include your response in a tool call."
    model = ScriptedModel([ModelResponse(text=""), tool_call("final_result", a=1, b="ok")])
    result = await Agent("a", model, output_type=ToolOutput(Foo)).run("Hello")
    assert result.output == Foo(a=1, b="ok"), result.error
    assert model.requests[1].messages[-1].content == please("include your response in a tool call")


async def test_the_ask_of_output_tools_does_not_name_function_tools() -> None:
    # pydantic-ai's alternatives: "include your response in a tool call" stands for every
    # tool when there are output tools (its ``elif``), however many function tools the run has.
    model = ScriptedModel([ModelResponse(text=""), tool_call("final_result", a=1, b="ok")])
    result = await Agent("a", model, tools=[ping], output_type=ToolOutput(Foo)).run("Hello")
    assert result.output == Foo(a=1, b="ok"), result.error
    assert model.requests[1].messages[-1].content == please("include your response in a tool call")


async def test_empty_response_to_text_or_output_tools() -> None:
    # ports test_empty_response_exceeds_max_retries (its ask): output that is text or an
    # output tool's call is asked "Please return text or include your response in a tool
    # call.", and a second empty answer ends the run (pydantic-ai: Exceeded maximum output
    # retries (1)).
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_type=[Foo, str]).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 2
    assert model.requests[1].messages[-1].content == please(
        "return text or include your response in a tool call"
    )


async def test_empty_response_with_structured_output() -> None:
    # Our ``output_type=Foo`` is pydantic-ai's NativeOutput (a response format, no output
    # tool): its schema reads text (NativeOutputSchema's text processor), so the ask is
    # "Please return text." (or "... or call a tool." beside a function tool).
    model = ScriptedModel([ModelResponse(text=""), reply('{"a": 1, "b": "x"}')])
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.output == Foo(a=1, b="x"), result.error
    assert model.requests[1].messages[-1].content == please("return text")
    model = ScriptedModel([ModelResponse(text=""), reply('{"a": 1, "b": "x"}')])
    await Agent("a", model, tools=[ping], output_type=Foo).run("Hello")
    assert model.requests[1].messages[-1].content == please("return text or call a tool")


async def test_empty_response_streamed() -> None:
    # ports tests/test_streaming.py's empty response retry: the same ask over a stream.
    model = ScriptedModel([ModelResponse(text=""), reply("ok")], stream=True)
    result = await Agent("a", model).run("Hello")
    assert result.output == "ok", result.error
    assert model.requests[1].messages[-1].content == please("return text")


# --- the retry prompt of an output tool call that does not validate: pydantic-ai's words ---


async def test_result_pydantic_model_validation_error() -> None:
    # ports test_result_pydantic_model_validation_error: the output tool's retry is its
    # RetryPromptPart's model_response() with a tool name: "1 validation error:", the errors
    # as JSON in a fence (each without its ctx, its input kept) and "Fix the errors and try
    # again.", the call's result.
    class Bar(BaseModel):
        a: int
        b: str

        @field_validator("b")
        @classmethod
        def check_b(cls, v: str) -> str:
            if v == "foo":
                raise ValueError("must not be foo")
            return v

    model = ScriptedModel(
        [tool_call("final_result", a=1, b="foo"), tool_call("final_result", a=1, b="bar")]
    )
    result = await Agent("a", model, output_type=ToolOutput(Bar)).run("Hello")
    assert result.output == Bar(a=1, b="bar"), result.error
    ((name, sent),) = tool_results(model.requests[1])
    assert name == "final_result"
    assert sent == (
        "1 validation error:\n"
        "```json\n"
        "[\n"
        "  {\n"
        '    "type": "value_error",\n'
        '    "loc": [\n'
        '      "b"\n'
        "    ],\n"
        '    "msg": "Value error, must not be foo",\n'
        '    "input": "foo"\n'
        "  }\n"
        "]\n"
        "```\n\n"
        "Fix the errors and try again."
    )


async def test_result_pydantic_model_retry() -> None:
    # ports test_result_pydantic_model_retry: the retry's content is the validation errors
    # (int_parsing at a, its input 'wrong'), as the call's result; then the output.
    model = ScriptedModel(
        [tool_call("final_result", a="wrong", b="foo"), tool_call("final_result", a=42, b="foo")]
    )
    result = await Agent("a", model, output_type=[Foo, str]).run("Hello")
    assert result.output == Foo(a=42, b="foo"), result.error
    ((name, sent),) = tool_results(model.requests[1])
    assert name == "final_result" and sent.startswith("1 validation error:\n```json\n")
    errors = json.loads(sent.split("```json\n")[1].split("\n```")[0])
    assert errors == [
        {
            "type": "int_parsing",
            "loc": ["a"],
            "msg": "Input should be a valid integer, unable to parse string as an integer",
            "input": "wrong",
        }
    ]
    assert [m.metadata.get("retry") for m in result.messages if m.role == "tool"] == [
        "invalid_output",
        None,
    ]


async def test_output_function_arguments_are_sent_back_as_validation_errors() -> None:
    # an output function's arguments are validated as pydantic-ai validates them (its
    # function schema), and their errors go back the same way, two as "2 validation errors".
    def weather(city: str, days: int) -> str:
        return f"{city} for {days}"

    model = ScriptedModel(
        [
            tool_call("final_result", city=3, days="x"),
            tool_call("final_result", city="Lima", days=2),
        ]
    )
    result = await Agent("a", model, output_type=weather).run("go")
    assert result.output == "Lima for 2", result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert sent.startswith("2 validation errors:\n```json\n")
    assert sent.endswith("```\n\nFix the errors and try again.")
    errors = json.loads(sent.split("```json\n")[1].split("\n```")[0])
    assert [(e["loc"], e["input"]) for e in errors] == [(["city"], 3), (["days"], "x")]


async def test_a_wrapped_output_tools_errors_are_at_its_response() -> None:
    # ToolOutput(int): pydantic-ai wraps it as {"response": int}, so its errors are at
    # ("response",), the input kept.
    model = ScriptedModel(
        [tool_call("final_result", response="many"), tool_call("final_result", response=3)]
    )
    result = await Agent("a", model, output_type=ToolOutput(int)).run("go")
    assert result.output == 3, result.error
    ((_, sent),) = tool_results(model.requests[1])
    errors = json.loads(sent.split("```json\n")[1].split("\n```")[0])
    assert [(e["type"], e["loc"], e["input"]) for e in errors] == [
        ("int_parsing", ["response"], "many")
    ]


async def test_an_output_calls_unreadable_arguments_are_sent_back() -> None:
    # arguments that are not JSON: what is wrong (the text quoted), then "Fix the errors and
    # try again.", as a retry of a message with a tool name ends.
    broken = ToolCall(id="c1", name="final_result", parse_error="arguments are not valid JSON")
    model = ScriptedModel(
        [ModelResponse(tool_calls=[broken]), tool_call("final_result", a=1, b="x")]
    )
    result = await Agent("a", model, output_type=ToolOutput(Foo)).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert sent == "arguments are not valid JSON\n\nFix the errors and try again."


async def test_many_errors_of_an_output_call_are_bounded() -> None:
    # 50 bad items of 5 000 characters are not echoed back whole on every retry (pydantic-ai
    # sends all, a model's context filled by one bad call): the count is said, the first ten
    # shown, each long input shortened.
    class Many(BaseModel):
        items: list[int]

    model = ScriptedModel(
        [
            tool_call("final_result", items=["x" * 5000] * 50),
            tool_call("final_result", items=[1]),
        ]
    )
    result = await Agent("a", model, output_type=ToolOutput(Many)).run("go")
    assert result.output == Many(items=[1]), result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert sent.startswith("50 validation errors:\n```json\n") and len(sent) < 25_000
    assert "(and 3002 more characters)" in sent and "\nand 40 more errors not shown\n" in sent
    assert sent.endswith("Fix the errors and try again.")


# --- a typing.TypedDict output type before Python 3.12 ---


class Plain(typing.TypedDict):  # typing's, not typing_extensions'
    a: int


def takes_plain(x: Plain) -> int:
    """Read a Plain."""
    return x["a"]


TYPED_DICT_FIX = "declare it with typing_extensions.TypedDict"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic reads typing's from 3.12")
@pytest.mark.parametrize(
    "output_type", [Plain, list[Plain], [Plain, str], ToolOutput(Plain), takes_plain]
)
def test_a_typing_typed_dict_output_type_names_the_fix(output_type: object) -> None:
    # pydantic-ai refuses it with pydantic's PydanticUserError (typed-dict-version), as
    # pydantic reads typing.TypedDict only from Python 3.12. Ours is a ConfigurationError
    # when the agent is made, naming the type and the fix, not pydantic's message quoted
    # inside "no type pydantic can read".
    with pytest.raises(ConfigurationError) as caught:
        Agent("a", ScriptedModel([]), output_type=output_type)
    message = str(caught.value)
    assert "typing.TypedDict" in message and TYPED_DICT_FIX in message, message
    assert "errors.pydantic.dev" not in message


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic reads typing's from 3.12")
def test_a_typing_typed_dict_tool_parameter_names_the_fix() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Agent("a", ScriptedModel([]), tools=[takes_plain])
    message = str(caught.value)
    assert "'takes_plain'" in message and TYPED_DICT_FIX in message, message


async def test_a_typing_extensions_typed_dict_is_read() -> None:
    # the fix works: typing_extensions' TypedDict is an output type on every Python
    class Fixed(typing_extensions.TypedDict):
        a: int

    model = ScriptedModel(['{"a": 1}'])
    assert (await Agent("a", model, output_type=Fixed).run("go")).output == {"a": 1}


# --- more of pydantic-ai's agent tests ---


async def test_result_tuple() -> None:
    # ports test_result_tuple: a tuple output type is wrapped as {"response": [...]}, read and
    # unwrapped to the tuple (ours through the response format, pydantic-ai's an output tool).
    model = ScriptedModel(['{"response": ["foo", "bar"]}'])
    result = await Agent("a", model, output_type=tuple[str, str]).run("Hello")
    assert result.output == ("foo", "bar"), result.error


async def test_empty_text_part() -> None:
    # ports test_empty_text_part: an empty text beside the output tool's call is no answer of
    # its own; the call is the output.
    response = ModelResponse(
        text="",
        tool_calls=[ToolCall(id="c1", name="final_result", args={"response": ["foo", "bar"]})],
    )
    model = ScriptedModel([response])
    result = await Agent("a", model, output_type=ToolOutput(tuple[str, str])).run("Hello")
    assert result.output == ("foo", "bar"), result.error


async def test_agent_allows_none_output_tool_mode_empty_response() -> None:
    # ports test_agent_allows_none_output_tool_mode_empty_response: ``int | None`` falls back
    # to None on an empty response, asking nothing.
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model, output_type=int | None).run("hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, None), result.error
    assert len(model.requests) == 1
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_run_stream_allows_none_output_empty_response() -> None:
    # ports tests/test_streaming.py::test_run_stream_allows_none_output_empty_response: a
    # streamed empty response to ``str | None`` is the output None.
    model = ScriptedModel([ModelResponse(text="")], stream=True)
    result = await Agent("a", model, output_type=str | None).run("hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, None), result.error
    # the empty response stays, as pydantic-ai's ModelResponse(parts=[]) does
    assert [m.role for m in result.messages] == ["user", "assistant"]


async def test_thinking_only_response_with_finish_reason_length() -> None:
    # ports test_thinking_only_response_with_finish_reason_length: an empty answer cut off by
    # the token limit is not asked for again (pydantic-ai: "Model token limit ... exceeded
    # before any response was generated. Increase the `max_tokens` model setting").
    model = FunctionModel(lambda request: ModelResponse(finish_reason="length"))
    result = await Agent("a", model).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert len(model.requests) == 1


async def test_retry_limit() -> None:
    # ports tests/test_usage_limits.py::test_retry_limit: a request limit of 1 stops the run
    # before the request its tool calls would need.
    model = ScriptedModel([tool_call("ping"), reply("never")])
    agent = Agent("a", model, tools=[ping], limits=RunLimits(max_model_calls=1))
    result = await agent.run("Hello")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert len(model.requests) == 1


async def test_request_token_limit() -> None:
    # ports tests/test_usage_limits.py::test_request_token_limit: a run past its input token
    # budget ends limit_exceeded.
    model = ScriptedModel([reply("hi")])
    limits = RunLimits(max_input_tokens=5)
    result = await Agent("a", model, limits=limits).run(
        "Hello, this prompt exceeds the request tokens limit."
    )
    assert result.status is RunStatus.LIMIT_EXCEEDED, result.error


async def test_response_token_limit() -> None:
    # ports tests/test_usage_limits.py::test_response_token_limit
    model = ScriptedModel([reply("Unfortunately, this response exceeds the response tokens limit")])
    result = await Agent("a", model, limits=RunLimits(max_output_tokens=5)).run("Hello")
    assert result.status is RunStatus.LIMIT_EXCEEDED, result.error


class Result(BaseModel):
    dice_roll: int


def roll_dice() -> int:
    """Roll a dice."""
    return 4


def dice_llm(request: ModelRequest) -> ModelResponse:
    last = request.messages[-1]
    if last.role == "tool" and last.name == "roll_dice":
        return ModelResponse(
            tool_calls=[
                ToolCall(
                    id="pyd_ai_tool_call_id__final_result",
                    name="final_result",
                    args={"dice_roll": 4},
                )
            ]
        )
    return ModelResponse(
        tool_calls=[ToolCall(id="pyd_ai_tool_call_id__roll_dice", name="roll_dice", args={})]
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_continue_conversation_that_ended_in_output_tool_call(stream: bool) -> None:
    # ports test_continue_conversation_that_ended_in_output_tool_call: a conversation that
    # ended on the output tool's call (answered "Final result processed.") goes on with a new
    # prompt, and the second run's output is read from its own call. The model reuses its
    # call ids; ours gives a reused id a new one (pydantic-ai keeps it), so the pairs are
    # checked by the ids the transcript holds.
    model = FunctionModel(dice_llm, stream=stream)
    agent = Agent("a", model, tools=[roll_dice], output_type=ToolOutput(Result))
    first = await agent.run("Roll me a dice.")
    assert first.output == Result(dice_roll=4), first.error
    assert first.messages[-1].content == "Final result processed."
    second = await agent.run("Roll me a dice again.", history=first.messages)
    assert second.output == Result(dice_roll=4), second.error
    new = second.messages[len(first.messages) :]
    assert [(m.role, m.content if m.role != "assistant" else None) for m in new] == [
        ("user", "Roll me a dice again."),
        ("assistant", None),
        ("tool", "4"),
        ("assistant", None),
        ("tool", "Final result processed."),
    ]
    calls = [c.id for m in second.messages for c in m.tool_calls]
    answered = [m.tool_call_id for m in second.messages if m.role == "tool"]
    assert answered == calls and len(set(calls)) == 4


async def test_invalid_output_tool_args_streamed() -> None:
    # ports tests/test_streaming.py::test_invalid_output_tool_args_get_output: pydantic-ai's
    # run_stream cannot retry ("retries are not supported in `run_stream`"); a streamed run of
    # ours can, and sends back the same validation errors as a run that is not streamed.
    model = ScriptedModel(
        [
            tool_call("final_result", response=["hello", "not_an_int"]),
            tool_call("final_result", response=["hello", 3]),
        ],
        stream=True,
    )
    result = await Agent("a", model, output_type=ToolOutput(tuple[str, int])).run("hello")
    assert result.output == ("hello", 3), result.error
    ((_, sent),) = tool_results(model.requests[1])
    errors = json.loads(sent.split("```json\n")[1].split("\n```")[0])
    assert [(e["type"], e["loc"], e["input"]) for e in errors] == [
        ("int_parsing", ["response", 1], "not_an_int")
    ]


class Apple(BaseModel):
    color: str


class Banana(BaseModel):
    length: float


async def test_output_type_union_text_fallback_invalid_kind_exhausts_retries() -> None:
    # ports test_output_type_union_text_fallback_invalid_kind_exhausts_retries: a union's
    # envelope naming no member ("Cherry") is invalid output, sent back with its errors; past
    # the output retries the run fails with a ModelResponseError, not a KeyError.
    text = '{"result": {"kind": "Cherry", "data": {"color": "red"}}}'
    model = FunctionModel(lambda request: text)
    result = await Agent("a", model, output_type=[Apple, Banana]).run("What fruit is it?")
    assert result.status is RunStatus.FAILED
    assert "ModelResponseError" in (result.error or "") and "KeyError" not in (result.error or "")
    assert len(model.requests) == 2
    ask = model.requests[1].messages[-1]
    assert ask.metadata.get("retry") == "invalid_output"
    assert ask.content.startswith("1 validation error:\n```json\n")


async def test_tool_timeout_message_format() -> None:
    # ports tests/test_tools.py::test_tool_timeout_message_format: a call past its tool's
    # timeout is an error result naming the timeout, and the model goes on.
    @tool(timeout_s=0.1)
    async def my_slow_tool() -> str:
        """Be slow."""
        await asyncio.sleep(30)
        return "done"

    model = ScriptedModel([tool_call("my_slow_tool"), reply("done")])
    result = await Agent("a", model, tools=[my_slow_tool]).run("call my_slow_tool")
    assert result.output == "done", result.error
    ((name, sent),) = tool_results(model.requests[1])
    assert name == "my_slow_tool" and "timed out" in sent and "0.1" in sent


async def test_tool_timeout_retry_counts_as_failed() -> None:
    # ports tests/test_tools.py::test_tool_timeout_retry_counts_as_failed: a timeout is a
    # failed call (ctx.retry counts it); with retries=2 the third call runs and succeeds.
    calls = 0

    @tool(timeout_s=0.05)
    async def flaky_tool(ctx: RunContext) -> str:
        """Be flaky."""
        nonlocal calls
        calls += 1
        if calls < 3:
            await asyncio.sleep(30)
        return f"finally done after {ctx.retry} failures"

    model = ScriptedModel([tool_call("flaky_tool")] * 3 + [reply("ok")])
    result = await Agent("a", model, tools=[flaky_tool], retries=2).run("call flaky_tool")
    assert result.output == "ok", result.error
    assert calls == 3
    assert tool_results(model.requests[3])[-1][1] == "finally done after 2 failures"


class Weather(BaseModel):
    temperature: float
    description: str

    def get_weather(self, city: str) -> Weather:
        return self

    def get_weather_in(self, ctx: RunContext, city: str) -> Weather:
        assert ctx is not None
        return self


@pytest.mark.parametrize("method", ["get_weather", "get_weather_in"])
async def test_output_type_bound_instance_method(method: str) -> None:
    # ports test_output_type_bound_instance_method (and _with_run_context): a bound method is
    # an output function; its self (and its ctx) are no arguments the model gives.
    weather = Weather(temperature=28.7, description="sunny")
    model = ScriptedModel([tool_call("final_result", city="Mexico City")])
    result = await Agent("a", model, output_type=getattr(weather, method)).run("Mexico City")
    assert result.output == weather, result.error
    (spec,) = model.requests[0].tools
    assert spec.name == "final_result"
    assert spec.description == "The final response which ends this conversation"
    assert spec.parameters == {
        "additionalProperties": False,
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "type": "object",
    }


async def test_output_type_with_two_descriptions() -> None:
    # ports test_output_type_with_two_descriptions: ToolOutput's description, then the
    # model's docstring; the schema keeps its title.
    class MyOutput(BaseModel):
        """Description from docstring"""

        valid: bool

    model = ScriptedModel([tool_call("final_result", valid=False)])
    marker = ToolOutput(MyOutput, description="Description from ToolOutput")
    result = await Agent("a", model, output_type=marker).run("Hello")
    assert result.output == MyOutput(valid=False), result.error
    (spec,) = model.requests[0].tools
    assert spec.description == "Description from ToolOutput. Description from docstring"
    assert spec.parameters == {
        "properties": {"valid": {"type": "boolean"}},
        "required": ["valid"],
        "title": "MyOutput",
        "type": "object",
    }
