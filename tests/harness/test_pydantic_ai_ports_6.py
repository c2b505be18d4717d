"""pydantic-ai's output tests, ported (a sixth batch; see test_pydantic_ai_ports.py to _5):
a union output type with text (``A | str``, answered in text or through an output tool
``final_result``), pydantic-style ``final_result`` calls to an agent that offers none, and
output validation and its retries, over the testkit's fakes and the OpenAI-compatible test
server.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/...``). Where we
behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

from typing import Any, Union

import pytest
from pydantic import BaseModel, field_validator

from tinyagents import Agent, ModelRetry, RunContext, RunLimits, RunStatus, SubAgent, tool
from tinyagents.errors import ConfigurationError
from tinyagents.harness import LiteLLMModel, ModelRequest, ModelResponse, ToolCall
from tinyagents.testkit import (
    FunctionModel,
    OpenAICompatServer,
    ScriptedModel,
    reply,
    tool_call,
    tool_calls,
)


class Foo(BaseModel):
    a: int
    b: str


class Apple(BaseModel):
    """An apple."""

    color: str


class Banana(BaseModel):
    length: float


def tool_results(request: ModelRequest) -> list[tuple[str | None, str]]:
    return [(m.name, m.content) for m in request.messages if m.role == "tool"]


# --- a union with text: output tools beside a text answer -----------------------------------


@pytest.mark.parametrize(
    "output_type",
    [[Foo, str], (str, Foo), Foo | str, Union[Foo, str]],  # noqa: UP007
    ids=["list", "tuple", "pipe", "Union"],
)
async def test_a_union_with_text_takes_a_text_answer(output_type: Any) -> None:
    # ports tests/test_agent.py::test_output_type_union_text_fallback (str in the union): the
    # model may answer in plain text, and the output is that text. No response_format is
    # sent (it would make every answer JSON); the model is offered the output tool instead.
    model = ScriptedModel(["just text"])
    agent = Agent("a", model, output_type=output_type)
    assert agent.output_type is None and list(agent.output_tools) == ["final_result"]
    result = await agent.run("go")
    assert result.status == RunStatus.COMPLETED and result.output == "just text"
    request = model.requests[0]
    assert request.response_format is None
    assert [t.name for t in request.tools] == ["final_result"]


async def test_a_union_with_text_takes_a_final_result_call_as_its_model() -> None:
    # ports tests/test_agent.py::test_response_tuple / test_output_type_union (ToolOutput):
    # one model beside str is offered as the tool final_result, its parameters the model's
    # schema and its description pydantic-ai's default; the call's arguments are the output,
    # and the call is answered "Final result processed." so the transcript pairs up.
    def answer(request: ModelRequest) -> ModelResponse:
        spec = request.tools[0]
        assert spec.name == "final_result"
        assert spec.description == "The final response which ends this conversation"
        assert spec.parameters == {  # pydantic-ai's GenerateToolJsonSchema: no property titles
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a", "b"],
            "title": "Foo",
            "type": "object",
        }
        return tool_call("final_result", {"a": 1, "b": "x"})

    result = await Agent("a", FunctionModel(answer), output_type=Foo | str).run("go")
    assert result.status == RunStatus.COMPLETED, result.error
    assert result.output == Foo(a=1, b="x")
    assert [(m.role, m.content) for m in result.messages[-2:]][1] == (
        "tool",
        "Final result processed.",
    )


async def test_several_models_with_text_are_one_output_tool_each() -> None:
    # ports tests/test_agent.py::test_union_output_with_str (output tools named
    # final_result_<Name>, described by the model's docstring, or "<Name>: The final
    # response ..." without one), as pydantic-ai's OutputToolset names them.
    model = ScriptedModel([tool_call("final_result_Banana", {"length": 2.5})])
    result = await Agent("a", model, output_type=[Apple, Banana, str]).run("go")
    assert result.output == Banana(length=2.5), result.error
    specs = {t.name: t.description for t in model.requests[0].tools}
    assert specs == {
        "final_result_Apple": "An apple.",
        "final_result_Banana": "Banana: The final response which ends this conversation",
    }


async def test_an_output_call_that_does_not_validate_is_sent_back_as_its_result() -> None:
    # ports tests/test_agent.py::test_result_validation (output tools): arguments that do not
    # validate are answered with what is wrong, and the model is asked again; they count
    # against output_retries, as an invalid final answer does.
    model = ScriptedModel(
        [
            tool_call("final_result", {"a": "wrong", "b": "x"}),
            tool_call("final_result", a=42, b="y"),
        ]
    )
    result = await Agent("a", model, output_type=[Foo, str]).run("go")
    assert result.output == Foo(a=42, b="y"), result.error
    ((name, sent),) = tool_results(model.requests[1])
    assert name == "final_result" and '"msg": "Input should be a valid integer' in sent
    assert "Fix the errors and try again." in sent


async def test_an_output_call_invalid_past_the_output_retries_fails_the_run() -> None:
    # ports tests/test_agent.py::test_result_validation (the retries running out): pydantic-ai
    # raises UnexpectedModelBehavior("Exceeded maximum retries (1) for output validation").
    bad = tool_call("final_result", {"a": "wrong", "b": "x"})
    result = await Agent("a", ScriptedModel([bad, bad, bad]), output_type=Foo | str).run("go")
    assert result.status == RunStatus.FAILED
    assert "final_result call is not valid Foo output, again" in (result.error or "")
    # output_retries=2 gives it one more go
    model = ScriptedModel([bad, bad, tool_call("final_result", a=1, b="z")])
    result = await Agent("a", model, output_type=Foo | str, output_retries=2).run("go")
    assert result.output == Foo(a=1, b="z"), result.error


async def test_the_first_valid_output_call_wins_and_the_tools_beside_it_run() -> None:
    # ports tests/test_agent.py::test_early_strategy... as pydantic-ai's default end strategy
    # ('graceful') now runs it: the calls run in order; the first valid output call is the
    # output; a later one is answered unused; the tool calls of the response still run.
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Note something."""
        ran.append(text)
        return "noted"

    model = ScriptedModel(
        [
            tool_calls(
                tool_call("final_result", {"a": "bad", "b": "x"}),
                tool_call("note", text="before"),
                tool_call("final_result", a=1, b="first"),
                tool_call("final_result", a=2, b="second"),
                tool_call("note", text="after"),
            )
        ]
    )
    result = await Agent("a", model, tools=[note], output_type=Foo | str).run("go")
    assert result.output == Foo(a=1, b="first"), result.error
    assert ran == ["before", "after"]
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert contents[1:] == [
        "noted",
        "Final result processed.",
        "Output tool not used - a final result was already processed.",
        "noted",
    ]
    assert contents[0].startswith("1 validation error:\n```json\n")


async def test_output_validators_see_an_output_tools_model_and_may_send_it_back() -> None:
    # ports tests/test_agent.py::test_output_validator (output tools): a validator gets the
    # model read from the call and its ModelRetry is the call's result, as pydantic-ai's
    # RetryPromptPart for the output tool.
    model = ScriptedModel(
        [tool_call("final_result", a=41, b="x"), tool_call("final_result", a=42, b="x")]
    )
    agent = Agent("a", model, output_type=Foo | str)
    seen: list[Any] = []

    @agent.output_validator
    def check(ctx: RunContext, output: Foo | str) -> Foo | str:
        seen.append((ctx.retry, output))
        if isinstance(output, Foo) and output.a != 42:
            raise ModelRetry("a must be 42")
        return output

    result = await agent.run("go")
    assert result.output == Foo(a=42, b="x"), result.error
    assert seen == [(0, Foo(a=41, b="x")), (1, Foo(a=42, b="x"))]
    ((_, sent),) = tool_results(model.requests[1])
    assert sent == "a must be 42\n\nFix the errors and try again."


async def test_a_text_answer_beside_output_tools_passes_the_validators_as_text() -> None:
    agent = Agent("a", ScriptedModel(["plain"]), output_type=Foo | str)
    agent.output_validator(lambda output: output.upper())
    assert (await agent.run("go")).output == "PLAIN"


async def test_output_tool_calls_spend_no_tool_budget() -> None:
    # the tool budget counts the agent's tool calls: a run with max_tool_calls=0 may still end
    # on its output tool (pydantic-ai's tool_calls_limit counts function tools only).
    model = ScriptedModel([tool_call("final_result", a=1, b="x")])
    limits = RunLimits(max_tool_calls=0)
    result = await Agent("a", model, output_type=Foo | str, limits=limits).run("go")
    assert result.status == RunStatus.COMPLETED and result.output == Foo(a=1, b="x")
    assert result.usage["tool_calls"] == 0


def test_a_tool_named_as_an_output_tool_is_refused() -> None:
    # pydantic-ai: "Tool name conflicts with output tool name"; a call of it would be read
    # as the output, and the tool never run.
    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    with pytest.raises(ConfigurationError, match="final_result"):
        Agent("a", ScriptedModel(["x"]), tools=[final_result], output_type=Foo | str)
    Agent("a", ScriptedModel(["x"]), tools=[final_result], output_type=Foo)  # no output tools


def test_a_union_with_text_of_other_types_is_read_as_pydantic_ai_reads_it() -> None:
    # a bare type (int) has a tool of its own (test_pydantic_ai_ports_8.py), and so has None
    # beside other outputs (final_result_NoneType; test_pydantic_ai_ports_9.py); None beside
    # text alone is text or nothing.
    assert list(Agent("a", ScriptedModel(["x"]), output_type=[Foo, int, str]).output_tools) == [
        "final_result_Foo",
        "final_result_int",
    ]
    agent = Agent("a", ScriptedModel(["x"]), output_type=[Foo, str, None])
    assert list(agent.output_tools) == ["final_result_Foo", "final_result_NoneType"]
    agent = Agent("a", ScriptedModel(["x"]), output_type=[str, None])
    assert agent.output_tools == {} and agent.allows_none
    assert Agent("a", ScriptedModel(["x"]), output_type=[str]).output_tools == {}


async def test_a_sub_agent_with_a_text_union_hands_back_text_or_its_model() -> None:
    child = Agent(
        "c", ScriptedModel([tool_call("final_result", a=1, b="x")]), output_type=Foo | str
    )
    assert await SubAgent(child).invoke("go") == Foo(a=1, b="x")
    child = Agent("c", ScriptedModel(["words"]), output_type=Foo | str)
    assert await SubAgent(child).invoke("go") == "words"


async def test_a_text_union_through_litellm_and_the_openai_compatible_server() -> None:
    # the output tool goes out as a function tool, no response_format; the call comes back
    # through litellm as any tool call does, and its arguments are the output.
    replies = [
        tool_call("final_result", {"a": "x", "b": "y"}),
        tool_call("final_result", a=3, b="y"),
        "plain",
    ]
    async with OpenAICompatServer(replies, mode="openai") as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        result = await Agent("a", model, output_type=[Foo, str]).run("go")
        text = await Agent("a", model, output_type=[Foo, str]).run("go")
    assert result.output == Foo(a=3, b="y"), result.error
    assert text.output == "plain", text.error
    first = server.requests[0]
    assert "response_format" not in first
    assert [t["function"]["name"] for t in first["tools"]] == ["final_result"]
    second = server.requests[1]["messages"]
    assert second[-1]["role"] == "tool" and "Fix the errors" in second[-1]["content"]
    assert server.refusals == []


# --- pydantic-ai's final_result called where no output tool is offered ------------------------


@pytest.mark.parametrize("name", ["final_result", "final_result_Foo"])
async def test_a_final_result_call_to_a_response_format_agent_is_told_to_answer_json(
    name: str,
) -> None:
    # A model used to pydantic-ai's ToolOutput (or a transcript of one) calls final_result
    # where our agent sends its output type as the response_format and offers no such tool.
    # It is not taken as the output (nothing offered it), and not left at a bare "unknown
    # tool": the result says the output is the answer's own JSON, and the model answers so.
    model = ScriptedModel([tool_call(name, a=1, b="x"), '{"a": 1, "b": "x"}'])
    result = await Agent("a", model, output_type=Foo).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert sent.startswith(f"{name!r} is no tool of this run")
    assert "answer with only the JSON of the response format (Foo)" in sent


async def test_a_final_result_call_to_a_text_agent_is_told_to_answer_in_text() -> None:
    model = ScriptedModel([tool_call("final_result", response="hi"), "hi"])
    result = await Agent("a", model).run("go")
    assert result.output == "hi", result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert "answer with text" in sent


async def test_a_final_result_call_is_still_unknown_to_an_agent_that_fails_on_those() -> None:
    model = ScriptedModel([tool_call("final_result", a=1, b="x")])
    result = await Agent("a", model, output_type=Foo, unknown_tools="fail").run("go")
    assert result.status == RunStatus.FAILED and "'final_result'" in (result.error or "")


async def test_a_final_result_call_among_a_union_with_texts_tools_by_another_name() -> None:
    # final_result_Foo where the one output tool is final_result (a union of one model and
    # str): told which output tool there is.
    model = ScriptedModel(
        [tool_call("final_result_Foo", a=1, b="x"), tool_call("final_result", a=1, b="x")]
    )
    result = await Agent("a", model, output_type=Foo | str).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    ((_, sent),) = tool_results(model.requests[1])
    assert "call final_result with it, or answer with text" in sent


# --- output validation and its retries (tests/test_agent.py) ---------------------------------


def call_json(name: str, args_json: str) -> ModelResponse:
    """A call whose arguments are the provider's JSON text, as pydantic-ai's ToolCallPart."""
    return ModelResponse(tool_calls=[ToolCall(id="", name=name, args=args_json)])  # type: ignore[arg-type]


async def test_result_pydantic_model_retry() -> None:
    # ports tests/test_agent.py::test_result_pydantic_model_retry: the first final_result's
    # arguments do not validate; the retry is its result (pydantic-ai's RetryPromptPart for
    # final_result), the second is the output, answered "Final result processed.".
    def answer(request: ModelRequest) -> ModelResponse:
        first = len(request.messages) == 1
        return call_json(
            "final_result", '{"a": "wrong", "b": "foo"}' if first else '{"a": 42, "b": "foo"}'
        )

    result = await Agent("a", FunctionModel(answer), output_type=Foo | str).run("Hello")
    assert result.output == Foo(a=42, b="foo"), result.error
    kinds = [(m.role, m.metadata.get("retry")) for m in result.messages]
    assert kinds == [
        ("user", None),
        ("assistant", None),
        ("tool", "invalid_output"),
        ("assistant", None),
        ("tool", None),
    ]
    assert '"loc": [\n      "a"\n    ]' in result.messages[2].content
    assert result.messages[4].content == "Final result processed."


async def test_result_pydantic_model_validation_error() -> None:
    # ports tests/test_agent.py::test_result_pydantic_model_validation_error: a field
    # validator's ValueError is a problem sent back at its field ("Value error, must not be
    # foo"), and "Fix the errors and try again." closes the retry, as pydantic-ai's does
    # (its whole text: test_pydantic_ai_ports_10.py).
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
        [call_json("final_result", '{"a": 1, "b": "foo"}'), tool_call("final_result", a=1, b="bar")]
    )
    result = await Agent("a", model, output_type=[Bar, str]).run("Hello")
    assert result.output == Bar(a=1, b="bar"), result.error
    retry = result.messages[2].content
    assert '"msg": "Value error, must not be foo"' in retry and retry.endswith(
        "Fix the errors and try again."
    )


async def test_output_validator_sees_the_output_tools_name() -> None:
    # ports tests/test_agent.py::test_output_validator: ctx.tool_name is 'final_result' for
    # an output read from that tool's call (None for a text answer), and a ModelRetry is the
    # call's retry, its message as the validator said it.
    model = ScriptedModel(
        [tool_call("final_result", a=41, b="foo"), tool_call("final_result", a=42, b="foo")]
    )
    agent = Agent("a", model, output_type=Foo | str)
    names: list[str | None] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo | str) -> Foo | str:
        names.append(ctx.tool_name)
        if isinstance(o, Foo) and o.a != 42:
            raise ModelRetry('"a" should be 42')
        return o

    result = await agent.run("Hello")
    assert result.output == Foo(a=42, b="foo"), result.error
    assert names == ["final_result", "final_result"]
    assert result.messages[2].content.startswith('"a" should be 42')
    text = Agent("a", ScriptedModel(["words"]), output_type=Foo | str)
    text.output_validator(validate_output)
    assert (await text.run("Hello")).output == "words" and names[-1] is None


@pytest.mark.parametrize("how", ["output tool", "response_format"])
async def test_output_validator_retries(how: str) -> None:
    # ports tests/test_agent.py::test_output_validator_retries: ctx.retry counts the answers
    # sent back (0, 1, 2, 3) and ctx.max_retries is output_retries, whichever way the output
    # is given: an output tool's call (A | str) or the response_format's JSON (A).
    target = 3
    if how == "output tool":
        answer, output_type = tool_call("final_result", a=1, b="foo"), Foo | str
    else:
        answer, output_type = reply('{"a": 1, "b": "foo"}'), Foo
    model = ScriptedModel([answer] * (target + 1))
    agent = Agent("a", model, output_type=output_type, output_retries=target)
    log: list[tuple[int, int | None]] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, o: Foo) -> Foo:
        log.append((ctx.retry, ctx.max_retries))
        if ctx.retry == target:
            return o
        raise ModelRetry(f"Retry {ctx.retry}")

    result = await agent.run("Hello")
    assert result.output == Foo(a=1, b="foo"), result.error
    assert log == [(0, 3), (1, 3), (2, 3), (3, 3)]


async def test_output_validator_retries_run_out() -> None:
    # the same past output_retries: pydantic-ai raises UnexpectedModelBehavior; ours ends the
    # run failed with a ModelResponseError quoting the validator's last message.
    model = ScriptedModel([tool_call("final_result", a=1, b="foo")] * 3)
    agent = Agent("a", model, output_type=Foo | str, output_retries=1)
    agent.output_validator(lambda ctx, o: (_ for _ in ()).throw(ModelRetry(f"Retry {ctx.retry}")))
    result = await agent.run("Hello")
    assert result.status == RunStatus.FAILED
    assert "sent back by an output validator, 1 time(s) before" in (result.error or "")
    assert "Retry 1" in (result.error or "")
    assert len(model.requests) == 2


async def test_output_validator_structured_partial_output_is_false() -> None:
    # ports tests/test_agent.py::TestPartialOutput::test_output_validator_structured: a
    # completed answer's output, read from the output tool, is no partial output.
    agent = Agent(
        "a", ScriptedModel([tool_call("final_result", a=42, b="foo")]), output_type=Foo | str
    )
    log: list[tuple[Any, bool]] = []

    @agent.output_validator
    def validate_output(ctx: RunContext, output: Foo) -> Foo:
        log.append((output, ctx.partial_output))
        return output

    assert (await agent.run("test")).output == Foo(a=42, b="foo")
    assert log == [(Foo(a=42, b="foo"), False)]


async def test_a_text_answer_then_an_output_call_are_both_final_answers() -> None:
    # ports tests/test_agent.py::test_output_type_text_output_function_with_retry's shape:
    # a validator refusing the text answer sends it back as a user message (no call to
    # answer), and the model may then give its output through the tool instead.
    model = ScriptedModel(["not yet", tool_call("final_result", a=1, b="x")])
    agent = Agent("a", model, output_type=Foo | str)

    @agent.output_validator
    def no_text(o: Foo | str) -> Foo | str:
        if isinstance(o, str):
            raise ModelRetry("give a Foo")
        return o

    result = await agent.run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    ask = model.requests[1].messages[-1]
    assert ask.role == "user" and ask.metadata.get("retry") == "invalid_output"


async def test_a_streamed_output_tool_call_is_the_output() -> None:
    # streamed, the call's arguments arrive in pieces; the assembled call is read as any is.
    model = ScriptedModel([tool_call("final_result", a=7, b="streamed")], stream=True)
    result = await Agent("a", model, output_type=Foo | str).run("go")
    assert result.output == Foo(a=7, b="streamed"), result.error


async def test_an_empty_answer_to_a_text_union_is_asked_for_text_or_a_call() -> None:
    # the output tools are tools the model may call: an empty answer is asked for text or a
    # tool call, not for text alone (which would steer it away from its structured output),
    # in pydantic-ai's words ("Please return text or include your response in a tool call.").
    model = ScriptedModel([reply(""), tool_call("final_result", a=1, b="x")])
    result = await Agent("a", model, output_type=Foo | str).run("go")
    assert result.output == Foo(a=1, b="x"), result.error
    ask = model.requests[1].messages[-1]
    assert ask.metadata.get("retry") == "empty_answer" and "in a tool call" in ask.content
