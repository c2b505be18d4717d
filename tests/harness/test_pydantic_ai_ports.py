"""pydantic-ai's own agent tests, ported: what a pydantic-ai user expects of an agent loop.

Each test names the pydantic-ai test it ports (pydantic/pydantic-ai, ``tests/...``). Where we
behave differently on purpose, the test asserts our documented behaviour and says why.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import gc
import json
import os
import threading

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch the cost map

from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, field_validator
from typing_extensions import TypedDict  # pydantic wants it on Python < 3.12

from tinyagents import (
    Agent,
    LiteLLMModel,
    Model,
    RunLimits,
    RunStatus,
    Runtime,
    SubAgent,
    SubAgentTool,
    tool,
)
from tinyagents.errors import ConfigurationError, ToolError
from tinyagents.harness import (
    Message,
    ModelRequest,
    ModelResponse,
    RunContext,
    StreamChunk,
    ToolCall,
    Usage,
)
from tinyagents.harness.model import CUT_OFF
from tinyagents.testkit import (
    EventRecorder,
    FunctionModel,
    OpenAICompatServer,
    RawStream,
    ScriptedModel,
    reply,
    tool_call,
    tool_calls,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


class Foo(BaseModel):
    bar: int

    @field_validator("bar")
    @classmethod
    def not_zero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("bar cannot be 0")
        return v


def tool_messages(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


# --- tool arguments ------------------------------------------------------------------------


async def test_invalid_arguments_are_fed_back_and_the_model_corrects_itself() -> None:
    # ports tests/test_agent.py::test_result_pydantic_model_retry (tool flavour) and
    # tests/test_tools.py::test_tool_retries: a validation error goes back to the model, which
    # calls again; the run completes with the corrected call's result.
    model = ScriptedModel(
        [tool_call("add", a="one", b=2), tool_call("add", a=1, b=2), reply("three")]
    )
    result = await Agent("a", model, tools=[add]).run("1 + 2")
    assert result.status is RunStatus.COMPLETED and result.output == "three"
    (error,) = tool_messages(model.requests[1])
    assert error.metadata == {"error": True}
    assert "invalid arguments for tool 'add'" in error.content and "a:" in error.content
    assert tool_messages(model.requests[2])[-1].content == "3"


async def test_arguments_the_model_should_not_send_are_refused() -> None:
    # ports tests/test_tools.py::test_tool_call_part_args_as_dict (extra keys). Kept on
    # purpose: pydantic-ai drops an unknown argument silently; we refuse it (tools.py,
    # ``_Arguments``) so a misspelled argument is heard about instead of ignored.
    model = ScriptedModel([tool_call("add", a=1, b=2, c=3), reply("done")])
    await Agent("a", model, tools=[add]).run("go")
    (error,) = tool_messages(model.requests[1])
    assert (
        error.metadata == {"error": True} and "c: Extra inputs are not permitted" in error.content
    )


async def test_retries_per_tool_have_no_cap() -> None:
    # ports tests/test_tools.py::test_tool_retries. Kept on purpose (a product decision): no
    # per-tool retry cap by default, so where pydantic-ai raises UnexpectedModelBehavior after
    # its default ``retries`` of 1, our model may keep correcting itself; RunLimits bound the
    # run instead. A cap is opt-in: Tool(retries=...) / Agent(retries=...)
    # (test_pydantic_ai_ports_4.py).
    script: list[Any] = [tool_call("add", a="x", b=1) for _ in range(4)]
    model = ScriptedModel([*script, tool_call("add", a=1, b=1), reply("two")])
    result = await Agent("a", model, tools=[add]).run("go")
    assert result.status is RunStatus.COMPLETED and result.output == "two"
    limited = ScriptedModel([*script, reply("never")])
    bounded = await Agent("a", limited, tools=[add], limits=RunLimits(max_model_calls=3)).run("go")
    assert bounded.status is RunStatus.LIMIT_EXCEEDED and "max_model_calls" in (bounded.error or "")


class Point(BaseModel):
    """A point on a labelled axis."""

    x: int
    y: str


@dataclasses.dataclass
class Box:
    width: int


class Span(TypedDict):
    start: int


async def test_a_tool_taking_just_a_model_is_offered_its_fields() -> None:
    # ports tests/test_tools.py::test_takes_just_model: a tool whose one argument is a model
    # is offered the model's fields (and, with no docstring of its own, the model's), not an
    # object wrapping them; what the model sends is validated as that model.
    @tool
    def takes_just_model(model: Point) -> str:
        return f"{model.x} {model.y}"

    assert takes_just_model.description == "A point on a labelled axis."
    assert takes_just_model.parameters == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "string"}},
        "required": ["x", "y"],
        # refused, as every tool's unknown arguments are (pydantic-ai leaves the model's
        # own config: extra keys ignored): a misspelled argument is heard of
        "additionalProperties": False,
    }
    script = [
        tool_call("takes_just_model", x=1, y="a"),
        tool_call("takes_just_model", x="one", y="a"),
        tool_call("takes_just_model", x=1, y="a", z=3),
        # the wrapped shape, as the tool was offered before (pydantic-ai takes it too)
        tool_call("takes_just_model", model={"x": 2, "y": "b"}),
        reply("done"),
    ]
    model = ScriptedModel(script)
    result = await Agent("a", model, tools=[takes_just_model]).run("go")
    assert result.status is RunStatus.COMPLETED
    first, invalid, extra, wrapped = tool_messages(model.requests[4])
    assert (first.content, wrapped.content) == ("1 a", "2 b")
    assert invalid.metadata == {"error": True} and "x: Input should be a valid integer" in (
        invalid.content
    )
    assert extra.metadata == {"error": True} and "takes no argument 'z'" in extra.content
    assert result.usage["tool_calls"] == 2  # the invalid calls were refused


async def test_a_tool_taking_just_a_model_is_told_every_problem_of_a_call_at_once() -> None:
    # pydantic-ai's retry prompt lists every validation error of a call (test_tools.py's
    # validation tests), as ours does for a tool of plain arguments ("c: Extra inputs are
    # not permitted" beside a wrong value). A tool taking just a model refused an unknown
    # argument before it looked at the others: the model fixed it, called again, and only
    # then heard that `x` was wrong too, a request spent on what one answer could say.
    @tool
    def takes_just_model(model: Point) -> str:
        return f"{model.x} {model.y}"

    script = [tool_call("takes_just_model", x="one", y="a", z=3), reply("done")]
    model = ScriptedModel(script)
    result = await Agent("a", model, tools=[takes_just_model]).run("go")
    (told,) = tool_messages(model.requests[1])
    assert told.metadata == {"error": True}
    assert told.content == (
        "invalid arguments for tool 'takes_just_model': x: Input should be a valid integer, "
        "unable to parse string as an integer (got 'one'); z: Extra inputs are not permitted. "
        "Call it again with arguments that match its schema."
    )
    assert result.usage["tool_calls"] == 0


async def test_a_tool_taking_a_model_and_the_context_is_offered_the_models_fields() -> None:
    # the run's context is no argument for the model: the model is still the only one, and a
    # dataclass or a TypedDict is a model as well (pydantic-ai's is_model_like)
    @tool
    def measure(ctx: RunContext, box: Box) -> str:
        """Measure a box."""
        return f"{box.width} in run {ctx.run_id}"

    @tool
    def spans(span: Span) -> int:
        """Read a span."""
        return span["start"]

    assert measure.parameters["properties"] == {"width": {"type": "integer"}}
    assert measure.description == "Measure a box."
    assert spans.parameters["properties"] == {"start": {"type": "integer"}}
    model = ScriptedModel(
        [tool_calls(tool_call("measure", width=3), tool_call("spans", start=4)), "ok"]
    )
    result = await Agent("a", model, tools=[measure, spans]).run("go")
    assert [m.content for m in tool_messages(model.requests[1])] == [
        f"3 in run {result.run_id}",
        "4",
    ]


def test_a_model_beside_another_argument_stays_an_argument() -> None:
    # ports tests/test_tools.py::test_takes_model_and_int: with a second argument the model
    # is one of the tool's arguments, its schema under $defs
    @tool
    def takes_model_and_int(model: Point, z: int) -> str:
        return f"{model.x} {model.y} {z}"

    parameters = takes_model_and_int.parameters
    assert parameters["properties"] == {
        "model": {"$ref": "#/$defs/Point"},
        "z": {"type": "integer"},
    }
    assert parameters["required"] == ["model", "z"] and "Point" in parameters["$defs"]


async def test_optional_arguments_the_model_leaves_out_take_their_defaults() -> None:
    # ports tests/test_tools.py::test_json_schema_required_parameters and
    # ::test_call_tool_without_unrequired_parameters: only arguments without a default are
    # required, and a call that leaves the others out runs with their defaults.
    @tool
    def greet(name: str, greeting: str = "Hello", times: int | None = None) -> str:
        """Greet someone."""
        return f"{greeting} {name} x{times}"

    assert greet.parameters["required"] == ["name"]
    model = ScriptedModel([tool_call("greet", name="Ada"), reply("done")])
    await Agent("a", model, tools=[greet]).run("go")
    assert tool_messages(model.requests[1])[0].content == "Hello Ada xNone"


# --- unknown tools -------------------------------------------------------------------------


async def test_an_unknown_tool_is_an_error_result_naming_the_tools_there_are() -> None:
    # ports tests/test_agent.py::test_unknown_tool_fix: the model hears the name is unknown,
    # which tools exist, and can call one of those.
    model = ScriptedModel([tool_call("foobar"), tool_call("ping"), reply("done")])
    result = await Agent("a", model, tools=[ping]).run("go")
    assert result.status is RunStatus.COMPLETED
    (unknown,) = tool_messages(model.requests[1])
    assert "unknown tool 'foobar'" in unknown.content and "ping" in unknown.content


async def test_an_unknown_tool_called_again_and_again_is_not_capped() -> None:
    # ports tests/test_agent.py::test_unknown_tool and ::test_unknown_tool_multiple_retries.
    # Kept on purpose: pydantic-ai raises "Tool 'foobar' exceeded max retries count of 1";
    # we have no per-tool retry cap (RunLimits bound the run) and
    # Agent(unknown_tools="fail") ends the run at the first unknown call instead.
    model = ScriptedModel([tool_call("foobar") for _ in range(3)] + [reply("done")])
    assert (await Agent("a", model, tools=[ping]).run("go")).status is RunStatus.COMPLETED
    strict = Agent("a", ScriptedModel([tool_call("foobar")]), tools=[ping], unknown_tools="fail")
    assert (await strict.run("go")).status is RunStatus.FAILED


# --- exceptions from tools ----------------------------------------------------------------


async def test_an_exception_raised_by_a_tool_is_reported_to_the_model() -> None:
    # ports tests/test_agent.py::test_tool_exception_captures_partial_request. Kept on purpose
    # (docs/harness.md "Starting runs"): pydantic-ai lets a tool's exception end the run; ours
    # comes back as an error result with its type, and the model goes on.
    @tool
    def explode() -> str:
        """Fail."""
        raise ValueError("the ledger is locked")

    model = ScriptedModel([tool_call("explode"), reply("could not read the ledger")])
    result = await Agent("a", model, tools=[explode]).run("go")
    assert result.status is RunStatus.COMPLETED
    (error,) = tool_messages(model.requests[1])
    assert error.content == "tool 'explode' raised ValueError: the ledger is locked"


async def test_a_validator_error_in_an_argument_is_fed_back() -> None:
    # ports tests/test_agent.py::test_tool_call_with_validation_value_error_serializable: a
    # ValueError raised by an argument's validator reaches the model as a validation error,
    # and the model's corrected call runs. The tool's one argument is a model, so its fields
    # are the tool's arguments (pydantic-ai's loc is ['bar']).
    @tool
    def foo_tool(foo: Foo) -> int:
        """Read a foo."""
        return foo.bar

    model = ScriptedModel([tool_call("foo_tool", bar=0), tool_call("foo_tool", bar=1), "done"])
    await Agent("a", model, tools=[foo_tool]).run("Hello")
    (error,) = tool_messages(model.requests[1])
    assert "foo_tool': bar: Value error, bar cannot be 0" in error.content
    assert tool_messages(model.requests[2])[-1].content == "1"


class Unprintable(Exception):
    """An exception whose message cannot be made text (its ``__str__`` raises)."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


async def test_an_exception_whose_message_cannot_be_made_text_is_still_reported() -> None:
    # same port, the other way round: whatever a tool raises reaches the model as an error
    # result (docs/harness.md). One whose __str__ raised ended the run failed instead.
    @tool
    def explode() -> str:
        """Fail."""
        raise Unprintable()

    model = ScriptedModel([tool_call("explode"), reply("noted")])
    result = await Agent("a", model, tools=[explode]).run("go")
    assert result.status is RunStatus.COMPLETED
    (error,) = tool_messages(model.requests[1])
    assert error.metadata == {"error": True} and "Unprintable" in error.content


async def test_a_model_error_whose_message_cannot_be_made_text_still_ends_the_run() -> None:
    # same port, for the model: an exception a FunctionModel raises ends the run (pydantic-ai
    # raises it from agent.run; ours ends the run failed with its type and message). One whose
    # __str__ raised left the run running forever: the loop raised again while writing its
    # error, and never ended.
    def broken(request: ModelRequest) -> ModelResponse:
        raise Unprintable()

    result = await Agent("a", FunctionModel(broken)).run("go")
    assert result.status is RunStatus.FAILED and "Unprintable" in (result.error or "")


async def test_one_failing_call_of_a_batch_does_not_keep_the_others_from_the_model() -> None:
    # ports tests/test_tools.py::test_tool_failed_parallel: a ToolError (pydantic-ai's
    # ToolFailed) from one call of a response is that call's error result, verbatim; the
    # other call's result reaches the model too, and the run goes on.
    @tool
    def failing() -> str:
        """Always fails."""
        raise ToolError("Disk full")

    model = ScriptedModel(
        [tool_calls(tool_call("ping", id="ok"), tool_call("failing", id="bad")), reply("Done.")]
    )
    result = await Agent("a", model, tools=[ping, failing]).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "Done.")
    answers = {m.tool_call_id: m for m in tool_messages(model.requests[1])}
    assert (answers["ok"].content, answers["ok"].metadata) == ("pong", {})
    assert (answers["bad"].content, answers["bad"].metadata) == ("Disk full", {"error": True})


# --- parallel tool calls and their ids ----------------------------------------------------


async def test_parallel_tool_calls_are_answered_in_the_order_they_were_made() -> None:
    # ports tests/test_tools.py::test_tool_failed_parallel: every call of a response gets its
    # result, matched by id, in the order of the calls (a failing one included). Ours run one
    # after another (each has its own safe boundaries); pydantic-ai's run concurrently.
    model = ScriptedModel(
        [
            tool_calls(
                tool_call("add", a=1, b=1, id="c1"),
                tool_call("add", a="x", b=1, id="c2"),
                tool_call("ping", id="c3"),
            ),
            reply("done"),
        ]
    )
    await Agent("a", model, tools=[add, ping]).run("go")
    results = tool_messages(model.requests[1])
    assert [(m.tool_call_id, m.name) for m in results] == [
        ("c1", "add"),
        ("c2", "add"),
        ("c3", "ping"),
    ]
    assert [m.metadata.get("error", False) for m in results] == [False, True, False]


async def test_a_tool_call_without_an_id_gets_one() -> None:
    # ports the default of pydantic-ai's ToolCallPart.tool_call_id (messages.py,
    # ``_generate_tool_call_id``), which its FunctionModel tests rely on (tests/test_agent.py
    # builds ToolCallPart('foobar', '{}') without one): a model that sends a call without an
    # id still gets a transcript whose call and result are matched by one, as providers need.
    model = ScriptedModel([ModelResponse(tool_calls=[ToolCall(id="", name="ping")]), reply("done")])
    await Agent("a", model, tools=[ping]).run("go")
    (call,) = model.requests[1].messages[-2].tool_calls
    (result,) = tool_messages(model.requests[1])
    assert call.id and result.tool_call_id == call.id


async def test_tool_calls_with_the_same_id_get_ids_of_their_own() -> None:
    # ports tests/test_agent.py::test_deferred_tool_results_reject_duplicate_tool_call_ids_in_history
    # (pydantic-ai refuses to match results to calls that share an id). A model that gives
    # two calls one id (or reuses an earlier call's) left results no provider could match,
    # and a run that ended part-way left the second call without an answer.
    model = ScriptedModel(
        [
            tool_calls(tool_call("add", a=1, b=1, id="x"), tool_call("add", a=2, b=2, id="x")),
            tool_call("ping", id="x"),
            reply("done"),
        ]
    )
    await Agent("a", model, tools=[add, ping]).run("go")
    messages = model.requests[2].messages
    call_ids = [c.id for m in messages for c in m.tool_calls]
    assert len(set(call_ids)) == 3 and call_ids[0] == "x"  # the first keeps its id
    assert [m.tool_call_id for m in messages if m.role == "tool"] == call_ids
    assert [m.content for m in messages if m.role == "tool"] == ["2", "4", "pong"]


async def test_a_run_stopped_part_way_answers_every_call_even_with_shared_ids() -> None:
    # ports tests/test_usage_limits.py::test_parallel_tool_calls_limit_enforced: a batch past
    # max_tool_calls runs none of its calls, and each is answered "not run", by its own id.
    model = ScriptedModel(
        [tool_calls(*(tool_call("ping", id="same") for _ in range(3))), reply("never")]
    )
    agent = Agent("a", model, tools=[ping], limits=RunLimits(max_tool_calls=1))
    async with Runtime() as rt:
        handle = await rt.start(agent, "go")
        result = await handle.result()
        messages = handle.driver.messages  # type: ignore[attr-defined]
    assert result.status is RunStatus.LIMIT_EXCEEDED
    calls = [c.id for m in messages for c in m.tool_calls]
    answers = [
        (m.tool_call_id, m.content.startswith("not run")) for m in messages if m.role == "tool"
    ]
    assert [cid for cid, _ in answers] == calls and len(set(calls)) == 3
    assert [stood_in for _, stood_in in answers] == [True, True, True]


# --- the final answer ---------------------------------------------------------------------


async def test_an_empty_answer_is_asked_for_again() -> None:
    # ports tests/test_agent.py::test_empty_response: a response with neither text nor a tool
    # call is not an answer; the model is asked again and its next answer is the output
    # (it ended the run ``completed`` with output "").
    model = ScriptedModel([ModelResponse(text=""), reply("ok here is text")])
    result = await Agent("a", model).run("Hello")
    assert result.status is RunStatus.COMPLETED and result.output == "ok here is text"
    asked = model.requests[1].messages
    # the empty answer stays, as pydantic-ai's ModelResponse(parts=[]) does (not sent over HTTP)
    assert [m.role for m in asked] == ["user", "assistant", "user"]
    assert asked[-1].content == (  # pydantic-ai's words: test_pydantic_ai_ports_10.py
        "Validation feedback:\nPlease return text.\n\nFix the errors and try again."
    )


async def test_the_ask_for_an_answer_suggests_a_tool_only_when_the_run_has_one() -> None:
    # ports tests/test_agent.py::test_retry_message_no_tools: a model asked again for an
    # answer is told it may call a tool only if it has one to call. It was told "or call a
    # tool" with none offered, an invitation to invent one.
    model = ScriptedModel([ModelResponse(text=""), reply("ok")])
    await Agent("a", model, tools=[ping]).run("Hello")
    assert model.requests[1].messages[-1].content == (
        "Validation feedback:\nPlease return text or call a tool.\n\nFix the errors and try again."
    )
    narrowed = ScriptedModel([ModelResponse(text=""), reply("ok")])
    await Agent("a", narrowed, tools=[ping]).run("Hello", tools=[])  # granted none of them
    assert not narrowed.requests[0].tools
    assert narrowed.requests[1].messages[-1].content == (
        "Validation feedback:\nPlease return text.\n\nFix the errors and try again."
    )


async def test_an_empty_answer_after_a_tool_call_with_text_is_asked_for_again() -> None:
    # ports tests/test_agent.py::test_empty_final_response: text sent alongside a tool call is
    # not reused as the answer; the model is asked for one.
    model = ScriptedModel(
        [
            ModelResponse(
                text="foo", tool_calls=[ToolCall(id="c1", name="add", args={"a": 1, "b": 1})]
            ),
            ModelResponse(text=""),
            reply("baz"),
        ]
    )
    result = await Agent("a", model, tools=[add]).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "baz")


async def test_a_model_that_keeps_answering_nothing_fails_the_run() -> None:
    # ports tests/test_agent.py::test_empty_response_exceeds_max_retries: asked again once
    # (pydantic-ai's default output retries), a second empty answer ends the run ``failed``,
    # saying so, rather than spending model calls without end.
    model = FunctionModel(lambda request: ModelResponse(text=""))
    result = await Agent("a", model).run("Hello")
    assert result.status is RunStatus.FAILED
    assert "ModelResponseError" in (result.error or "") and "no text and no tool call" in (
        result.error or ""
    )
    assert len(model.requests) == 2


@pytest.mark.parametrize("finish_reason", ["length", "content_filter"])
async def test_an_empty_answer_cut_off_is_not_asked_for_again(finish_reason: str) -> None:
    # ports tests/test_agent.py::test_empty_response_with_finish_reason_length: an empty
    # answer the model stopped on for want of output tokens (or blocked by a content filter)
    # would stop the same way if asked again; the run fails at once, saying why (as
    # LiteLLMModel's responses already did).
    model = FunctionModel(lambda request: ModelResponse(finish_reason=finish_reason))
    result = await Agent("a", model).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert CUT_OFF[finish_reason] in (result.error or "")
    assert len(model.requests) == 1


@pytest.mark.parametrize("finish_reason", [None, "length", "content_filter"])
async def test_an_ask_for_an_answer_answered_with_nothing_leaves_the_transcript(
    finish_reason: str | None,
) -> None:
    # The ask after an empty answer leaves the transcript with the second empty answer, so a
    # session's next turn does not send a question nobody answered. It stayed when that
    # answer was cut off (out of output tokens, or blocked), though the run failed the same
    # way. The first empty answer stays (test_pydantic_ai_ports_11.py).
    model = ScriptedModel([ModelResponse(text=""), ModelResponse(finish_reason=finish_reason)])
    result = await Agent("a", model).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert [(m.role, m.content) for m in result.messages] == [("user", "Hello"), ("assistant", "")]
    assert len(model.requests) == 2


async def test_a_tool_call_cut_off_by_the_token_limit_ends_the_run() -> None:
    # ports tests/test_agent.py::test_tool_exceeds_token_limit_error: a response that ran out
    # of output tokens while writing a call's arguments (pydantic-ai: IncompleteToolCall).
    # The unreadable arguments went back as an error result, the model wrote the same call,
    # ran out again, and so on: with no default request limit, without end.
    cut = ToolCall(id="c1", name="add", parse_error="arguments are not valid JSON: '{\"a\": 1,'")
    model = FunctionModel(lambda request: ModelResponse(tool_calls=[cut], finish_reason="length"))
    bounded = RunLimits(max_model_calls=3)  # so that the endless version of this test ends
    result = await Agent("a", model, tools=[add], limits=bounded).run("Hello")
    assert result.status is RunStatus.FAILED and "ModelResponseError" in (result.error or "")
    assert "'add'" in (result.error or "") and "max_tokens" in (result.error or "")
    assert len(model.requests) == 1


async def test_a_streamed_tool_call_cut_off_by_the_token_limit_ends_the_run() -> None:
    # the same over litellm's real streaming path: the server stops mid-arguments.
    cut = RawStream(
        deltas=[
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1, "b"'},
                    }
                ]
            }
        ],
        finish_reason="length",
    )
    async with OpenAICompatServer([cut, cut, cut]) as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        agent = Agent("a", model, tools=[add], limits=RunLimits(max_model_calls=3))
        result = await agent.run("Hello")
    assert result.status is RunStatus.FAILED and "cut off" in (result.error or "")
    assert len(server.requests) == 1


async def test_a_tool_call_complete_at_the_token_limit_runs() -> None:
    # ports tests/test_agent.py::test_tool_exceeds_token_limit_but_complete_args: arguments
    # that are whole are run, whatever the finish_reason.
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall(id="c1", name="add", args={"a": 1, "b": 2})],
                finish_reason="length",
            ),
            reply("done"),
        ]
    )
    result = await Agent("a", model, tools=[add]).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    assert tool_messages(model.requests[1])[0].content == "3"


async def test_text_next_to_a_tool_call_is_not_the_answer() -> None:
    # ports tests/test_agent.py::test_heterogeneous_responses_non_streaming: tool calls win
    # over text in the same response; the run goes on to the model's final response.
    model = ScriptedModel(
        [
            ModelResponse(text="foo", tool_calls=[ToolCall(id="c1", name="ping")]),
            reply("final response"),
        ]
    )
    result = await Agent("a", model, tools=[ping]).run("Hello")
    assert result.output == "final response"
    assert tool_messages(model.requests[1])[0].content == "pong"


# --- structured output --------------------------------------------------------------------


async def test_structured_output_is_asked_for_and_validated() -> None:
    # ports tests/test_agent.py::test_result_pydantic_model and ::test_native_output:
    # Agent(output_type=Foo) asks the model for Foo's JSON (response_format, which
    # LiteLLMModel sends on) and the run's output is a Foo. There was no way to ask: every
    # request's response_format was None, and the output was the text to parse by hand.
    model = ScriptedModel(['{"bar": 1}'])
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.COMPLETED
    assert isinstance(result.output, Foo) and result.output.bar == 1
    assert model.requests[0].response_format is Foo
    assert Agent("b", model).output_type is None  # text, as ever
    assert Agent("c", model, output_type=str).output_type is None  # pydantic-ai's default
    # its run.completed event shows the answer, as for text (the console showed nothing)
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        agent = Agent("a", ScriptedModel(['{"bar": 1}']), output_type=Foo)
        await (await rt.start(agent, "Hello")).result()
    (completed,) = [e for e in recorder.events if e.type == "run.completed"]
    assert completed.output_summary == '{"bar": 1}'


async def test_structured_output_that_does_not_validate_is_fed_back() -> None:
    # ports tests/test_agent.py::test_result_pydantic_model_retry: an answer that is not
    # valid output is answered with what is wrong (pydantic-ai's RetryPromptPart), and the
    # model's next answer is the output.
    model = ScriptedModel(['{"bar": 0}', '{"bar": 2}'])
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(bar=2))
    asked = model.requests[1].messages
    assert [(m.role, m.content) for m in asked[:2]] == [
        ("user", "Hello"),
        ("assistant", '{"bar": 0}'),
    ]
    assert asked[2].role == "user" and asked[2].metadata == {"retry": "invalid_output"}
    # pydantic-ai's RetryPromptPart(content=<errors>).model_response(), no tool name
    assert '"msg": "Value error, bar cannot be 0"' in asked[2].content
    assert asked[2].content.startswith("1 validation error:\n```json\n")
    assert model.requests[1].response_format is Foo


async def test_structured_output_cut_at_the_token_limit_says_so() -> None:
    # an answer cut off by the output token limit (finish_reason "length") was fed back as
    # "Invalid JSON: EOF while parsing", and the run's error said only that: neither the
    # model nor the reader was told the answer had been cut, nor that max_tokens was why
    cut = ModelResponse(text='{"bar": 1, "note": "a long no', finish_reason="length")
    model = FunctionModel(lambda request: cut)
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED
    ask = model.requests[1].messages[-1]
    assert ask.metadata == {"retry": "invalid_output"}
    assert "cut off at the output token limit" in ask.content and "shorter" in ask.content
    assert "is not valid Foo output, again" in (result.error or "")
    assert "ran out of output tokens (finish_reason 'length')" in (result.error or "")
    assert "max_tokens" in (result.error or "")


@pytest.mark.parametrize("answer", ['{"bar": 0}', "not json", '{"bar": "x"}'])
async def test_structured_output_invalid_again_fails_the_run(answer: str) -> None:
    # ports tests/test_agent.py::test_result_pydantic_model_validation_error: asked again once
    # (pydantic-ai's default output retries), a second invalid answer in a row ends the run
    # ``failed`` with a ModelResponseError saying why, its text kept as the partial output.
    model = FunctionModel(lambda request: answer)
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED and result.output == answer
    assert "ModelResponseError" in (result.error or "")
    assert "is not valid Foo output, again" in (result.error or "")
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("answer", "problem"),
    [("not json", "Invalid JSON"), ("[1]", "Input should be an object")],
)
async def test_structured_output_wrong_as_a_whole_is_said_of_the_answer(
    answer: str, problem: str
) -> None:
    # a problem with the whole answer (not one of its fields) was placed at "arguments" (the
    # name tool calls use): the model, and the run's error, read "arguments: Invalid JSON"
    # about an answer that has no arguments
    model = FunctionModel(lambda request: answer)
    result = await Agent("a", model, output_type=Foo).run("Hello")
    ask = model.requests[1].messages[-1]
    assert ask.metadata == {"retry": "invalid_output"}
    # the model reads pydantic-ai's errors, its loc empty (the answer as a whole)
    assert f'"loc": [],\n    "msg": "{problem}' in ask.content
    error = result.error or ""
    assert f"told what was wrong: answer: {problem}" in error
    assert "arguments" not in ask.content and "arguments" not in error


async def test_structured_output_is_asked_for_again_once_per_prompt() -> None:
    # pydantic-ai's output retries count over the run, not in a row: a model that answered
    # invalid output, then a tool call, then invalid output again, was asked again and again
    # without end. (An empty answer between them spends the retries too:
    # test_pydantic_ai_ports_11.py.)
    script = ['{"bar": 0}', tool_call("ping"), '{"bar": 0}', "{}"]
    model = ScriptedModel(script)
    result = await Agent("a", model, tools=[ping], output_type=Foo).run("Hello")
    assert result.status is RunStatus.FAILED and "again after it was told" in (result.error or "")
    assert len(model.requests) == 3


async def test_structured_output_of_a_sub_agent_reaches_its_parent_as_json() -> None:
    child = Agent("child", ScriptedModel(['{"bar": 3}']), output_type=Foo)
    assert await SubAgent(child).invoke("go") == Foo(bar=3)
    parent_model = ScriptedModel([tool_call("child", input="go"), "done"])
    child = Agent("child", ScriptedModel(['{"bar": 3}']), output_type=Foo)
    await Agent("p", parent_model, tools=[SubAgentTool(child)]).run("go")
    assert tool_messages(parent_model.requests[1])[0].content == '{"bar": 3}'


async def test_structured_output_over_http_sends_the_schema() -> None:
    async with OpenAICompatServer(['{"bar": 5}']) as server:
        model = LiteLLMModel("openai/test-model", api_base=server.base_url, api_key="sk-test")
        result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.output == Foo(bar=5)
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Foo"


@pytest.mark.parametrize("output_type", ["Foo", Foo(bar=1)])
def test_an_output_type_that_is_no_type_is_refused(output_type: Any) -> None:
    with pytest.raises(ConfigurationError, match="output_type"):
        Agent("a", ScriptedModel(["x"]), output_type=output_type)


@pytest.mark.parametrize("output_type", [int, dict])
def test_an_output_type_that_is_no_model_is_wrapped(output_type: Any) -> None:
    # as pydantic-ai wraps it: the response of an object (test_pydantic_ai_ports_8.py)
    agent = Agent("a", ScriptedModel(["x"]), output_type=output_type)
    assert agent.output_type is not None
    assert agent.output_type.model_json_schema()["required"] == ["response"]


# --- usage limits -------------------------------------------------------------------------


async def test_a_request_limit_refuses_the_next_request() -> None:
    # ports tests/test_usage_limits.py::test_retry_limit / request_limit: the limit is on
    # requests sent; the one past it is refused before it is sent.
    model = ScriptedModel([tool_call("ping"), reply("never sent")])
    result = await Agent("a", model, tools=[ping], limits=RunLimits(max_model_calls=1)).run("go")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "max_model_calls" in (result.error or "") and len(model.requests) == 1


async def test_tool_call_limit_zero_and_one() -> None:
    # ports tests/test_usage_limits.py::test_tool_call_limit: a limit of 0 refuses the first
    # call; a limit of 1 lets one call run, and usage counts it.
    zero = Agent(
        "a", ScriptedModel([tool_call("ping")]), tools=[ping], limits=RunLimits(max_tool_calls=0)
    )
    refused = await zero.run("go")
    assert refused.status is RunStatus.LIMIT_EXCEEDED and "max_tool_calls" in (refused.error or "")
    one = Agent(
        "a",
        ScriptedModel([tool_call("ping"), reply("done")]),
        tools=[ping],
        limits=RunLimits(max_tool_calls=1),
    )
    result = await one.run("go")
    assert result.status is RunStatus.COMPLETED
    assert (result.usage["model_calls"], result.usage["tool_calls"]) == (2, 1)


class Outbox:
    """A side-effecting tool that records each message it sends."""

    def __init__(self) -> None:
        self.sent: list[int] = []

        @tool
        def send(n: int) -> str:
            """Send message n."""
            self.sent.append(n)
            return f"sent {n}"

        self.tool = send


def sends(*numbers: int) -> ModelResponse:
    return tool_calls(*(tool_call("send", n=n, id=f"c{n}") for n in numbers))


async def test_a_batch_of_tool_calls_past_the_limit_runs_none_of_them() -> None:
    # ports tests/test_usage_limits.py::test_parallel_tool_calls_limit_enforced: the calls of
    # one response are checked against max_tool_calls together, before any of them runs. A
    # batch of three with two calls left ran two, then stopped on the third: a side-effecting
    # tool did half its work on a limit known before the first call.
    outbox = Outbox()
    model = ScriptedModel([sends(1, 2), sends(3, 4, 5), reply("never sent")])
    recorder = EventRecorder()
    agent = Agent("a", model, tools=[outbox.tool], limits=RunLimits(max_tool_calls=3))
    async with Runtime(sinks=[recorder]) as rt:
        handle = await rt.start(agent, "go")
        result = await handle.result()
    assert outbox.sent == [1, 2] and len(model.requests) == 2
    assert result.status is RunStatus.LIMIT_EXCEEDED and result.usage["tool_calls"] == 2
    assert result.error is not None and "'max_tool_calls'" in result.error
    assert "used 5, allowed 3" in result.error and "none of them was run" in result.error
    (event,) = recorder.of_type("limit.exceeded")
    assert (event.used, event.allowed) == (5, 3)  # type: ignore[attr-defined]
    assert [e.tool_call_id for e in recorder.of_type("tool.call")] == ["c1", "c2"]  # type: ignore[attr-defined]
    # each call of the refused batch is answered in the transcript, none with a tool's result
    results = [m for m in handle.driver.messages if m.role == "tool"][2:]  # type: ignore[union-attr]
    assert [m.tool_call_id for m in results] == ["c3", "c4", "c5"]
    assert all(m.content.startswith("not run: the run ended (limit_exceeded") for m in results)


async def test_a_batch_that_fits_the_tool_call_limit_exactly_runs() -> None:
    outbox = Outbox()
    model = ScriptedModel([sends(1, 2, 3), reply("done")])
    agent = Agent("a", model, tools=[outbox.tool], limits=RunLimits(max_tool_calls=3))
    result = await agent.run("go")
    assert (result.status, outbox.sent, result.usage["tool_calls"]) == (
        RunStatus.COMPLETED,
        [1, 2, 3],
        3,
    )


async def test_a_childs_batch_is_checked_against_its_parents_tool_calls_left() -> None:
    # the child's limits are bounded by what its parent has left, so its batch of two (the
    # parent has one call left after the one that started the child) runs none of it
    outbox = Outbox()
    child = SubAgent(Agent("child", ScriptedModel([sends(1, 2), "never"]), tools=[outbox.tool]))
    parent_model = ScriptedModel([tool_call("child", input="go"), reply("done")])
    parent = Agent(
        "p", parent_model, tools=[SubAgentTool(child)], limits=RunLimits(max_tool_calls=2)
    )
    result = await parent.run("go")
    assert outbox.sent == []
    # the parent's model reads what stopped the child, the calls it asked for included
    told = tool_messages(parent_model.requests[1])[0].content
    assert (
        "above it ran out of its budget: max_tool_calls (used 3, allowed 2; 1 made; the 2 "
        "tool calls left"
    ) in told
    assert "none of them was run" in told
    assert result.usage["tool_calls"] == 1


async def test_a_budget_lowered_mid_batch_stops_the_batch_before_the_next_call() -> None:
    # steering may lower max_tool_calls while a batch runs (update_budget at the boundary
    # after a call's result): the calls left are checked again before the next one, so the
    # batch stops there as a whole, not part-way into what is left of it.
    outbox = Outbox()
    handles = []

    @tool
    async def first() -> str:
        """Lower the budget while it runs."""
        await handles[0].update_budget(max_tool_calls=2)
        return "budget lowered"

    batch = tool_calls(tool_call("first", id="c0"), tool_call("send", n=1), tool_call("send", n=2))
    model = ScriptedModel([batch, reply("never sent")])
    agent = Agent("a", model, tools=[first, outbox.tool], limits=RunLimits(max_tool_calls=10))
    async with Runtime() as rt:
        handles.append(await rt.start(agent, "go"))
        result = await handles[0].result()
    assert outbox.sent == [] and result.status is RunStatus.LIMIT_EXCEEDED
    assert "used 3, allowed 2" in (result.error or "")


async def test_calls_refused_before_the_tool_runs_are_not_counted() -> None:
    # ports tests/test_usage_limits.py::test_failed_tool_calls_not_counted: a call the model
    # must correct (invalid or unreadable arguments, an unknown tool) never ran the tool, so
    # it does not spend max_tool_calls. It did: with max_tool_calls=1, one argument typo
    # ended the run limit_exceeded before the tool had run at all.
    unreadable = ModelResponse(
        tool_calls=[ToolCall(id="c2", name="add", parse_error="not JSON: '{a: 1'")]
    )
    model = ScriptedModel(
        [
            tool_call("add", a="one", b=2),
            unreadable,
            tool_call("nope"),
            tool_call("add", a=1, b=2),
            reply("three"),
        ]
    )
    result = await Agent("a", model, tools=[add], limits=RunLimits(max_tool_calls=1)).run("1+2")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "three")
    assert (result.usage["model_calls"], result.usage["tool_calls"]) == (5, 1)
    assert [len(tool_messages(r)) for r in model.requests] == [0, 1, 2, 3, 4]
    # the limit still holds: the next call that would run is refused before it is sent
    again = ScriptedModel([tool_call("add", a=1, b=2), tool_call("add", a=2, b=2)])
    stopped = await Agent("a", again, tools=[add], limits=RunLimits(max_tool_calls=1)).run("go")
    assert stopped.status is RunStatus.LIMIT_EXCEEDED and stopped.usage["tool_calls"] == 1


async def test_a_childs_refused_calls_are_not_counted_on_its_parent_either() -> None:
    # usage rolls up to the parent, and so does the refund of a call that never ran
    child = SubAgent(
        Agent(
            "child",
            ScriptedModel([tool_call("add", a="x", b=1), tool_call("add", a=1, b=1), "2"]),
            tools=[add],
        )
    )
    parent_model = ScriptedModel([tool_call("child", input="1+1"), reply("two")])
    parent = Agent(
        "p", parent_model, tools=[SubAgentTool(child)], limits=RunLimits(max_tool_calls=2)
    )
    result = await parent.run("go")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "two")
    assert tool_messages(parent_model.requests[1])[0].content == "2"
    assert result.usage["tool_calls"] == 2  # the parent's call of the child, the child's add


async def test_total_token_limit() -> None:
    # ports tests/test_usage_limits.py::test_total_token_limit: a response that takes the run
    # past its token budget ends it; its text is kept as partial output, not an answer.
    model = ScriptedModel([reply("one two three four five six")])
    result = await Agent("a", model, limits=RunLimits(max_tokens=5)).run("count")
    assert result.status is RunStatus.LIMIT_EXCEEDED and "max_tokens" in (result.error or "")
    assert result.output == "one two three four five six"


def used(input_tokens: int, output_tokens: int, response: ModelResponse) -> ModelResponse:
    response.usage = Usage(input_tokens=input_tokens, output_tokens=output_tokens)
    return response


async def test_input_token_limit() -> None:
    # ports tests/test_usage_limits.py::test_request_token_limit and
    # ::test_per_request_input_tokens_limit_is_not_cumulative (the cumulative half): the input
    # tokens of every request of the run count against max_input_tokens; past it the run ends,
    # and the output it had is kept, not reported as an answer.
    model = ScriptedModel([used(30, 2, tool_call("ping")), used(45, 3, reply("pong it is"))])
    limits = RunLimits(max_input_tokens=60)
    result = await Agent("a", model, tools=[ping], limits=limits).run("Hello")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert result.error is not None and "'max_input_tokens'" in result.error
    assert "used 75, allowed 60" in result.error and result.output == "pong it is"
    # within it, the run completes; using it exactly is allowed
    model = ScriptedModel([used(30, 2, tool_call("ping")), used(30, 3, reply("pong"))])
    done = await Agent("a", model, tools=[ping], limits=limits).run("Hello")
    assert (done.status, done.usage["input_tokens"]) == (RunStatus.COMPLETED, 60)
    # and the request after that is refused before it is sent
    model = ScriptedModel([used(60, 2, tool_call("ping")), reply("never sent")])
    refused = await Agent("a", model, tools=[ping], limits=limits).run("Hello")
    assert refused.status is RunStatus.LIMIT_EXCEEDED and len(model.requests) == 1


async def test_output_token_limit() -> None:
    # ports tests/test_usage_limits.py::test_response_token_limit: output tokens count
    # against max_output_tokens; what is left of it goes to the provider as max_tokens.
    model = ScriptedModel([used(100, 4, tool_call("ping")), used(200, 9, reply("a long answer"))])
    limits = RunLimits(max_output_tokens=10, max_tokens=1000)
    result = await Agent("a", model, tools=[ping], limits=limits).run("Hello")
    assert [r.settings["max_tokens"] for r in model.requests] == [10, 6]
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "'max_output_tokens'" in (result.error or "") and "used 13, allowed 10" in (
        result.error or ""
    )


async def test_token_limits_of_a_parent_bound_its_child() -> None:
    # ports tests/test_usage_limits.py::test_multi_agent_usage_no_incr (usage passed down):
    # a child's tokens count against its parent's limits, and the child's own limits are
    # never above what its parent has left.
    child_model = ScriptedModel([used(5, 40, reply("a long delegated answer"))])
    child = SubAgent(Agent("child", child_model))
    parent_model = ScriptedModel([used(10, 2, tool_call("child", input="go")), reply("never")])
    limits = RunLimits(max_output_tokens=30, max_input_tokens=100)
    parent = Agent("p", parent_model, tools=[SubAgentTool(child)], limits=limits)
    result = await parent.run("go")
    assert child_model.requests[0].settings["max_tokens"] == 28  # 30 less the parent's 2
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "max_output_tokens" in (result.error or "") and len(parent_model.requests) == 1
    assert result.usage["output_tokens"] == 42


async def test_a_run_a_child_took_past_its_token_budget_runs_no_more_tools() -> None:
    # ports tests/test_usage_limits.py::test_multi_agent_usage_no_incr (a delegate's tokens
    # end its parent's run): a child's response that took its parent past max_tokens ended
    # the child, but the parent went on running the rest of its batch, side effects and all,
    # on a budget known to be spent; only its next model request was refused.
    outbox = Outbox()
    child = SubAgent(Agent("child", ScriptedModel([used(5, 100, reply("a long answer"))])))
    batch = tool_calls(tool_call("child", input="go", id="c0"), tool_call("send", n=1, id="c1"))
    parent_model = ScriptedModel([used(10, 2, batch), reply("never sent")])
    parent = Agent(
        "p",
        parent_model,
        tools=[SubAgentTool(child), outbox.tool],
        limits=RunLimits(max_tokens=60),
    )
    async with Runtime() as rt:
        handle = await rt.start(parent, "go")
        result = await handle.result()
    assert outbox.sent == [] and len(parent_model.requests) == 1
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert f"'max_tokens' exceeded in run {handle.run_id}: used 117, allowed 60" in (
        result.error or ""
    )
    (answer,) = [m for m in handle.driver.messages if m.tool_call_id == "c1"]  # type: ignore[union-attr]
    assert answer.content.startswith("not run: the run ended (limit_exceeded")


async def test_a_streamed_run_past_its_output_token_limit_ends_after_its_tool_ran() -> None:
    # ports tests/test_usage_limits.py::test_streamed_text_limits: streamed, the token limits
    # hold as they do without streaming. The tool call's response is within the limit and its
    # tool runs; the answer after it takes the run past max_output_tokens and it ends there.
    model = ScriptedModel(
        [used(51, 5, tool_call("add", a=1, b=2)), used(52, 6, reply("three it is"))], stream=True
    )
    limits = RunLimits(max_output_tokens=10)
    result = await Agent("a", model, tools=[add], limits=limits).run("Hello")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert "'max_output_tokens'" in (result.error or "") and "used 11, allowed 10" in (
        result.error or ""
    )
    assert (result.usage["tool_calls"], result.usage["model_calls"]) == (1, 2)
    assert tool_messages(model.requests[1])[0].content == "3"


def test_token_limits_are_positive_counts() -> None:
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError):
            RunLimits(max_input_tokens=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            RunLimits(max_output_tokens=bad)  # type: ignore[arg-type]


# --- message history ----------------------------------------------------------------------


async def test_a_second_run_continues_the_first_runs_messages() -> None:
    # ports tests/test_agent.py::test_run_with_history_new: the second run sees the first
    # run's conversation (the system prompt once) and then its own prompt.
    # The first run's transcript is its RunResult's ``messages`` (pydantic-ai's
    # ``result.all_messages()``): there was no public way to it, so the conversation of an
    # ``agent.run(...)`` could not be continued, although ``history=`` says it takes one.
    first_model = ScriptedModel([tool_call("ping", id="c1"), reply("pong it is")])
    agent = Agent("a", first_model, tools=[ping], instructions="be brief")
    history = (await agent.run("Hello")).messages
    second_model = ScriptedModel([reply("again")])
    again = Agent("a", second_model, tools=[ping], instructions="be brief")
    result = await again.run("Hello again", history=history)
    assert result.output == "again"
    seen = second_model.requests[0].messages
    assert [(m.role, m.content) for m in seen] == [
        ("system", "be brief"),
        ("user", "Hello"),
        ("assistant", ""),
        ("tool", "pong"),
        ("assistant", "pong it is"),
        ("user", "Hello again"),
    ]
    assert seen[2].tool_calls[0].id == seen[3].tool_call_id == "c1"


async def test_a_results_messages_are_the_whole_transcript_also_of_a_run_stopped_part_way() -> None:
    # ports tests/test_agent.py::test_run_with_history_new (all_messages / new_messages): the
    # transcript is what the model saw and said, in order; a run stopped part-way through a
    # batch gives each call it did not run its stand-in result, so it can be sent on.
    model = ScriptedModel([tool_calls(tool_call("ping"), tool_call("ping")), reply("never")])
    result = await Agent("a", model, tools=[ping], limits=RunLimits(max_tool_calls=1)).run("Hi")
    assert result.status is RunStatus.LIMIT_EXCEEDED
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "tool"]
    assert all(m.content.startswith("not run: the run ended") for m in result.messages[2:])
    again = ScriptedModel([reply("fine")])
    assert (await Agent("a", again).run("go on", history=result.messages)).output == "fine"
    assert [m.role for m in again.requests[0].messages] == [
        *(m.role for m in result.messages),
        "user",
    ]


async def test_instructions_and_a_history_with_a_system_prompt() -> None:
    # ports tests/test_agent.py::test_instructions_with_message_history. Kept as documented
    # (docs/harness.md "Starting runs"; test_loop.py): pydantic-ai sends the agent's
    # instructions with every request, whatever system prompt the history holds; ours lead
    # the conversation only when the history has no system message of its own (a session's
    # history carries its first turn's), so a history from another agent keeps that agent's.
    history = [Message(role="system", content="You are a helpful assistant")]
    model = ScriptedModel([reply("success")])
    agent = Agent("a", model, instructions="You are a helpful assistant.")
    await agent.run("Hello", history=history)
    assert [(m.role, m.content) for m in model.requests[0].messages] == [
        ("system", "You are a helpful assistant"),
        ("user", "Hello"),
    ]
    # without one in the history, the instructions lead, as pydantic-ai's do
    model = ScriptedModel([reply("summary")])
    summarize = Agent("summarize", model, instructions="Summarize the conversation.")
    chat = [Message(role="user", content="Hi, I am James"), Message(role="assistant", content="Hi")]
    await summarize.run("Summarize it.", history=chat)
    assert model.requests[0].messages[0].content == "Summarize the conversation."


async def test_instructions_and_an_input_conversation_with_a_system_prompt() -> None:
    # the same conversation given as the run's input (a list of Messages) instead of as its
    # history: the instructions were put before its own system prompt, two system messages,
    # which chat templates that allow one leading system message refuse (llama.cpp: HTTP 500,
    # retried as a server error, and the run failed). Its own system prompt leads it now, as
    # a history's does.
    conversation = [
        Message(role="system", content="You are a pirate"),
        Message(role="user", content="Hello"),
    ]
    async with OpenAICompatServer(["Arr"], mode="llama.cpp") as server:
        model = LiteLLMModel(
            "openai/test-model", api_base=server.base_url, api_key="sk-test", max_retries=0
        )
        agent = Agent("a", model, instructions="You are a helpful assistant.")
        result = await agent.run(conversation)  # type: ignore[arg-type]
    assert (result.status, result.output) == (RunStatus.COMPLETED, "Arr")
    assert [(m["role"], m["content"]) for m in server.requests[0]["messages"]] == [
        ("system", "You are a pirate"),
        ("user", "Hello"),
    ]
    assert server.refusals == []


async def test_a_history_with_unanswered_tool_calls_is_refused() -> None:
    # ports tests/test_agent.py::
    # test_run_with_history_ending_on_model_response_with_tool_calls_and_user_prompt:
    # pydantic-ai raises UserError. Ours sent the conversation on, and the provider refused
    # it (OpenAI: an assistant message with tool_calls must be followed by their results)
    # after the run had started; now nothing starts and the error says which call.
    history = [
        Message(role="user", content="Hello"),
        Message(role="assistant", tool_calls=[ToolCall(id="call_123", name="ping")]),
    ]
    model = ScriptedModel([reply("never")])
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match="call_123"):
            await rt.start(Agent("a", model, tools=[ping]), "New question", history=history)
        assert rt.runs.list() == []
    assert model.requests == []


async def test_a_result_for_no_call_is_refused() -> None:
    # the other half of the same rule: a tool message must answer a call just before it
    # (OpenAI: messages with role 'tool' must be a response to a preceding 'tool_calls').
    stray = [
        Message(role="user", content="Hi"),
        Message(role="tool", content="x", tool_call_id="c9"),
    ]
    with pytest.raises(ConfigurationError, match="c9"):
        await Agent("a", ScriptedModel([reply("never")])).run("go", history=stray)


# --- events -------------------------------------------------------------------------------


async def test_each_tool_call_event_comes_before_its_result() -> None:
    # ports tests/test_streaming.py::test_event_ordering_call_before_result and
    # ::test_unknown_tool_call_events: each call has a tool.call then a tool.result event, by
    # its id, in the order of the calls; an unknown tool's result is marked as an error.
    recorder = EventRecorder()
    model = ScriptedModel(
        [tool_calls(tool_call("foobar", id="c1"), tool_call("ping", id="c2")), reply("done")]
    )
    async with Runtime(sinks=[recorder]) as rt:
        await (await rt.start(Agent("a", model, tools=[ping]), "go")).result()
    tool_events = [e for e in recorder.events if e.type in ("tool.call", "tool.result")]
    assert [(e.type, e.tool_call_id, e.error) for e in tool_events] == [  # type: ignore[attr-defined]
        ("tool.call", "c1", False),
        ("tool.result", "c1", True),
        ("tool.call", "c2", False),
        ("tool.result", "c2", False),
    ]


# --- streaming ----------------------------------------------------------------------------


async def test_streamed_text_and_tool_call_pieces_join_to_the_response() -> None:
    # ports tests/test_streaming.py::test_streamed_text_response and
    # ::test_function_tool_event_tool_call_id_properties: the text pieces join to the text,
    # a tool call's argument pieces to its JSON arguments, each under the call's id.
    model = ScriptedModel(
        [tool_call("add", a=1, b=2, id="c1"), reply("the sum is three")], stream=True
    )
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        result = await (await rt.start(Agent("a", model, tools=[add]), "add")).result()
    assert result.output == "the sum is three"
    deltas = recorder.of_type("model.delta")
    first = [d for d in deltas if d.tool_call_index == 0]
    assert first[0].tool_call_id == "c1" and first[0].tool_name == "add"
    assert json.loads("".join(d.args_delta for d in first)) == {"a": 1, "b": 2}
    assert "".join(d.text for d in deltas) == "the sum is three"


async def test_a_streamed_call_has_the_same_id_in_its_pieces_and_its_events() -> None:
    # ports tests/test_streaming.py::test_function_tool_event_tool_call_id_properties: the id
    # a UI sees on a call's streamed pieces is the id of its tool.call and tool.result events.
    # A call the loop gave a new id (none, or a shared one) was streamed under its old one,
    # so two calls sharing an id ran their argument pieces together.
    model = ScriptedModel(
        [
            tool_calls(
                tool_call("add", a=1, b=2, id="x"),
                tool_call("add", a=3, b=4, id="x"),
                ModelResponse(tool_calls=[ToolCall(id="", name="ping")]),
            ),
            reply("done"),
        ],
        stream=True,
    )
    recorder = EventRecorder()
    async with Runtime(sinks=[recorder]) as rt:
        await (await rt.start(Agent("a", model, tools=[add, ping]), "go")).result()
    firsts = [d for d in recorder.of_type("model.delta") if d.tool_name]  # type: ignore[attr-defined]
    streamed = [d.tool_call_id for d in firsts]  # type: ignore[attr-defined]
    called = [e.tool_call_id for e in recorder.of_type("tool.call")]  # type: ignore[attr-defined]
    assert streamed == called and len(set(called)) == 3 and called[0] == "x"


# --- retries from inside a tool -------------------------------------------------------------


async def test_a_tool_asking_for_a_retry_is_heard_and_its_call_counted() -> None:
    # ports tests/test_usage_limits.py::test_failed_tool_calls_not_counted (a tool raising
    # ModelRetry; ours raises ToolError, whose message the model reads as is). The model hears
    # the message and calls again, and the run completes. Kept on purpose, a difference: the
    # tool ran, so its call counts against max_tool_calls (docs/harness.md "Limits": only a
    # call refused before its tool runs is given back). pydantic-ai counts only successful
    # calls, and bounds a failing tool by its per-tool retries, ours opt-in only: a tool
    # that fails every time would otherwise never spend a run bounded by max_tool_calls.
    attempts: list[str] = []

    @tool
    def flaky_tool(x: str) -> str:
        """Fail the first time."""
        attempts.append(x)
        if len(attempts) == 1:
            raise ToolError("Temporary failure, please retry")
        return f"{x}-success"

    script = [tool_call("flaky_tool", x="a"), tool_call("flaky_tool", x="a"), reply("done")]
    model = ScriptedModel(script)
    result = await Agent("a", model, tools=[flaky_tool]).run("test")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
    assert tool_messages(model.requests[1])[0].content == "Temporary failure, please retry"
    assert tool_messages(model.requests[2])[-1].content == "a-success"
    assert (result.usage["model_calls"], result.usage["tool_calls"]) == (3, 2)
    # with max_tool_calls=1 the failed call spent it (pydantic-ai's run completes)
    attempts.clear()
    limited = Agent(
        "a", ScriptedModel(script), tools=[flaky_tool], limits=RunLimits(max_tool_calls=1)
    )
    stopped = await limited.run("test")
    assert stopped.status is RunStatus.LIMIT_EXCEEDED and attempts == ["a"]


async def test_a_tool_past_its_timeout_is_an_error_result_and_the_model_goes_on() -> None:
    # ports tests/test_tools.py::test_tool_timeout_triggers_retry and
    # ::test_tool_timeout_message_format: a tool that takes longer than its timeout is
    # abandoned; the model reads that it timed out (pydantic-ai: a RetryPromptPart "Timed
    # out") and answers.
    never = asyncio.Event()

    @tool(timeout_s=0.05)
    async def slow_tool() -> str:
        """Wait for ever."""
        await never.wait()
        return "done"

    model = ScriptedModel([tool_call("slow_tool", id="call-1"), reply("Tool timed out, giving up")])
    result = await Agent("a", model, tools=[slow_tool]).run("call slow_tool")
    assert (result.status, result.output) == (RunStatus.COMPLETED, "Tool timed out, giving up")
    (timed_out,) = tool_messages(model.requests[1])
    assert timed_out.tool_call_id == "call-1" and timed_out.metadata == {"error": True}
    assert "tool 'slow_tool' timed out after 0.05 s" in timed_out.content


async def test_an_unknown_tool_next_to_a_valid_one_does_not_stop_the_valid_one() -> None:
    # ports tests/test_agent.py::test_unknown_tool_with_valid_tool_does_not_exhaust_retries:
    # a response calling an unknown tool and a valid one, twice over, runs the valid one each
    # time (the unknown one is an error result) and the run ends on the model's answer.
    ran: list[int] = []

    @tool
    def valid_tool(x: int) -> str:
        """Record x."""
        ran.append(x)
        return f"ok {x}"

    both = [tool_calls(tool_call("nonexistent_tool"), tool_call("valid_tool", x=1)) for _ in "ab"]
    model = ScriptedModel([*both, reply("done")])
    result = await Agent("a", model, tools=[valid_tool]).run("go")
    assert (result.status, result.output, ran) == (RunStatus.COMPLETED, "done", [1, 1])
    answers = tool_messages(model.requests[2])
    assert [m.metadata.get("error", False) for m in answers] == [True, False, True, False]
    assert result.usage["tool_calls"] == 2  # the unknown calls are refused, not counted


def test_two_tools_of_one_name_are_refused() -> None:
    # ports tests/test_tools.py::test_repeat_tool and ::test_tool_name_conflict_hint:
    # pydantic-ai raises UserError when two tools share a name; so do we, when the agent is
    # made (ConfigurationError), not at its first run.
    @tool(name="add")
    def other_add(a: int, b: int) -> int:
        """Add, again."""
        return a + b

    with pytest.raises(ConfigurationError, match="two tools named 'add'"):
        Agent("a", ScriptedModel(["x"]), tools=[add, other_add])


async def test_tool_results_of_structured_values_are_json() -> None:
    # ports tests/test_tools.py::test_return_pydantic_model and ::test_return_unknown: what
    # a tool returns reaches the model as JSON (a pydantic model, a dict, None), text as is.
    @tool
    def return_pydantic_model(x: int) -> Foo:
        """A Foo."""
        return Foo(bar=x)

    @tool
    def return_dict() -> dict[str, Any]:
        """A dict."""
        return {"a": [1, 2], "b": None}

    @tool
    def return_nothing() -> None:
        """Nothing."""

    calls = [tool_call("return_pydantic_model", x=3), tool_call("return_dict")]
    model = ScriptedModel([tool_calls(*calls, tool_call("return_nothing")), reply("ok")])
    tools = [return_pydantic_model, return_dict, return_nothing]
    await Agent("a", model, tools=tools).run("go")
    assert [m.content for m in tool_messages(model.requests[1])] == [
        '{"bar": 3}',
        '{"a": [1, 2], "b": null}',
        "null",
    ]


async def test_tool_results_of_bytes_are_their_text_or_base64() -> None:
    # ports tests/test_tools.py::test_return_bytes (pydantic-ai's tool_return_ta dumps bytes
    # as base64, ser_json_bytes='base64'; a BinaryContent goes to the model as a file). Our
    # messages carry text only: bytes that are UTF-8 text reach the model as that text (they
    # went as a JSON string, quoted and escaped), other bytes as base64 that says what it is
    # (they were an error result, "cannot be made text", for a tool that had done its work).
    png = b"\x89PNG\r\n\x1a\n\x00"

    @tool
    def read_text() -> bytes:
        """A text file's bytes."""
        return 'h\u00e9llo "x"\n'.encode()

    @tool
    def read_image() -> bytes:
        """An image's bytes."""
        return png

    @tool
    def read_buffer() -> bytearray:
        """A buffer."""
        return bytearray(b"abc")

    @tool
    def read_view() -> memoryview:
        """A view of bytes."""
        return memoryview(b"abc")

    @tool
    def read_record() -> dict[str, Any]:
        """Bytes inside a structure."""
        return {"name": b"a", "raw": png}

    names = ["read_text", "read_image", "read_buffer", "read_view", "read_record"]
    model = ScriptedModel([tool_calls(*(tool_call(n) for n in names)), reply("ok")])
    tools = [read_text, read_image, read_buffer, read_view, read_record]
    await Agent("a", model, tools=tools).run("go")
    answers = tool_messages(model.requests[1])
    assert not any(m.metadata.get("error") for m in answers)
    assert [m.content for m in answers] == [
        'h\u00e9llo "x"\n',
        f"[binary data: 9 bytes, base64]\n{base64.b64encode(png).decode()}",
        "abc",
        "abc",
        json.dumps({"name": "YQ==", "raw": base64.b64encode(png).decode()}),
    ]


async def test_a_memoryview_inside_a_tool_result_is_read_as_bytes() -> None:
    # a memoryview inside a structure reached the model as its repr ("<memory at 0x...>")
    # where bytes there are their text, or all base64 when one is no text; it is read as
    # the bytes it views, as a top-level one is
    png = b"\x89PNG\r\n\x1a\n\x00"

    @tool
    def read_text() -> dict[str, Any]:
        """Views of text bytes inside a structure."""
        return {"data": memoryview(b"abc"), "parts": [memoryview(b"x"), b"y"]}

    @tool
    def read_image() -> dict[str, Any]:
        """A view of bytes that are no text, beside text bytes."""
        return {"name": b"a", "raw": memoryview(png)}

    model = ScriptedModel(
        [tool_calls(tool_call("read_text"), tool_call("read_image")), reply("ok")]
    )
    await Agent("a", model, tools=[read_text, read_image]).run("go")
    answers = tool_messages(model.requests[1])
    assert not any(m.metadata.get("error") for m in answers)
    assert [m.content for m in answers] == [
        json.dumps({"data": "abc", "parts": ["x", "y"]}),
        json.dumps({"name": "YQ==", "raw": base64.b64encode(png).decode()}),
    ]


# --- end strategy: tool calls beside an answer ------------------------------------------------


async def test_every_tool_call_beside_an_answer_runs_and_the_answer_is_not_the_output() -> None:
    # ports tests/test_agent.py's end_strategy tests (early / exhaustive) as far as they
    # apply: we have no output tool, so a final answer is a response with text and no tool
    # call. A response that carries valid output *and* tool calls is not final: every call of
    # it runs (as pydantic-ai's 'exhaustive' runs the function tools), in order, and the run
    # ends on the model's next answer.
    outbox = Outbox()
    beside = ModelResponse(
        text='{"bar": 1}',
        tool_calls=[
            ToolCall(id="c1", name="send", args={"n": 1}),
            ToolCall(id="c2", name="send", args={"n": 2}),
        ],
    )
    model = ScriptedModel([beside, '{"bar": 2}'])
    result = await Agent("a", model, tools=[outbox.tool], output_type=Foo).run("go")
    assert (result.status, result.output, outbox.sent) == (RunStatus.COMPLETED, Foo(bar=2), [1, 2])
    assert [m.tool_call_id for m in tool_messages(model.requests[1])] == ["c1", "c2"]


# --- message history and usage across runs ----------------------------------------------------


async def test_a_structured_run_continued_with_its_history() -> None:
    # ports tests/test_agent.py::test_run_with_history_new_structured: the second run sees
    # the first run's answer (its JSON) and gets an output of its own; each run's usage is
    # its own (pydantic-ai's result.usage() of the second run counts its requests only).
    first = Agent(
        "a", ScriptedModel([tool_call("ping"), '{"bar": 1}']), tools=[ping], output_type=Foo
    )
    one = await first.run("Hello")
    assert one.output == Foo(bar=1) and one.messages[-1].content == '{"bar": 1}'
    model = ScriptedModel(['{"bar": 2}'])
    two = await Agent("a", model, tools=[ping], output_type=Foo).run("again", history=one.messages)
    assert two.output == Foo(bar=2)
    assert [m.role for m in model.requests[0].messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert (one.usage["model_calls"], two.usage["model_calls"]) == (2, 1)
    assert two.usage["tool_calls"] == 0
    earlier = two.messages[: len(one.messages)]
    assert [(m.role, m.content) for m in earlier] == [(m.role, m.content) for m in one.messages]


async def test_a_history_ending_on_a_prompt_is_answered_without_a_new_one() -> None:
    # ports tests/test_agent.py::test_run_with_history_ending_on_model_request_and_no_user_prompt:
    # a run whose input is no message (input=[]) continues the history, which ends on the
    # user's prompt; the model answers it.
    model = ScriptedModel([reply("fine, thanks")])
    history = [Message(role="user", content="Hello"), Message(role="user", content="How goes it?")]
    result = await Agent("a", model, instructions="be brief").run([], history=history)  # type: ignore[arg-type]
    assert result.output == "fine, thanks"
    assert [(m.role, m.content) for m in model.requests[0].messages] == [
        ("system", "be brief"),
        ("user", "Hello"),
        ("user", "How goes it?"),
    ]


async def test_a_session_keeps_the_conversation_across_turns() -> None:
    # ports tests/test_agent.py::test_message_history and ::test_run_with_history_new (over a
    # SubAgentSession, which passes each turn's transcript to the next): the second turn
    # sees the first one's prompt, tool call, result and answer, with the system prompt once.
    model = ScriptedModel([tool_call("ping", id="c1"), reply("pong it is"), reply("again")])
    child = SubAgent(Agent("child", model, tools=[ping], instructions="be brief"))
    async with Runtime() as rt:
        session = child.session(runtime=rt)
        assert await session.send("Hello") == "pong it is"
        assert await session.send("Hello again") == "again"
    assert [(m.role, m.content) for m in model.requests[2].messages] == [
        ("system", "be brief"),
        ("user", "Hello"),
        ("assistant", ""),
        ("tool", "pong"),
        ("assistant", "pong it is"),
        ("user", "Hello again"),
    ]
    assert len(session.runs) == 2 and session.messages[-1].content == "again"


async def test_a_delegates_usage_rolls_up_into_its_parents() -> None:
    # ports tests/test_usage_limits.py::test_multi_agent_usage_no_incr and
    # ::test_multi_agent_usage_sync. Kept as documented (docs/harness.md "Limits": usage rolls
    # up to every ancestor): pydantic-ai leaves a delegate's usage out of its parent's unless
    # the tool passes usage=ctx.usage; a sub-agent of ours always spends its parent's budget,
    # so the parent's usage includes the child's requests and tokens.
    child_model = ScriptedModel([used(51, 4, reply("0"))])
    child = SubAgent(Agent("delegate", child_model))
    parent_model = ScriptedModel(
        [used(10, 2, tool_call("delegate", input="a")), used(12, 3, reply("delegated"))]
    )
    result = await Agent("p", parent_model, tools=[SubAgentTool(child)]).run("foobar")
    assert result.output == "delegated"
    assert result.usage == {
        "model_calls": 3,
        "tool_calls": 1,
        "input_tokens": 73,
        "output_tokens": 9,
        "cost": 0.0,
    }


async def test_a_run_with_nothing_to_send_is_refused() -> None:
    # ports the UserError of pydantic-ai's ModelRequestNode ("No message history, user
    # prompt, or instructions provided"): a run with no instructions, no history and no
    # input (input=[]) sent the model an empty conversation, which providers refuse (OpenAI:
    # messages must not be empty) once the run had started; a fake model answered it as if
    # asked something. Now nothing starts and the error says what to give.
    model = ScriptedModel([reply("never")])
    async with Runtime() as rt:
        with pytest.raises(ConfigurationError, match="nothing to send"):
            await rt.start(Agent("a", model), [])
        with pytest.raises(ConfigurationError, match="nothing to send"):
            await rt.start(Agent("a", model), [], history=[])
        assert rt.runs.list() == []
    assert model.requests == []
    # instructions alone are something to send, as in pydantic-ai
    briefed = ScriptedModel([reply("hello")])
    assert (await Agent("a", briefed, instructions="greet").run([])).output == "hello"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"bar": 1}\n```',
        '```json\r\n{"bar": 1}\r\n```',
        '```\n{\n  "bar": 1\n}',
        'Here is the JSON:\n\n```json\n{"bar": 1}\n``` Nice, right?',
    ],
)
async def test_structured_output_in_a_markdown_fence_is_read(answer: str) -> None:
    # ports tests/test_utils.py::test_strip_markdown_fences, which pydantic-ai's native and
    # prompted structured output go through (_output.py): a model that wraps its JSON in a
    # ```json fence (many do, local models above all) gave an answer that "is not valid Foo
    # output": it was asked again, a request spent, and a model that always fences failed
    # the run. The JSON inside the fence is the answer now, streamed or not.
    for stream in (False, True):
        model = ScriptedModel([answer], stream=stream)
        result = await Agent("a", model, output_type=Foo).run("Hello")
        assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(bar=1))
        assert len(model.requests) == 1


async def test_text_that_only_mentions_json_is_still_not_output() -> None:
    # the fence is looked for only around a JSON object, as pydantic-ai looks: text without
    # one is fed back as invalid output, and a JSON string holding a fence stays a string.
    model = ScriptedModel(["No JSON to be found", '{"bar": 2}'])
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert result.output == Foo(bar=2) and len(model.requests) == 2

    class Note(BaseModel):
        text: str

    fenced_inside = '{"text": "```json\\n{\\"bar\\": 1}\\n```"}'
    note = await Agent("a", ScriptedModel([fenced_inside]), output_type=Note).run("Hello")
    assert note.output == Note(text='```json\n{"bar": 1}\n```')


async def test_a_long_answer_with_many_unclosed_fences_is_read_in_linear_time() -> None:
    # ports the linear-time search of pydantic-ai's strip_markdown_fences (_utils.py): the
    # fenced JSON was searched for from every opening, and each opening without a closing
    # scanned to the end of the answer. An answer of 1 MB made of ```json blocks whose
    # objects are not followed by a closing fence held the event loop (and every run of the
    # runtime) for minutes; it is now fed back as invalid output at once.
    block = '```json\n{"bar": 1} and more text\n'
    model = ScriptedModel([block * 40_000, '```json\n{"bar": 2}\n```'])
    result = await Agent("a", model, output_type=Foo).run("Hello")
    assert (result.status, result.output) == (RunStatus.COMPLETED, Foo(bar=2))
    ask = model.requests[1].messages[-1]
    assert ask.metadata["retry"] == "invalid_output" and "validation error" in ask.content


async def test_arguments_a_custom_model_hands_over_as_json_text_are_read() -> None:
    # ports the FunctionModel tests of tests/test_agent.py (e.g.
    # ::test_unknown_tool_with_valid_tool_does_not_exhaust_retries), whose calls carry their
    # arguments as the JSON text a provider sends: ToolCallPart('valid_tool', '{"x": 1}').
    # A custom model of ours doing the same had every call refused with "arguments must be a
    # JSON object, got str. Call it again with an object": the model had sent one, so it
    # called again, and again. The text is read as the object it holds, for the tool and
    # in the transcript; text that is no JSON object is an error result as from a provider.
    def model_function(request: ModelRequest) -> ModelResponse:
        if len(request.messages) > 1:
            return reply("done")
        calls = [
            ToolCall(id="c1", name="add", args='{"a": 1, "b": 2}'),  # type: ignore[arg-type]
            ToolCall(id="c2", name="ping", args=""),  # type: ignore[arg-type]
            ToolCall(id="c3", name="add", args='{"a": 1,'),  # type: ignore[arg-type]
            ToolCall(id="c4", name="add", args="[1, 2]"),  # type: ignore[arg-type]
        ]
        return ModelResponse(tool_calls=calls)

    for stream in (False, True):
        model = FunctionModel(model_function, stream=stream)
        result = await Agent("a", model, tools=[add, ping]).run("1 + 2")
        assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
        answers = tool_messages(model.requests[1])
        assert [m.content for m in answers[:2]] == ["3", "pong"]
        assert "not valid JSON" in answers[2].content and "'{\"a\": 1,'" in answers[2].content
        assert "must be a JSON object, got list" in answers[3].content
        (calls,) = [m.tool_calls for m in model.requests[1].messages if m.tool_calls]
        assert [c.args for c in calls] == [{"a": 1, "b": 2}, {}, {}, {}]
        assert result.usage["tool_calls"] == 2  # the unreadable ones are refused, not counted


async def test_a_call_a_custom_model_hands_over_with_no_arguments_runs() -> None:
    # pydantic-ai's ToolCallPart(tool_name) has args=None by default, read as {} (its
    # args_as_dict): a tool without parameters called so runs. A custom model of ours handing
    # over ToolCall(..., args=None) (a provider's "arguments": null, mapped as it came) had
    # the call refused with "arguments must be a JSON object, got NoneType": the model, which
    # had nothing to add, could only call it again the same way.
    calls = [ToolCall(id="c1", name="ping", args=None)]  # type: ignore[arg-type]
    for stream in (False, True):
        model = ScriptedModel([ModelResponse(tool_calls=calls), reply("done")], stream=stream)
        result = await Agent("a", model, tools=[ping]).run("ping")
        assert (result.status, result.output) == (RunStatus.COMPLETED, "done")
        (answer,) = tool_messages(model.requests[1])
        assert (answer.content, answer.metadata) == ("pong", {})
        (sent,) = [m.tool_calls for m in model.requests[1].messages if m.tool_calls]
        assert [c.args for c in sent] == [{}]
        assert result.usage["tool_calls"] == 1


class EndlessStream(Model):
    """Streams a few words, then waits for ever; notes when its stream is closed."""

    name = "endless"
    streams = True

    def __init__(self) -> None:
        self.closed = False

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError("streams only")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        try:
            for piece in ["Hello", " ", "world", "!"]:
                yield StreamChunk(text_delta=piece)
            await asyncio.Event().wait()
            yield StreamChunk(response=ModelResponse(text="never"))
        finally:
            self.closed = True


async def test_leaving_run_stream_early_closes_the_models_stream_quietly() -> None:
    # ports tests/test_streaming.py::test_stream_text_early_break_cleanup: breaking out of
    # the stream closes the model's stream by the time aclose() returns (its finally ran).
    # The run's cancel, sent while Agent.run_stream's private runtime was closing, failed
    # with RuntimeClosed in a task nobody awaited: asyncio reported "Task exception was never
    # retrieved" (with its traceback) after every such early exit.
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        model = EndlessStream()
        stream = Agent("a", model).run_stream("test", messages_only=True)
        async for event in stream:
            assert event.text == "Hello"  # type: ignore[attr-defined]
            break
        await stream.aclose()
        assert model.closed
        for _ in range(3):  # let what the close left run, then collect it
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert [c.get("message") for c in reported] == []


async def test_a_history_ending_on_unanswered_calls_without_a_prompt_is_refused() -> None:
    # ports tests/test_agent.py::
    # test_run_with_history_ending_on_model_response_with_tool_calls_and_no_user_prompt. Kept
    # as documented (docs/harness.md "Starting runs": each tool call of a history must be
    # answered): pydantic-ai runs the pending calls and goes on; we refuse the history before
    # anything starts, whether a new prompt follows it or not.
    history = [
        Message(role="user", content="Hello"),
        Message(role="assistant", tool_calls=[ToolCall(id="call_123", name="ping")]),
    ]
    model = ScriptedModel([reply("never")])
    with pytest.raises(ConfigurationError, match="call_123"):
        await Agent("a", model, tools=[ping]).run([], history=history)  # type: ignore[arg-type]
    assert model.requests == []


async def test_consecutive_answers_in_a_history_are_sent_on() -> None:
    # ports tests/test_agent.py::test_consecutive_model_responses_in_history: a history with
    # two assistant messages in a row is continued. pydantic-ai merges them into one
    # response; ours are sent as they are (providers take consecutive assistant messages),
    # and the new prompt follows them.
    history = [
        Message(role="user", content="Hello..."),
        Message(role="assistant", content="...world!"),
        Message(role="assistant", content="Anything else I can help with?"),
    ]
    model = ScriptedModel([reply("All right then, goodbye!")])
    result = await Agent("a", model).run("No thanks", history=history)
    assert result.output == "All right then, goodbye!"
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "Hello..."),
        ("assistant", "...world!"),
        ("assistant", "Anything else I can help with?"),
        ("user", "No thanks"),
        ("assistant", "All right then, goodbye!"),
    ]


async def test_a_system_message_inside_a_history_is_no_system_prompt() -> None:
    # a steering message rendered as 'system' (SteeringRenderer(role="system")) in the middle
    # of a history was taken for the history's own system prompt: the new agent's
    # instructions were dropped, and the model ran without them. Only a leading system
    # message is the conversation's own prompt.
    history = [
        Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello"),
        Message(role="system", content="[steering] focus on the invoice"),
    ]
    model = ScriptedModel([reply("ok")])
    await Agent("a", model, instructions="You are a billing assistant.").run(
        "Go on", history=history
    )
    assert [(m.role, m.content) for m in model.requests[0].messages] == [
        ("system", "You are a billing assistant."),
        *((m.role, m.content) for m in history),
        ("user", "Go on"),
    ]


# --- tool descriptions from docstrings ------------------------------------------------------


def test_a_docstring_with_no_summary_describes_nothing_but_its_arguments() -> None:
    # ports tests/test_tools.py::test_docstring_google_no_body and ::test_only_returns_type:
    # a docstring that opens on its "Args:" (or "Returns:") section has no summary; that
    # section was read as one, and the tool described as "Args: foo: The foo thing. ...".
    # A "Returns:" section is described as pydantic-ai (2.78) describes it: a <returns> block
    # with no <summary> (the whole section its description, the function being annotated).
    @tool
    def no_body(foo: int) -> str:
        """
        Args:
            foo: The foo thing.
        """
        return str(foo)

    @tool
    def only_returns() -> str:
        """

        Returns:
            str: The result as a string.
        """
        return "foo"

    @tool
    def numpy_no_body(foo: int) -> str:
        """
        Parameters
        ----------
        foo : int
            The foo thing.
        """
        return str(foo)

    assert no_body.description == numpy_no_body.description == ""
    assert only_returns.description == (
        "<returns>\n<description>str: The result as a string.</description>\n</returns>"
    )
    for documented in (no_body, numpy_no_body):
        assert documented.parameters["properties"] == {
            "foo": {"description": "The foo thing.", "type": "integer"}
        }


def test_a_description_given_in_field_wins_over_the_docstrings() -> None:
    # ports tests/test_tools.py::test_docstring_google_no_body: pydantic-ai takes the
    # docstring's description only for a parameter whose Field gives none; ours replaced the
    # Field's description (in Annotated[...] or as the default) with the docstring's.
    @tool
    def described(
        foo: int,
        bar: Annotated[str, Field(description="from fields")],
        baz: int = Field(3, description="from the default"),
    ) -> str:
        """Describe.

        Args:
            foo: The foo thing.
            bar: The bar thing.
            baz: The baz thing.
        """
        return f"{foo} {bar} {baz}"

    assert described.parameters["properties"] == {
        "foo": {"description": "The foo thing.", "type": "integer"},
        "bar": {"description": "from fields", "type": "string"},
        "baz": {"default": 3, "description": "from the default", "type": "integer"},
    }


def test_keyword_args_and_other_parameters_sections_describe_arguments_too() -> None:
    # ports pydantic-ai's docstring reading (griffe): Google "Keyword Args:" and "Other
    # Parameters:" sections, and NumPy "Other Parameters", describe arguments as "Args:"
    # does; ours read only "Args:", "Arguments:" and "Parameters", so those arguments were
    # offered with no description.
    @tool
    def google(a: int, b: int, c: int) -> str:
        """Summary.

        Args:
            a: The a.

        Keyword Args:
            b: The b.

        Other Parameters:
            c: The c.
        """
        return f"{a}{b}{c}"

    @tool
    def numpy(a: int, b: int) -> str:
        """Summary.

        Parameters
        ----------
        a : int
            The a.

        Other Parameters
        ----------------
        b : int
            The b.
        """
        return f"{a}{b}"

    for documented, names in ((google, "abc"), (numpy, "ab")):
        assert documented.description == "Summary."
        assert documented.parameters["properties"] == {
            name: {"description": f"The {name}.", "type": "integer"} for name in names
        }


def test_numpy_parameters_sharing_a_line_share_its_description() -> None:
    # ports pydantic-ai's NumPy docstring reading (griffe): "a, b : int" describes both; ours
    # read the line as no parameter at all.
    @tool
    def shared(a: int, b: int) -> str:
        """Summary.

        Parameters
        ----------
        a, b : int
            Shared.
        """
        return f"{a}{b}"

    assert shared.parameters["properties"] == {
        "a": {"description": "Shared.", "type": "integer"},
        "b": {"description": "Shared.", "type": "integer"},
    }


class Scored(TypedDict):
    a: int
    """The first parameter"""
    b: int
    """The second parameter"""


@dataclasses.dataclass
class ScoredBox:
    a: int
    """The boxed parameter"""


def test_attribute_docstrings_of_a_typeddict_or_dataclass_describe_its_fields() -> None:
    # ports tests/test_tools.py::test_tool_parameters_with_attribute_docstrings: pydantic-ai
    # reads the docstrings under a TypedDict's (or a dataclass's) fields as their
    # descriptions, offered alone or beside another argument; ours offered them undescribed.
    @tool
    def get_score(data: Scored) -> int:
        """Score."""
        return data["a"] + data["b"]

    @tool
    def get_boxed(data: ScoredBox) -> int:
        """Box."""
        return data.a

    @tool
    def get_both(data: Scored, n: int) -> int:
        """Both."""
        return data["a"] * n

    assert get_score.parameters["properties"] == {
        "a": {"description": "The first parameter", "type": "integer"},
        "b": {"description": "The second parameter", "type": "integer"},
    }
    assert get_boxed.parameters["properties"] == {
        "a": {"description": "The boxed parameter", "type": "integer"}
    }
    defs = get_both.parameters["$defs"]["Scored"]["properties"]
    assert defs["a"] == {"description": "The first parameter", "type": "integer"}


# --- more tool results and arguments, as pydantic-ai reads them ------------------------------


@dataclasses.dataclass
class Located:
    x: int
    label: str


async def test_tool_results_of_dataclasses_lists_and_tuples_are_json() -> None:
    # ports tests/test_tools.py::test_return_pydantic_model for the other structures a tool
    # returns: pydantic-ai dumps each as JSON (a dataclass as its fields, a tuple or a set as
    # a list); ours has spaces after separators, the same JSON.
    values: dict[str, Any] = {
        "a_dataclass": Located(x=1, label="a"),
        "models": [Foo(bar=1), Foo(bar=2)],
        "a_tuple": (1, "a"),
        "a_set": {3},
        "a_number": 1.5,
        "a_bool": True,
    }

    def giving(name: str, value: Any) -> Any:
        def give() -> Any:
            return value

        return tool(give, name=name, description=f"Give {name}.")

    tools = [giving(name, value) for name, value in values.items()]
    calls = [tool_call(name) for name in values]
    model = ScriptedModel([tool_calls(*calls), reply("ok")])
    await Agent("a", model, tools=tools).run("go")
    contents = [json.loads(m.content) for m in tool_messages(model.requests[1])]
    assert contents == [
        {"x": 1, "label": "a"},
        [{"bar": 1}, {"bar": 2}],
        [1, "a"],
        [3],
        1.5,
        True,
    ]


async def test_arguments_are_validated_as_pydantic_ai_validates_them() -> None:
    # ports tests/test_tools.py::test_call_tool_without_unrequired_parameters and
    # ::test_tool_call_part_args_as_dict: lax validation as in pydantic-ai ("1" and 1.0 are
    # the integer 1, 1.5 is not), arguments as JSON text, and "" for a tool of no arguments.
    @tool
    def no_args_tool() -> str:
        """Nothing."""
        return "none"

    given = [
        ToolCall(id="c1", name="add", args={"a": "1", "b": 2}),
        ToolCall(id="c2", name="add", args={"a": 1.0, "b": 2}),
        ToolCall(id="c3", name="add", args='{"a": 4, "b": 17}'),
        ToolCall(id="c4", name="no_args_tool", args=""),
        ToolCall(id="c5", name="add", args={"a": 1.5, "b": 2}),
    ]
    model = ScriptedModel([ModelResponse(tool_calls=given), reply("finished")])
    result = await Agent("a", model, tools=[add, no_args_tool]).run("go")
    assert result.output == "finished"
    answers = [m.content for m in tool_messages(model.requests[1])]
    assert answers[:4] == ["3", "3", "21", "none"]
    assert "fractional part" in answers[4] and "Call it again" in answers[4]


async def test_a_sync_tool_past_its_timeout_is_an_error_result_and_the_model_goes_on() -> None:
    # ports tests/test_tools.py::test_sync_tool_timeout_triggers_retry: a blocking `def` tool
    # times out too; its thread is abandoned (it runs to its end, its result dropped) and the
    # model reads that it timed out.
    release = threading.Event()

    @tool(timeout_s=0.05)
    def slow_sync_tool() -> str:
        """Block until released."""
        release.wait()
        return "done"

    model = ScriptedModel(
        [tool_call("slow_sync_tool", id="call-1"), reply("Tool timed out, giving up")]
    )
    try:
        result = await Agent("a", model, tools=[slow_sync_tool]).run("call slow_sync_tool")
    finally:
        release.set()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "Tool timed out, giving up")
    (timed_out,) = tool_messages(model.requests[1])
    assert timed_out.tool_call_id == "call-1" and timed_out.metadata == {"error": True}
    assert "tool 'slow_sync_tool' timed out after 0.05 s" in timed_out.content


async def test_a_tool_within_its_timeout_completes() -> None:
    # ports tests/test_tools.py::test_tool_with_timeout_completes_successfully
    @tool(timeout_s=30)
    async def slow_but_allowed_tool() -> str:
        """Yield once, then answer."""
        await asyncio.sleep(0)
        return "completed successfully"

    model = ScriptedModel([tool_call("slow_but_allowed_tool", id="call-1"), reply("ok")])
    result = await Agent("a", model, tools=[slow_but_allowed_tool]).run("go")
    assert result.output == "ok"
    (answer,) = tool_messages(model.requests[1])
    assert answer.content == "completed successfully" and answer.metadata == {}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_tool_is_cancelled_with_the_run_its_caller_cancels(stream: bool) -> None:
    # ports tests/test_tools.py::test_tool_cancelled_when_agent_cancelled: cancelling the task
    # awaiting `agent.run` (or reading `agent.run_stream`) cancels the tool under way.
    called, cancelled = asyncio.Event(), asyncio.Event()

    @tool
    async def hold() -> None:
        """Wait until cancelled."""
        called.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    agent = Agent("a", ScriptedModel([tool_call("hold"), reply("never")]), tools=[hold])

    async def run_agent() -> None:
        if stream:
            async for _ in agent.run_stream("call hold"):
                pass
        else:
            await agent.run("call hold")

    task = asyncio.create_task(run_agent())
    await called.wait()
    task.cancel()
    await cancelled.wait()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_cancelling_the_caller_waits_for_the_tools_cleanup() -> None:
    # ports tests/test_agent.py::test_parallel_tool_outer_cancellation_waits_for_tool_cleanup
    # (our calls of a batch run in turn, so only the first has started): the cancelled
    # `agent.run` returns only after the tool's `finally` has finished.
    started, cleanup_started = asyncio.Event(), asyncio.Event()
    cleanup_can_finish, cleanup_finished = asyncio.Event(), asyncio.Event()

    @tool
    async def slow_tool_a() -> str:
        """Wait, then clean up slowly."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleanup_started.set()
            await cleanup_can_finish.wait()
            cleanup_finished.set()
        return "done"

    @tool
    async def slow_tool_b() -> str:
        """Never reached."""
        return "done"

    both = tool_calls(tool_call("slow_tool_a"), tool_call("slow_tool_b"))
    agent = Agent("a", ScriptedModel([both, reply("never")]), tools=[slow_tool_a, slow_tool_b])
    task = asyncio.create_task(agent.run("call tools"))
    await started.wait()
    task.cancel()
    await cleanup_started.wait()
    assert not task.done()
    cleanup_can_finish.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleanup_finished.is_set()
