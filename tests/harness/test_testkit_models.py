"""The testkit's fake models, response builders and fake clock."""

from __future__ import annotations

import math
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tinyagents import Agent, RunLimits, RunStatus, Runtime, _clock, tool
from tinyagents.errors import ConfigurationError, ModelError
from tinyagents.harness import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec, Usage
from tinyagents.testkit import (
    EPOCH,
    FakeClock,
    FunctionModel,
    ModelFunctionError,
    ScriptedModel,
    ScriptExhaustedError,
    SequentialIds,
    count_tokens,
    fake_agent,
    reply,
    tool_call,
    tool_calls,
    use_clock,
    use_ids,
)


def ask(text: str, **kw) -> ModelRequest:
    return ModelRequest(messages=[Message(role="user", content=text)], **kw)


# --- builders -------------------------------------------------------------------------------


def test_reply_is_a_final_answer():
    assert reply("done") == ModelResponse(text="done", finish_reason="stop")
    assert reply("done", usage=Usage(output_tokens=9)).usage == Usage(output_tokens=9)


def test_tool_call_merges_keywords_into_args_and_draws_ids_from_the_id_source():
    with use_ids(SequentialIds()):
        first = tool_call("search", {"query": "billing"}, limit=3)
        second = tool_call("search")

    assert first == ModelResponse(
        tool_calls=[ToolCall(id="call-0001", name="search", args={"query": "billing", "limit": 3})],
        finish_reason="tool_calls",
    )
    assert second.tool_calls[0].id == "call-0002"
    assert tool_call("x", id="fixed").tool_calls[0].id == "fixed"


def test_tool_calls_puts_several_calls_in_one_response():
    a = ToolCall(id="a", name="one", args={})
    response = tool_calls(tool_call("two", id="b", n=1), a)

    assert [(c.id, c.name) for c in response.tool_calls] == [("b", "two"), ("a", "one")]
    assert response.text == "" and response.finish_reason == "tool_calls"


# --- ScriptedModel --------------------------------------------------------------------------


async def test_scripted_model_answers_in_order_from_responses_strings_and_callables():
    model = ScriptedModel(
        [
            tool_call("search", id="c1", query="q"),
            "plain text",
            lambda request: f"you said {request.messages[-1].content}",
        ]
    )

    first = await model.request(ask("a"))
    second = await model.request(ask("b"))
    third = await model.request(ask("c"))

    assert first.tool_calls == [ToolCall(id="c1", name="search", args={"query": "q"})]
    assert (second.text, second.finish_reason) == ("plain text", "stop")
    assert third.text == "you said c"
    assert model.remaining == 0


async def test_scripted_model_records_a_snapshot_of_each_request():
    model = ScriptedModel(["one", "two"])
    spec = ToolSpec(name="t", description="", parameters={})
    messages = [Message(role="user", content="first")]
    request = ModelRequest(messages=messages, tools=[spec], run_id="r-1", model="m")

    await model.request(request)
    messages.append(Message(role="assistant", content="later"))  # the loop keeps appending
    messages[0].content = "edited"

    recorded = model.requests[0]
    assert [(m.role, m.content) for m in recorded.messages] == [("user", "first")]
    assert recorded.request_id == request.request_id
    assert (recorded.run_id, recorded.model, recorded.tools) == ("r-1", "m", [spec])


async def test_a_recorded_request_keeps_its_deadline():
    # left out of the snapshot: a test of a run's deadline_s read None in model.requests
    model = FunctionModel(lambda request: "ok")
    await model.request(ask("hi", deadline=1234.5, response_format={"type": "json_object"}))

    recorded = model.requests[0]
    assert (recorded.deadline, recorded.response_format) == (1234.5, {"type": "json_object"})


async def test_running_out_of_script_names_how_many_were_scripted():
    model = ScriptedModel(["only one"], name="researcher")
    await model.request(ask("a"))

    with pytest.raises(ScriptExhaustedError) as caught:
        await model.request(ask("again please"))

    message = str(caught.value)
    assert "'researcher' got model request 2 but only 1 response(s) were scripted" in message
    assert "user 'again please'" in message
    assert isinstance(caught.value, ModelError)
    assert len(model.requests) == 2  # the failed request is still recorded for assertions
    assert model.remaining == 0  # none left, not -1


@pytest.mark.parametrize("entry", [42, None, b"bytes", Message(role="assistant", content="x")])
def test_a_script_entry_that_is_no_response_is_refused_when_the_model_is_made(entry):
    # Refused at the first request only, as a TypeError inside the run: a typo in a script
    # surfaced as a failed run a long way from the line that made it.
    with pytest.raises(ConfigurationError, match=r"response 2 .*ModelResponse, a string or"):
        ScriptedModel(["fine", entry])


async def test_default_usage_counts_words_so_token_limits_are_testable():
    model = ScriptedModel(["three word answer", tool_call("f", id="c", x=1)])
    request = ModelRequest(
        messages=[
            Message(role="system", content="be brief"),
            Message(role="user", content="what is it"),
        ]
    )

    text = await model.request(request)
    call = await model.request(request)

    assert text.usage == Usage(input_tokens=5, output_tokens=3)
    # a call costs one token for the call plus the words of its JSON arguments ('{"x": 1}')
    assert call.usage == Usage(input_tokens=5, output_tokens=1 + 2)
    assert count_tokens("  a  b\nc ") == 3


async def test_explicit_usage_and_model_are_kept():
    model = ScriptedModel([ModelResponse(text="x", usage=Usage(input_tokens=100), model="big")])

    response = await model.request(ask("hello"))

    assert response.usage == Usage(input_tokens=100)
    assert response.model == "big"


async def test_the_model_name_defaults_to_the_requested_one_then_the_fake_name():
    model = ScriptedModel(["a", "b"], name="fake")

    assert (await model.request(ask("x", model="openai/small"))).model == "openai/small"
    assert (await model.request(ask("x"))).model == "fake"


async def test_a_scripted_response_object_reused_twice_is_not_shared():
    shared = reply("same")
    model = ScriptedModel([shared, shared])

    first = await model.request(ask("one"))
    second = await model.request(ask("two words"))

    assert first is not second
    assert (first.usage.input_tokens, second.usage.input_tokens) == (1, 2)
    assert shared.usage == Usage()


async def test_a_callable_returning_something_else_is_a_clear_type_error():
    model = ScriptedModel([lambda request: 42])

    with pytest.raises(TypeError, match="return a ModelResponse or a string"):
        await model.request(ask("x"))


async def test_scripted_model_streams_through_the_default_stream():
    model = ScriptedModel(["streamed"])

    chunks = [chunk async for chunk in model.stream(ask("x"))]

    assert chunks[-1].response is not None and chunks[-1].response.text == "streamed"
    assert len(model.requests) == 1


# --- FunctionModel --------------------------------------------------------------------------


async def test_function_model_accepts_async_and_sync_functions():
    async def async_fn(request: ModelRequest) -> ModelResponse:
        return tool_call("lookup", id="c", key=request.messages[-1].content)

    def sync_fn(request: ModelRequest) -> str:
        return f"{len(request.tools)} tools"

    async_model, sync_model = FunctionModel(async_fn), FunctionModel(sync_fn)
    spec = ToolSpec(name="t", description="", parameters={})

    called = await async_model.request(ask("k1"))
    counted = await sync_model.request(ask("x", tools=[spec]))

    assert called.tool_calls == [ToolCall(id="c", name="lookup", args={"key": "k1"})]
    assert called.usage == Usage(input_tokens=1, output_tokens=1 + 2)
    assert counted.text == "1 tools"
    assert [len(m.requests) for m in (async_model, sync_model)] == [1, 1]


@pytest.mark.parametrize("fn", ["not callable", None, 42])
def test_function_model_refuses_a_function_it_cannot_call(fn):
    # pydantic-ai raises TypeError at construction; ours was made and then failed the run
    # with "'str' object is not callable" from inside the model call.
    with pytest.raises(ConfigurationError, match="FunctionModel needs a callable"):
        FunctionModel(fn)


@pytest.mark.parametrize("turns", [-1, 1.5, True, "2"])
def test_fake_agent_refuses_turns_that_are_no_count(turns: object) -> None:
    # -1 was taken as 0 (an agent that answers at once), 1.5 failed inside range()
    with pytest.raises(ConfigurationError, match=r"turns must be a whole number of at least 0"):
        fake_agent("worker", turns=turns)  # type: ignore[arg-type]


async def test_function_model_streams_its_answers_in_pieces_like_a_scripted_one():
    # pydantic-ai's FunctionModel(stream_function=...) lets a test stream a computed answer;
    # ours had no stream mode, so only a fixed script could drive a streaming run.
    def answer(request: ModelRequest) -> ModelResponse | str:
        if request.messages[-1].role == "user":
            return tool_call("lookup", id="c1", key=request.messages[-1].content)
        return f"found {request.messages[-1].content}"

    model = FunctionModel(answer, stream=True, args_piece=4)
    assert model.streams
    chunks = [chunk async for chunk in model.stream(ask("abc"))]
    assert [c.text_delta for c in chunks] == [""] * len(chunks)
    assert (chunks[0].tool_call_id, chunks[0].tool_name) == ("c1", "lookup")
    assert "".join(c.args_delta for c in chunks) == '{"key": "abc"}'
    assert chunks[-1].response is not None and len(model.requests) == 1

    deltas: list[str] = []
    async with Runtime() as rt:

        @tool
        def lookup(key: str) -> str:
            """Look a key up."""
            return key.upper()

        handle = await rt.start(Agent("a", model, tools=[lookup]), "abc")
        async for event in handle.stream("messages"):
            deltas.append(event.text)
        result = await handle.result()
    assert (result.status, result.output) == (RunStatus.COMPLETED, "found ABC")
    assert "".join(deltas) == "found ABC"


# --- FakeClock ------------------------------------------------------------------------------


def test_fake_clock_moves_only_when_advanced():
    clock = FakeClock()

    assert clock.now() == datetime(2025, 1, 1, tzinfo=UTC)
    assert clock.monotonic() == 0.0
    clock.advance(90)
    assert clock.now() == datetime(2025, 1, 1, 0, 1, 30, tzinfo=UTC)
    assert clock.monotonic() == 90.0


def test_fake_clock_ticks_after_every_reading():
    start = datetime(2030, 6, 1, tzinfo=UTC)
    clock = FakeClock(start, tick=0.5)

    assert [clock.now(), clock.now()] == [start, start + timedelta(seconds=0.5)]
    assert clock.monotonic() == 1.0


def test_fake_clock_refuses_to_go_backwards_or_be_naive():
    with pytest.raises(ConfigurationError, match=r"backwards.*takes a finite number of seconds"):
        FakeClock().advance(-1)
    with pytest.raises(ConfigurationError, match="timezone"):  # and a ValueError, as it was
        FakeClock(datetime(2025, 1, 1))
    with pytest.raises(ConfigurationError, match="tick"):
        FakeClock(tick=-1)


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -math.inf, 1e300])
def test_fake_clock_refuses_time_that_is_no_number_or_past_the_calendar(seconds: float):
    clock = FakeClock()
    clock.advance(2)
    with pytest.raises(ValueError, match=r"advance\(.*\) takes") as exc:
        clock.advance(seconds)
    assert isinstance(exc.value, ConfigurationError)  # and a ValueError, as it was
    assert clock.monotonic() == 2.0  # unchanged: a refused advance moves nothing
    assert clock.now() == EPOCH + timedelta(seconds=2)
    with pytest.raises(ValueError, match="tick"):
        FakeClock(tick=seconds)


@pytest.mark.parametrize("seconds", ["5", None, True, [1]])
def test_fake_clock_advance_by_what_is_no_number_is_a_configuration_error(seconds: object):
    # "5" and None were a TypeError from math.isfinite ("must be real number"), naming no
    # call; True was taken as one second
    clock = FakeClock()
    with pytest.raises(ConfigurationError, match=r"advance\(.*\) takes a finite number of sec"):
        clock.advance(seconds)  # type: ignore[arg-type]
    assert clock.monotonic() == 0.0


def test_fake_clock_drives_the_library_clock_inside_use_clock():
    clock = FakeClock()

    with use_clock(clock):
        clock.advance(5)
        assert _clock.now() == datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC)
        assert _clock.monotonic() == 5.0
    assert _clock.now() != clock.now()


# --- import cost ----------------------------------------------------------------------------


def test_importing_the_testkit_does_not_load_litellm():
    # The testkit's OpenAI-compatible server loads aiohttp (~0.1 s, installed with litellm)
    # with the testkit; litellm itself (seconds) only loads when a LiteLLMModel calls it.
    code = (
        "import sys, tinyagents.testkit as tk\n"
        "assert tk.ScriptedModel and tk.FakeClock and tk.EventRecorder and tk.OpenAICompatServer\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")

    assert out[0] == "False"


@pytest.mark.parametrize(
    ("produced", "shown"),
    [
        (None, "None"),
        (42, "int 42"),
        ({"text": "hi"}, "dict {'text': 'hi'}"),
        (["a"], "list ['a']"),
    ],
)
async def test_a_function_model_returning_something_else_says_what_and_what_is_expected(
    produced: object, shown: str
) -> None:
    # it was a bare TypeError naming the type only; now a typed error naming the function,
    # the request, what it returned and what a model function returns
    def answer(request: ModelRequest) -> Any:
        return produced

    model = FunctionModel(answer, name="fake")
    with pytest.raises(ModelFunctionError) as raised:
        await model.request(ask("x"))
    message = str(raised.value)
    assert f"model 'fake' produced {shown}" in message
    assert "answer" in message and "request 1" in message
    assert "return a ModelResponse or a string (reply(...), tool_call(...) or" in message
    assert ("forget to return" in message) is (produced is None)
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ConfigurationError)
    result = await Agent("a", FunctionModel(answer, name="fake")).run("go")
    assert result.status == RunStatus.FAILED
    assert "ModelFunctionError" in (result.error or "") and shown in (result.error or "")


def test_fake_agent_of_a_huge_number_of_turns_builds_no_script_of_that_size() -> None:
    # turns=10**9 built a list of a billion responses before the agent was made
    agent = fake_agent("huge", turns=10**9, answer="fin")
    model = agent.model
    assert isinstance(model, ScriptedModel)
    assert not isinstance(model.responses, list)
    assert len(model.responses) == 10**9 + 1 and model.remaining == 10**9 + 1
    first, last = model.responses[0], model.responses[10**9]
    assert isinstance(first, ModelResponse) and isinstance(last, ModelResponse)
    assert [(c.name, c.args) for c in first.tool_calls] == [("step", {"n": 1})]
    assert model.responses[0] is first  # made once, kept: the same call id when read again
    assert last == reply("fin")
    assert [(c.name, c.args) for c in model.responses[-2].tool_calls] == [("step", {"n": 10**9})]


async def test_fake_agent_of_many_turns_runs_as_its_eager_script_did() -> None:
    # past the eager bound the script is made as it is read: the run is the same
    turns = 10_001
    agent = fake_agent("many", turns=turns)
    assert not isinstance(agent.model.responses, list)
    result = await agent.run("go", limits=RunLimits(max_model_calls=3))
    assert result.status == RunStatus.LIMIT_EXCEEDED, result.error
    requests = agent.model.requests
    assert len(requests) == 3
    steps = [m.tool_calls[0].args for m in result.messages if m.role == "assistant"]
    assert steps[:2] == [{"n": 1}, {"n": 2}]


def test_fake_agent_of_few_turns_keeps_its_script_as_a_list() -> None:
    agent = fake_agent("few", turns=3)
    assert isinstance(agent.model.responses, list) and len(agent.model.responses) == 4
